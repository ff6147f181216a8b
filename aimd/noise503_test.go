package aimd_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// TestRandom503sBeforeAny429AreNoise: a gateway failing a random 5% or 10%
// of requests with 503, in front of a provider admitting 200/s that has
// not refused with 429 yet: over 40 seeds the mean rate from 20 s to 60 s
// stays at 70% of the limit or more (78% and 72%; 84% and 79% at
// e265423). (A rule that counted a cut as failed only half a second after
// it made noise at 200/s, a 503 every 0.1 s, never prove itself: 57% and
// 48%, the worst seed at 3.5%.) Two 503s within slow start's first ten
// answers still end the climb at a few requests a second, where noise
// proves itself slowly: 2 seeds of 80 stay under a tenth of the limit
// (e265423, which read any 503 after a cut as a failed one, had none, and
// sent a 7/s shedder hidden by its allowance ten times its limit).
func TestRandom503sBeforeAny429AreNoise(t *testing.T) {
	const limit = 200.0
	for _, share := range []float64{0.05, 0.10} {
		var sum float64
		for seed := 0; seed < 40; seed++ {
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			c, _ := aimd.New(aimd.Config{})
			var acc, n float64
			noisyRun(c, limit, share, forage.Overloaded, false, rng, func(at time.Duration, r float64) {
				if at > 20*time.Second {
					acc += min(r, limit)
					n++
				}
			})
			if m := acc / n / limit; m < 0.1 {
				t.Logf("noise %.2f seed %d: mean rate %.3g of the limit", share, seed, m)
			}
			sum += acc / n / limit
		}
		t.Logf("noise %.2f: mean rate %.3f of the limit", share, sum/40)
		if m := sum / 40; m < 0.7 {
			t.Errorf("noise %.2f: mean rate %.3f of the limit over 40 seeds; want >= 0.7", share, m)
		}
	}
}
