package aimd_test

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/aimd"
)

// TestPropertyARestoredStateOfUnknownAgeIsClimbedBackTo: a fresh
// controller restored from any valid state (a rate or ceiling up to 1e308,
// taken at any time from year 1 to 9999) sends at no more than Config.Max
// and holds no ceiling above it, as Restore says; and one restored from a
// state taken more than a minute from now, before or after, sends at
// Config.Initial first and climbs back. A state dated ahead of the clock
// (a hand edit, garbage, a clock stepped back since) was trusted as just
// taken: a record of rate 1e308 dated 9999 sent at Max (10,000/s) from
// the first request, where one dated 1970 started at 4/s; and a ceiling
// of 1e308 was kept as the learned ceiling, shown as such, and climbed
// towards at once (found by a review).
func TestPropertyARestoredStateOfUnknownAgeIsClimbedBackTo(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			cfg := aimd.Config{}
			if rapid.Bool().Draw(rt, "customMax") {
				cfg.Max = rapid.Float64Range(4, 1e6).Draw(rt, "max")
			}
			c, err := aimd.New(cfg)
			if err != nil {
				rt.Fatalf("New(%+v): %v", cfg, err)
			}
			initial, max := c.Snapshot().Rate, cfg.Max
			if max == 0 {
				max = 10000 // the default
			}
			figure := rapid.OneOf(rapid.Float64Range(0, 1e6), rapid.SampledFrom([]float64{0, 1e308, math.MaxFloat64, 4.0000001}))
			st := aimd.State{
				Rate:      figure.Draw(rt, "rate"),
				Ceiling:   figure.Draw(rt, "ceiling"),
				Confirmed: rapid.Bool().Draw(rt, "confirmed"),
			}
			now := time.Now()
			if rapid.Bool().Draw(rt, "near") {
				st.Updated = now.Add(time.Duration(rapid.Int64Range(int64(-3*time.Minute), int64(3*time.Minute)).Draw(rt, "age")))
			} else {
				st.Updated = time.Unix(rapid.Int64Range(-62135596799, 253402300799).Draw(rt, "unix"), 0) // years 1 to 9999 (not the zero Time: now)
			}
			if err := c.Restore(st); err != nil {
				rt.Fatalf("Restore(%+v): %v", st, err)
			}
			s := c.Snapshot()
			if s.Rate > max || s.Ceiling > max {
				rt.Fatalf("restored %+v at %v: rate %g, ceiling %g; want both <= Max %g", st, now, s.Rate, s.Ceiling, max)
			}
			if age := now.Sub(st.Updated); (age > time.Minute || age < -time.Minute) && s.Rate > initial {
				rt.Fatalf("restored %+v, taken %v from now: rate %g at once; want at most Initial %g, climbed back to", st, -age, s.Rate, initial)
			}
		})
	})
}
