// Package bench measures forage side by side with its peers: the baselines
// behind the README's performance tables.
//
// It is a nested module so that the peers it measures against (the AWS SDK's
// retry package) never enter the core module's go.mod. It has no API; its
// content is tests:
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
//
// Run it with
//
//	cd bench && go test -count=1 -run TestPeers -v .
//
// The admit-path comparison with x/time/rate (ns/op, single and parallel)
// lives next to the limiter it measures, in gcra/bench_test.go
// (BenchmarkAllowAt against BenchmarkRateAllowN, and their Parallel forms),
// because it needs no other module.
package bench
