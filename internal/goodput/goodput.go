// Package goodput holds the provider policies of the goodput simulations:
// budget's TestGoodput and bench's TestPeers run the same [Scenarios], so
// their tables stay comparable. Each is a plain [providertest.Config]; a
// host can build the same to test its own collector.
package goodput

import (
	"time"

	"github.com/forage-go/forage/providertest"
)

// Scenario is one provider policy of the goodput simulations: a server
// configuration and the true limit it enforces over time, which the client
// under test is not told.
type Scenario struct {
	// Name labels the row, e.g. "bare 429".
	Name string
	// Config configures the server (providertest.New).
	Config providertest.Config
	// Limit returns the true limit, requests/s, at offset d from the start.
	Limit func(d time.Duration) float64
}

// Allowed returns how many requests the true limit allowed over run: the
// denominator of goodput.
func (s Scenario) Allowed(run time.Duration) float64 {
	var n float64
	for d := time.Duration(0); d < run; d += time.Second {
		n += s.Limit(d)
	}
	return n
}

// Scenarios returns the eight standard policies at a true limit of rate
// requests/s, with the given latency (jitter adds up to half of it), for a
// run of the given length (the limit-halving scenario halves at run/2):
// GCRA at burst 1 and 10 answering 429 with Retry-After, a fixed window, a
// bare 429, 503, a silent slow-down, a ban (418 for 2 minutes after 5
// violations in a minute), and a limit that halves mid-run.
func Scenarios(rate float64, latency, run time.Duration) []Scenario {
	flat := func(time.Duration) float64 { return rate }
	base := func(l providertest.Limit, a providertest.Answer) providertest.Config {
		return providertest.Config{
			Seed: 1, Limit: l, Answer: a,
			Latency: latency, Jitter: latency / 2,
			Symbols: []providertest.Symbol{{Name: "BTCUSDT"}},
		}
	}
	halving := base(providertest.Limit{Rate: rate, Burst: 1}, providertest.Answer{})
	halving.Schedule = map[time.Duration]providertest.Limit{run / 2: {Rate: rate / 2, Burst: 1}}
	ban := base(providertest.Limit{Rate: rate, Burst: 1}, providertest.Answer{BanAfter: 5, BanWindow: time.Minute, BanFor: 2 * time.Minute})
	return []Scenario{
		{"gcra burst 1, 429+retry-after", base(providertest.Limit{Rate: rate, Burst: 1}, providertest.Answer{}), flat},
		{"gcra burst 10, 429+retry-after", base(providertest.Limit{Rate: rate, Burst: 10}, providertest.Answer{}), flat},
		{"fixed window, 429+retry-after", base(providertest.Limit{Count: int(rate * 60), Window: time.Minute}, providertest.Answer{}), flat},
		{"bare 429", base(providertest.Limit{Rate: rate, Burst: 1}, providertest.Answer{NoRetryAfter: true}), flat},
		{"503", base(providertest.Limit{Rate: rate, Burst: 1}, providertest.Answer{Status: 503}), flat},
		{"slow-down", base(providertest.Limit{Rate: rate, Burst: 1}, providertest.Answer{SlowDown: true}), flat},
		{"ban after 5 violations", ban, flat},
		{"limit halves mid-run", halving, func(d time.Duration) float64 {
			if d >= run/2 {
				return rate / 2
			}
			return rate
		}},
	}
}
