package aimd_test

import (
	"math"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"pgregory.net/rapid"
)

// TestPropertyAWindowEnteredLateIsSpent: a provider that declares a quota
// per fixed window (Limit, Window, Remaining, Reset: GitHub's 5,000 an
// hour, a daily quota), entered part way through a window with more left
// than the window's average rate would spend by its reset, is never
// overspent, and what is left is spent by the reset. Capped at the
// declared Limit/Window, the rest of a day's quota entered in its last
// hour was spent at a 24th of what was left, and lapsed unused.
//
// A Reset under 2 s does not raise the cap: a bucket's next token, or a
// lie, told as a window's end (TestAShortResetDoesNotRaiseTheCap).
func TestPropertyAWindowEnteredLateIsSpent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(50, 5000).Draw(t, "quota")
		w := time.Duration(rapid.IntRange(60, 86400).Draw(t, "windowS")) * time.Second
		reset := time.Duration(rapid.IntRange(10, int(w/time.Second)-1).Draw(t, "resetS")) * time.Second
		used := rapid.IntRange(0, n-10).Draw(t, "used")
		left := n - used
		if float64(left)/reset.Seconds() > 40 || float64(left)/reset.Seconds() < 1.2*float64(n)/w.Seconds() {
			t.Skip("left over reset outside what this checks: at most 40/s, and over the window's average")
		}
		latency := time.Duration(rapid.IntRange(1, 200).Draw(t, "latencyMs")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		ends := now.Add(reset)
		refused := 0
		for now.Before(ends) {
			if pu := c.Snapshot().PausedUntil; pu.After(now) {
				now = pu
				if !now.Before(ends) {
					break
				}
			}
			kind := forage.Success
			if used >= n {
				kind, refused = forage.Throttled, refused+1
			} else {
				used++
			}
			secs := math.Ceil(ends.Sub(now).Seconds()) // whole seconds, rounded up, as most providers send it
			c.ObserveAt(now.Add(latency), aimd.Signal{Class: kind, Sent: now, Quota: forage.Quota{Limit: float64(n), Window: w,
				Remaining: float64(n - used), Reset: time.Duration(secs) * time.Second,
				HasLimit: true, HasWindow: true, HasRemaining: true, HasReset: true}})
			now = now.Add(max(time.Duration(float64(time.Second)/c.Snapshot().Rate), time.Millisecond))
		}
		if refused > 0 {
			t.Fatalf("%d per %v, %d left %v before the reset: %d refused, want none", n, w, left, reset, refused)
		}
		if spent := left - (n - used); float64(spent) < 0.97*float64(left)-2 {
			t.Fatalf("%d per %v, %d left %v before the reset: %d of them spent by the reset, want them all (97%%)", n, w, left, reset, spent)
		}
	})
}

// TestAShortResetDoesNotRaiseTheCap: "599 of 600 a minute left, reset in a
// second" is a bucket's next token or a lie, not a window about to end: the
// rate stays at Limit/Window, not 599 requests over half a second.
func TestAShortResetDoesNotRaiseTheCap(t *testing.T) {
	t.Parallel()
	c, err := aimd.New(aimd.Config{Initial: 5})
	if err != nil {
		t.Fatal(err)
	}
	q := forage.Quota{Limit: 600, Window: time.Minute, Remaining: 599, Reset: time.Second,
		HasLimit: true, HasWindow: true, HasRemaining: true, HasReset: true}
	c.ObserveAt(t0, aimd.Signal{Class: forage.Success, Sent: t0, Quota: q})
	if r := c.Snapshot().Rate; r > 10 {
		t.Fatalf("599 of 600 a minute left, reset in a second: rate %v, want at most 10 (Limit/Window)", r)
	}
}
