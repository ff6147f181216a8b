module github.com/forage-go/forage/bench

go 1.25.0

require (
	github.com/aws/aws-sdk-go-v2 v1.47.7
	github.com/aws/smithy-go v1.28.8
	github.com/forage-go/forage v0.1.0
	github.com/jackc/pgx/v5 v5.12.0
	golang.org/x/time v0.15.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
