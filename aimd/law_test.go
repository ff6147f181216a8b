package aimd_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// TestPropertyClimbIsLogarithmic: with nothing refused, the default
// controller reaches any limit L (5 to 5000 requests/s) from its start
// within 0.25s per doubling plus half a second: O(log L) time, whatever L.
func TestPropertyClimbIsLogarithmic(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(5, 5000).Draw(t, "limit")
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		budget := time.Duration((0.25*math.Log2(limit/4 /* the default Initial */) + 0.5) * float64(time.Second))
		for c.Snapshot().Rate < limit {
			if now.Sub(t0) > budget {
				t.Fatalf("rate %.1f after %v, want %.1f within %v", c.Snapshot().Rate, now.Sub(t0), limit, budget)
			}
			sent := now
			now = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
			c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: sent})
		}
	})
}

// TestPropertyTheRateFollowsDemand: a caller that sends less than its rate
// allows (one worker at a long latency, a collector busy writing) never
// raises it far above what it sends: whatever its demand d and latency,
// after a minute of successes the rate is at most 16d, or Initial × 1.5⁴
// (slow start's first answers, before the demand is known); and it rises
// again as soon as the caller uses it. (It climbed to the Max on
// successes alone, and a caller that then sent at that rate met the
// provider's limit with every request in flight at once.) The bound is
// loose: twice the demand, measured at the rates the last requests were
// sent at, and slow start's x1.5 per answer over the answers since, more
// of them as more are in flight.
func TestPropertyTheRateFollowsDemand(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		demand := rapid.Float64Range(0.2, 200).Draw(t, "demand")
		latency := genDuration(t, "latency", 500*time.Millisecond)
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		gap := time.Duration(float64(time.Second) / demand)
		sent := t0
		for sent.Sub(t0) < time.Minute { // each answer comes latency after its request
			c.ObserveAt(sent.Add(latency), aimd.Signal{Class: forage.Success, Sent: sent})
			sent = sent.Add(gap)
		}
		now := sent.Add(latency)
		bound := max(4*math.Pow(1.5, 4) /* the default Initial, x1.5 per answer */, 16*demand)
		if r := c.Snapshot().Rate; r > bound {
			t.Fatalf("rate %.1f after a minute of a caller sending %.2f/s, want at most %.1f", r, demand, bound)
		}
		// The caller now sends as fast as the rate allows: the climb resumes
		// within a few seconds (the meter's memory is about one).
		was, from := c.Snapshot().Rate, now
		for now.Sub(from) < 3*time.Second {
			sent = now
			now = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
			c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: sent})
		}
		if r := c.Snapshot().Rate; r <= was {
			t.Fatalf("rate %.1f after 3 s of requests at the rate, want over %.1f", r, was)
		}
	})
}

// TestPropertyABurstyCallerClimbsOnlyInItsBursts: a caller that sends n
// requests at the pacer's rate (a fetch-ahead window), then nothing for a
// while (it writes), uses the rate only in its bursts: whatever n, its
// quiet spells and the latency, the rate stays under a few bursts' worth a
// second (slow start's first answers climb, before the demand is known).
// Measured over its last four requests, each burst looked like full use:
// bursts of 8 every 10 s raised the rate to 442/s in 5 minutes.
func TestPropertyABurstyCallerClimbsOnlyInItsBursts(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 16).Draw(t, "burst")
		quiet := time.Duration(rapid.Int64Range(int64(2*time.Second), int64(time.Minute)).Draw(t, "quiet"))
		latency := genDuration(t, "latency", 500*time.Millisecond)
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for now.Sub(t0) < 5*time.Minute {
			for range n {
				r := c.Snapshot().Rate
				c.ObserveAt(now.Add(latency), aimd.Signal{Class: forage.Success, Sent: now})
				now = now.Add(time.Duration(float64(time.Second) / r))
			}
			now = now.Add(quiet)
		}
		if r, bound := c.Snapshot().Rate, 4*math.Pow(1.5, 4)+8*float64(n); r > bound {
			t.Fatalf("rate %.1f after 5 minutes of bursts of %d every %v, want at most %.1f", r, n, quiet, bound)
		}
	})
}

// TestPropertyAQuietSpellIsForgottenInASecondOrTwo: a caller that used its
// rate, fell quiet for a while (its job's next turn, an open breaker) and
// then sends at the full rate again climbs again within two seconds: the
// quiet spell's slots age like any others. (They counted at full weight:
// after a minute's quiet, 4 s without a climb at 20/s and 11 s at 1/s.)
func TestPropertyAQuietSpellIsForgottenInASecondOrTwo(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		rate := rapid.Float64Range(1, 200).Draw(t, "rate")
		quiet := time.Duration(rapid.Int64Range(int64(time.Second), int64(10*time.Minute)).Draw(t, "quiet"))
		if err := c.Restore(aimd.State{Rate: rate, Ceiling: 10 * rate, Confirmed: true}); err != nil { // climbing to a known ceiling
			t.Fatal(err)
		}
		now := t0
		send := func(d time.Duration) {
			for end := now.Add(d); now.Before(end); {
				sent := now
				now = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
				c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: sent})
			}
		}
		send(2 * time.Second)
		now = now.Add(quiet)
		was := c.Snapshot().Rate
		send(2 * time.Second)
		if r := c.Snapshot().Rate; r <= was {
			t.Fatalf("rate %.2f after 2 s at the full rate following %v of quiet, want over %.2f", r, quiet, was)
		}
	})
}

