package budget_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// TestABareRefusalDrawsNoBan: a provider that refuses with a bare 429 (no
// Retry-After, so no pause) and bans at the fifth refusal in a minute,
// with a burst allowance that hides its limit from slow start. Refusals
// then come one request after another, and each cut still left the rate
// over the limit (one worker 60 ms away, at 4.1/s with an allowance of 4,
// was banned within 3 s in every run; so were 5.3/s with 3 and 9/s with
// 20 at several workers): at the fourth refusal in the minute the rate
// drops to what the provider admitted since the first (see the aimd
// package's ban guard), and the fifth never comes.
func TestABareRefusalDrawsNoBan(t *testing.T) {
	cases := []struct {
		rate    float64
		burst   int
		workers int
		latency time.Duration
		jitter  time.Duration
	}{
		{4.1, 4, 1, 60 * time.Millisecond, 700 * time.Microsecond},
		{5.3, 3, 7, 13 * time.Millisecond, 0},
		{9, 20, 6, 4 * time.Millisecond, 3600 * time.Microsecond},
	}
	for _, k := range cases {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%.1f/s burst %d, %d workers %v away, seed %d", k.rate, k.burst, k.workers, k.latency, seed), func(t *testing.T) {
				t.Parallel()
				cfg := providertest.Config{Seed: seed, Limit: providertest.Limit{Rate: k.rate, Burst: k.burst},
					Answer:  providertest.Answer{NoRetryAfter: true, BanAfter: 5},
					Latency: k.latency, Jitter: k.latency / 4, UplinkJitter: k.jitter,
					Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}}
				res := runShort(t, shortRow{name: "bare", cfg: cfg, rate: k.rate, workers: k.workers}, noJitter)
				t.Logf("goodput %.1f%%, refused %.2f%%, %d bans", 100*res.goodput, 100*res.refused, res.bans)
				if res.bans != 0 {
					t.Errorf("%d bans; want none", res.bans)
				}
			})
		}
	}
}
