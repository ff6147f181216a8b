package aimd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
)

// TestBurstAllowanceLearnedFromPauses: a provider with a burst allowance
// that answers 429 with a whole-second Retry-After refills the allowance
// in every pause, so each episode after one delivers the allowance on top
// of the limit and, alone, overstates it. Two episodes of different lengths
// tell the two apart: within 30 s the controller settles at 90-100% of the
// limit with few refusals (each is a second of the whole provider). Before,
// it took up to 14 refusals and settled above the limit.
func TestBurstAllowanceLearnedFromPauses(t *testing.T) {
	for _, p := range []struct {
		rate  float64
		burst int
	}{{30, 20}, {50, 10}, {50, 20}, {100, 10}} {
		t.Run(fmt.Sprintf("%.0f/s burst %d", p.rate, p.burst), func(t *testing.T) {
			c, err := aimd.New(aimd.Config{})
			if err != nil {
				t.Fatal(err)
			}
			r := simulate(c, gcra(p.rate, p.burst, answer429)(), 30*time.Second, 5*time.Millisecond, 0)
			t.Logf("goodput %.1f%%, %d refused, final rate %.1f", 100*r.goodput, r.refused, r.finalRate)
			if r.refused > 6 || r.finalRate < 0.9*p.rate || r.finalRate > p.rate {
				t.Errorf("%d refused in 30 s, final rate %.1f; want at most 6, in [%.1f, %.1f]",
					r.refused, r.finalRate, 0.9*p.rate, p.rate)
			}
		})
	}
}