// TestPropertyNoiseNeverCollapses: against a burst-1 limit L that answers
// 429 above it, with a steady share (up to 10%) of requests failing at
// random for reasons that have nothing to do with the rate (5xx, or 503s
// once the provider has shown that it names its limit with 429), the rate
// never falls under half of L once the climb is over (after 10s). 503
// noise from a provider that never says 429 is read by whether cuts stop
// it (see readOverload); that rule does not yet hold this bound for every
// seed, and is measured by the goodput tables instead.
func TestPropertyNoiseNeverCollapses(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(5, 200).Draw(t, "limit")
		share := rapid.Float64Range(0, 0.1).Draw(t, "share")
		noise := rapid.SampledFrom([]forage.Class{forage.Overloaded, forage.Transient}).Draw(t, "noise")
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		noisyRun(c, limit, share, noise, noise == forage.Overloaded, rng, func(at time.Duration, r float64) {
			if at > 10*time.Second && r < limit/2 {
				t.Fatalf("at %v: rate %.2f under half the limit %.1f (noise %v at %.0f%%)", at, r, limit, noise, 100*share)
			}
		})
	})
}

// TestPropertyDeclaredQuotaNeverOverspent: a fixed window of N requests per
// W that announces itself in headers (Limit, Remaining, Reset rounded up to
// whole seconds, as providers send it; no Window) is never overspent: from
// its first response on, no request is refused, over several windows, and
// at least 90% of each full window's quota is used (the Reset rounded up
// to whole seconds costs the last request or two of a small quota).
func TestPropertyDeclaredQuotaNeverOverspent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(20, 3000).Draw(t, "quota")
		w := time.Duration(rapid.IntRange(5, 120).Draw(t, "windowSeconds")) * time.Second
		latency := time.Duration(rapid.IntRange(1, 200).Draw(t, "latencyMs")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		start := t0.Truncate(w)
		now, used, window, refused := start, 0, start, 0
		full := map[time.Time]int{}
		for now.Sub(start) < 4*w {
			if pu := c.Snapshot().PausedUntil; pu.After(now) {
				now = pu
			}
			if ws := now.Truncate(w); ws != window {
				window, used = ws, 0
			}
			kind := forage.Success
			if used >= n {
				kind, refused = forage.Throttled, refused+1
			} else {
				used++
				full[window]++
			}
			reset := window.Add(w).Sub(now)
			reset = (reset + time.Second - 1).Truncate(time.Second)
			at := now.Add(latency)
			c.ObserveAt(at, aimd.Signal{Class: kind, Sent: now, Quota: forage.Quota{Limit: float64(n), Remaining: float64(n - used), Reset: reset, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}})
			now = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
		}
		if refused > 0 {
			t.Fatalf("quota %d per %v, latency %v: %d requests refused, want none", n, w, latency, refused)
		}
		for ws, got := range full {
			if ws.After(start) && ws.Add(w).Before(now) && float64(got) < 0.90*float64(n) {
				t.Fatalf("quota %d per %v, latency %v: window at +%v used %d, want >= 90%%", n, w, latency, ws.Sub(start), got)
			}
		}
	})
}

// TestPropertyBanNeverTriggered: a provider that allows no burst, answers
// 429 with a whole-second Retry-After above its limit L (2 to 100/s), and
// bans after 5 refusals within a minute is never triggered over five
// minutes by the default controller, with one request in flight and up to
// 50ms of latency. Under 5/s the limit is within reach of the conservative
// start itself (4/s): tell such a provider's limit (budget.Limit) instead.
func TestPropertyBanNeverTriggered(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(5, 100).Draw(t, "limit")
		latency := time.Duration(rapid.IntRange(1, 50).Draw(t, "latencyMs")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		interval := time.Duration(float64(time.Second) / limit)
		var tat time.Time
		var refusals []time.Time
		now := t0
		for now.Sub(t0) < 5*time.Minute {
			if pu := c.Snapshot().PausedUntil; pu.After(now) {
				now = pu
			}
			kind, retry := forage.Success, time.Duration(0)
			if now.Before(tat) {
				kind, retry = forage.Throttled, time.Second
				refusals = append(refusals, now)
				if len(refusals) >= 5 && now.Sub(refusals[len(refusals)-5]) < time.Minute {
					t.Fatalf("limit %.1f/s, latency %v: 5 refusals within a minute by %v", limit, latency, now.Sub(t0))
				}
			} else {
				tat = now.Add(interval)
			}
			at := now.Add(latency)
			c.ObserveAt(at, aimd.Signal{Class: kind, Sent: now, RetryAfter: retry})
			next := now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
			if next.Before(at) {
				next = at // one request in flight
			}
			now = next
		}
	})
}

