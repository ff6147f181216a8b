module github.com/forage-go/forage

go 1.25.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/google/go-cmp v0.7.0
	github.com/sony/gobreaker/v2 v2.4.0
	golang.org/x/time v0.15.0
	pgregory.net/rapid v1.3.0
)
