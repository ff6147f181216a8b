module github.com/forage-go/forage/examples/ohlcv

go 1.25.0

require (
	github.com/forage-go/forage v0.1.0
	github.com/forage-go/forage/pgstore v0.1.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/vbauerster/mpb/v8 v8.16.1
	golang.org/x/term v0.45.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/VividCortex/ewma v1.2.0 // indirect
	github.com/acarl005/stripansi v0.0.0-20180116102854-5a71ef0e047d // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/clipperhouse/uax29/v2 v2.7.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-runewidth v0.0.28 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/vbauerster/cupwriter v0.0.4 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