// noisyRun drives c for 60 s of simulated time, one request at a time and
// 5 ms away, against a GCRA of limit that refuses with 429 and a second's
// Retry-After, and answers a random share of the requests it admits with
// noise (from the first 429 on when after429 is set); see gets each
// answer's time into the run and the rate after it.
func noisyRun(c *aimd.Controller, limit, share float64, noise forage.Class, after429 bool, rng *rand.Rand, see func(at time.Duration, rate float64)) {
	interval := time.Duration(float64(time.Second) / limit)
	var tat time.Time // the server's GCRA: admitted when it arrives at or after tat
	seen429 := !after429
	now := t0
	for now.Sub(t0) < 60*time.Second {
		if pu := c.Snapshot().PausedUntil; pu.After(now) {
			now = pu
		}
		sent := now
		kind := forage.Success
		var retry time.Duration
		switch {
		case sent.Before(tat):
			kind, retry, seen429 = forage.Throttled, time.Second, true
		case rng.Float64() < share && seen429:
			kind, tat = noise, sent.Add(interval)
		default:
			tat = sent.Add(interval)
		}
		at := sent.Add(5 * time.Millisecond)
		c.ObserveAt(at, aimd.Signal{Class: kind, Sent: sent, RetryAfter: retry})
		r := c.Snapshot().Rate
		see(at.Sub(t0), r)
		now = sent.Add(time.Duration(float64(time.Second) / r))
	}
}

// TestPropertyARisenLimitIsFound: a provider whose limit rises after the
// controller found it (another client behind the same key stopped, a plan
// was upgraded, the provider's quiet hours began) is followed within two
// and a half minutes, with no more refusals in any minute than a provider
// that bans at five allows. The refusal budget may hold the rate for the
// minute after the refusals that found the old limit; then the climb
// returns to the ceiling within a sixth of a cycle, the probe passes it,
// and a ceiling passed by a fifth with no refusal is no longer confirmed:
// the probe goes at the unconfirmed pace and meets the new limit. (At the
// probe's own pace, 5.25/s rising to 7.9/s was at 0.75 of it 100 s after
// the rise, and a collector got 46–52% of a 10/s provider rising to 40/s
// over five minutes; now 68–77%.)
func TestPropertyARisenLimitIsFound(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(5, 50).Draw(t, "limit")
		factor := rapid.Float64Range(1.5, 6).Draw(t, "factor")
		burst := rapid.SampledFrom([]int{1, 1, 2, 5, 10}).Draw(t, "burst")
		at := time.Duration(rapid.IntRange(15, 90).Draw(t, "rise at (s)")) * time.Second
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		r := simulate(c, falling(limit, burst, answer429, factor, at)(), at+150*time.Second, 5*time.Millisecond, 2500*time.Microsecond)
		if r.finalRate < 0.75*limit*factor || r.perMinute > 4 {
			t.Fatalf("final rate %.3g of the risen limit, %d refusals in a minute at most; want >= 0.75, <= 4 (%+v)", r.finalRate/(limit*factor), r.perMinute, r)
		}
	})
}

// TestARisenLimitAfterAHoldIsFound: a limit that rises just as the
// controller's refusals fill the minute (the rise itself refused a
// request: the provider's theoretical arrival time stood intervals of the
// old limit ahead) leaves a confirmed ceiling under the old limit, held
// until the refusals age out. The probe above it then goes at the pace of
// a climb back after such a hold, not at its own: over a ceiling of
// 2.7-3.1/s, a cycle is over a minute, and these were at 0.09-0.19 of the
// risen limit 150 s after the rise (rapid found them, in the property
// above, in runs of the whole suite).
func TestARisenLimitAfterAHoldIsFound(t *testing.T) {
	t.Parallel()
	for _, p := range []struct{ limit, factor float64 }{{5.5, 6}, {5.58, 4}, {5.5, 3.875}, {5.65, 5}} {
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		r := simulate(c, falling(p.limit, 10, answer429, p.factor, 15*time.Second)(), 165*time.Second, 5*time.Millisecond, 2500*time.Microsecond)
		if r.finalRate < 0.75*p.limit*p.factor || r.perMinute > 4 {
			t.Errorf("%.3g/s rising %.3gx at 15 s: final rate %.3g of the risen limit, %d refusals in a minute at most; want >= 0.75, <= 4 (%s)", p.limit, p.factor, r.finalRate/(p.limit*p.factor), r.perMinute, r)
		}
	}
}
