package aimd_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
)

// A provider that allows no burst, fast enough that a few milliseconds of
// arrival jitter (a request held up on its way by a busy machine's
// network stack) refuses the request after it at rates far under the
// limit, is not a slow provider with a large allowance: two refusals fit
// both, and the slow bucket held the rate at a tenth of the limit for the
// refusal budget's minute. Whatever the jitter, the rate stays within
// reach of what the jitter allows (about a third of the limit when a
// tenth of the requests arrive up to 10 ms late, when any rate over 66/s
// draws a refusal; the refusal budget and the fourth refusal's floor
// take their share of it).
func TestAFastProviderRefusedByArrivalJitterIsNotASlowBucket(t *testing.T) {
	t.Parallel()
	for _, late := range []float64{0.01, 0.1} {
		for seed := uint64(1); seed <= 8; seed++ {
			rng := rand.New(rand.NewPCG(seed, 9))
			srv := gcra(200, 1, answer429)()
			srv.late = func() time.Duration {
				if rng.Float64() < late {
					return time.Duration(rng.Int64N(int64(10 * time.Millisecond)))
				}
				return time.Duration(rng.Int64N(int64(300 * time.Microsecond)))
			}
			c, err := aimd.New(aimd.Config{})
			if err != nil {
				t.Fatal(err)
			}
			r := simulate(c, srv, time.Minute, 2*time.Millisecond, time.Millisecond)
			t.Logf("%.0f%% late, seed %d: %s", 100*late, seed, r)
			if r.goodput < 0.15 || r.bans > 0 {
				t.Errorf("%.0f%% of requests up to 10 ms late, seed %d: goodput %.1f%%, %d bans; want >= 15%% (what the jitter allows: about 33%%), none",
					100*late, seed, 100*r.goodput, r.bans)
			}
		}
	}
}
