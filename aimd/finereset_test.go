package aimd_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"pgregory.net/rapid"
)

// TestPropertyAFineResetIsSpentWhole: a provider that announces a small
// quota per window with its reset to the millisecond (Discord's
// X-RateLimit-Reset-After: 1.234), its window starting at the first
// request after the last one ended, is never overspent, and each window
// after the first is spent whole. Spread evenly over the reset, the last
// request of a window was sent at the reset itself and fell in the next,
// every window one short (a bucket of 5 was spent at 65-70% over HTTP).
func TestPropertyAFineResetIsSpentWhole(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(3, 60).Draw(t, "quota")
		w := time.Duration(rapid.IntRange(2001, 30000).Draw(t, "windowMs")) * time.Millisecond
		latency := time.Duration(rapid.IntRange(1, 100).Draw(t, "latencyMs")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		var ends time.Time // the current window's end; zero: none open
		used, refused := 0, 0
		var spent []int // what each window that ended held
		for now.Sub(t0) < 10*w {
			if pu := c.Snapshot().PausedUntil; pu.After(now) {
				now = pu
			}
			if !ends.IsZero() && !now.Before(ends) {
				spent, ends, used = append(spent, used), time.Time{}, 0
			}
			if ends.IsZero() {
				ends = now.Add(w)
			}
			kind := forage.Success
			if used >= n {
				kind, refused = forage.Throttled, refused+1
			} else {
				used++
			}
			c.ObserveAt(now.Add(latency), aimd.Signal{Class: kind, Sent: now, Quota: forage.Quota{Limit: float64(n), Remaining: float64(n - used),
				Reset: ends.Sub(now), HasLimit: true, HasRemaining: true, HasReset: true}})
			now = now.Add(max(time.Duration(float64(time.Second)/c.Snapshot().Rate), time.Millisecond))
		}
		if refused > 0 {
			t.Fatalf("quota %d per %v, latency %v: %d requests refused, want none", n, w, latency, refused)
		}
		for i, got := range spent {
			if i > 0 && got < n {
				t.Fatalf("quota %d per %v, latency %v: window %d held %d, want %d (windows: %v)", n, w, latency, i, got, n, spent)
			}
		}
	})
}
