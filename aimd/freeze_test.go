package aimd_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"pgregory.net/rapid"
)

// TestPropertyAQuietSpellIsNoMeasureOfTheLimit: a caller that sends
// nothing for a while (a process frozen by a laptop's suspend, a
// collector between its turns), then sends the requests its workers held,
// at once, and is refused, has its episode measured from where it sent
// again, not over the quiet spell. (Counted over it, 20 successes over
// the 31 s since the last cut read a 20/s provider as 0.66/s: SIGSTOPped
// 30 s, the real examples/ohlcv binary was held at 0.66/s, confirmed, and
// saved so in its record for the next run.) The ceiling stands, and the
// rate is back near the limit once the burst's refusals aged out.
func TestPropertyAQuietSpellIsNoMeasureOfTheLimit(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(5, 100).Draw(t, "limit")
		quiet := time.Duration(rapid.IntRange(3, 120).Draw(t, "quietS")) * time.Second
		at := time.Duration(rapid.IntRange(4, 20).Draw(t, "quietAtS")) * time.Second
		workers := rapid.IntRange(2, 8).Draw(t, "workers")
		latency := time.Duration(rapid.IntRange(1, 40).Draw(t, "latencyMs")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		iv := time.Duration(float64(time.Second) / limit)
		var tat time.Time // a GCRA that allows no burst
		admit := func(now time.Time) forage.Class {
			if now.Before(tat) {
				return forage.Throttled
			}
			tat = maxTime(tat, now).Add(iv)
			return forage.Success
		}
		send := func(now time.Time) {
			s := aimd.Signal{Class: admit(now), Sent: now, Latency: latency}
			if s.Class == forage.Throttled {
				s.RetryAfter = time.Second
			}
			c.ObserveAt(now.Add(latency), s)
		}
		now := t0
		step := func(until time.Time) {
			for now.Before(until) {
				if pu := c.Snapshot().PausedUntil; pu.After(now) {
					now = pu
					continue
				}
				send(now)
				now = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
			}
		}
		step(t0.Add(at))
		before := c.Snapshot().Ceiling
		// Requests in flight when the caller went quiet: a frozen
		// process reads their answers when it wakes, the spell later.
		var held []aimd.Signal
		for range rapid.IntRange(0, 3).Draw(t, "inFlight") {
			held = append(held, aimd.Signal{Class: admit(now), Sent: now, Latency: quiet})
		}
		// Nothing sent, nothing answered: the spell begins at the last
		// answer (at exactly 3 s from the last send, a 32 ms answer
		// left 2.97 s of nothing, no spell, and the property failed).
		now = now.Add(latency + quiet)
		for _, s := range held {
			if s.Class == forage.Throttled {
				s.RetryAfter = time.Second
			}
			c.ObserveAt(now, s)
		}
		for range workers { // the workers' held slots, all at once
			send(now)
		}
		after := c.Snapshot()
		if before > 0 && after.Ceiling < 0.5*min(before, limit) {
			t.Fatalf("limit %.1f/s: the ceiling went from %.2f to %.2f (rate %.2f) at a refusal after %v of nothing sent",
				limit, before, after.Ceiling, after.Rate, quiet)
		}
		// The refusals of the burst may hold the rate low while they
		// count toward a ban (see the ban guard), not once they aged out.
		step(now.Add(90 * time.Second))
		if end := c.Snapshot(); end.Rate < 0.5*limit {
			t.Fatalf("limit %.1f/s: the rate was %.2f (ceiling %.2f) 90 s after a refusal after %v of nothing sent",
				limit, end.Rate, end.Ceiling, quiet)
		}
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
