// Package bench measures forage side by side with its peers: the baselines
// behind the performance tables of the README and docs/MEASURED.md.
//
// It is a nested module so that the peers it measures against (the AWS SDK's
// retry package) never enter the core module's go.mod. It has no API; its
// content is tests and one command:
//
//   - TestPeers runs the provider-policy simulation of
//     [github.com/forage-go/forage/budget]'s TestGoodput (a 50 req/s limit
//     the clients are not told, 40±20 ms latency, 8 workers, five simulated
//     minutes per policy under testing/synctest) with forage's zero-Config
//     Provider, with a hand-written client pacing on
//     [golang.org/x/time/rate] at fixed guesses of the limit, and with the
//     AWS SDK for Go v2's adaptive retry mode, and prints goodput and the
//     share of refused requests per policy and client. It holds only
//     forage's column to targets; the peers' columns are a measurement.
//   - The goodput-http command (bench/cmd/goodput-http) runs the same
//     clients in real time: it serves each provider policy (limits of 13 to
//     200 req/s, burst 1 and 2, fixed windows with and without usage
//     headers, random 5xx noise, ...) over loopback HTTP and runs the built
//     examples/ohlcv binary, a budget.Transport crawl and the peers against
//     it for 30 s and 120 s, reporting goodput, refused share, bans and the
//     time to 90% of the limit. The simulated table is the fast regression
//     test; the real-time one is what a user meets.
//
// Both share their clients through bench/internal/clients. Run them with
//
//	cd bench && go test -count=1 -run TestPeers -v .
//	make goodput-http   # from the repository root; about 26 minutes
//
// The admit-path comparison with x/time/rate (ns/op, single and parallel)
// lives next to the limiter it measures, in gcra/bench_test.go
// (BenchmarkAllowNAt against BenchmarkRateAllowN, and their Parallel forms),
// because it needs no other module.
package bench
