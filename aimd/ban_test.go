package aimd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
)

// TestRateRecoversAfterABan: a ban (a Retry-After of two minutes, here
// drawn by another client behind the same address) is a long refusal,
// which the controller reads as a spent quota: the rate the provider
// delivered over the whole cycle, ban included, a fraction of a request a
// second. That reading is a guess, so the ceiling it sets is unconfirmed
// and probed above at once; the requests in flight when the ban began,
// refused with it, do not confirm it (they are refused whatever the
// rate). Within a minute of the ban's end the rate is back within 15% of
// the limit. Before, their refusals confirmed the guess, whose probe takes
// a cycle of 200 requests at that rate: 0.08-13.6/s a minute after the
// ban, 0.5-12% of the limit served in that minute, for five of these
// twelve (and, through the budget package, 0.3/s for good after a ban
// drawn at 30 ms with a burst allowance: 9 requests served in 30 s of a
// 50/s limit).
func TestRateRecoversAfterABan(t *testing.T) {
	const banAt, banFor, after = 20 * time.Second, 2 * time.Minute, time.Minute
	for _, p := range []gcraShape{{50, 10}, {17, 1}, {100, 30}, {8, 4}} {
		for _, lat := range []time.Duration{5 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond} {
			t.Run(fmt.Sprintf("%.0f/s burst %d, %v", p.rate, p.burst, lat), func(t *testing.T) {
				t.Parallel()
				run := func(d time.Duration) simResult { // deterministic: a longer run has the shorter one as its start
					c, err := aimd.New(aimd.Config{})
					if err != nil {
						t.Fatal(err)
					}
					s := gcra(p.rate, p.burst, answer429)()
					s.banAt, s.banFor = banAt, banFor
					return simulate(c, s, d, lat, lat/2)
				}
				banned, r := run(banAt+banFor), run(banAt+banFor+after)
				served := float64(r.ok-banned.ok) / (p.rate * after.Seconds())
				t.Logf("served %.1f%% of the limit in the minute after the ban, final rate %.1f/s", 100*served, r.finalRate)
				if r.bans != 1 || served < 0.3 || r.finalRate < 0.85*p.rate {
					t.Errorf("%d bans; %.1f%% of the limit served in the minute after the ban ended, rate %.2f/s at its end; want 1, >= 30%%, >= %.1f/s",
						r.bans, 100*served, r.finalRate, 0.85*p.rate)
				}
			})
		}
	}
}
