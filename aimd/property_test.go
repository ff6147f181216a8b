package aimd_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// genConfig draws a valid Config: zero fields (defaults) or values across
// their whole range.
func genConfig(t *rapid.T) aimd.Config {
	var cfg aimd.Config
	if rapid.Bool().Draw(t, "customBounds") {
		cfg.Min = rapid.Float64Range(0.001, 100).Draw(t, "min")
		cfg.Max = rapid.Float64Range(cfg.Min, 1e6).Draw(t, "max")
		cfg.Initial = rapid.Float64Range(cfg.Min, cfg.Max).Draw(t, "initial")
	}
	cfg.Increase = rapid.SampledFrom([]float64{0, 0.01, 1, 100}).Draw(t, "increase")
	cfg.Decrease = rapid.SampledFrom([]float64{0, 0.1, 0.5, 0.9, 0.999}).Draw(t, "decrease")
	cfg.Recovery = rapid.SampledFrom([]time.Duration{0, time.Millisecond, time.Second, time.Hour}).Draw(t, "recovery")
	cfg.SlowStart = rapid.SampledFrom([]time.Duration{0, time.Millisecond, time.Minute}).Draw(t, "slowStart")
	cfg.DisableSlowStart = rapid.Bool().Draw(t, "disableSlowStart")
	cfg.CoolOff = rapid.SampledFrom([]time.Duration{0, time.Nanosecond, time.Minute}).Draw(t, "coolOff")
	cfg.LatencyTarget = rapid.SampledFrom([]time.Duration{0, time.Millisecond, 100 * time.Millisecond}).Draw(t, "latencyTarget")
	return cfg
}

// genDuration draws a duration in [0, max], biased to small values.
func genDuration(t *rapid.T, label string, max time.Duration) time.Duration {
	return time.Duration(rapid.Int64Range(0, int64(max)).Draw(t, label))
}

// hostile are quota counts no provider should send, which a host that
// builds its own Outcome may pass on: NaN, infinite, negative.
var hostile = []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, -1e300}

// genSignal draws any Signal for a response observed at now: every Class
// (and an unknown one), with or without latency, Retry-After, send time
// (possibly far in the past) and a Quota (hostile counts too).
func genSignal(t *rapid.T, now time.Time) aimd.Signal {
	s := aimd.Signal{Class: forage.Class(rapid.IntRange(0, 6).Draw(t, "class"))}
	if rapid.Bool().Draw(t, "hasLatency") {
		s.Latency = genDuration(t, "latency", 3*time.Second)
	}
	if rapid.IntRange(0, 3).Draw(t, "hasRetryAfter") == 0 {
		s.RetryAfter = genDuration(t, "retryAfter", 2*time.Minute) - time.Second
	}
	if rapid.Bool().Draw(t, "hasSent") {
		s.Sent = now.Add(-genDuration(t, "age", 10*time.Second))
	}
	if rapid.IntRange(0, 3).Draw(t, "hasQuota") == 0 {
		s.Quota = forage.Quota{
			Limit:        rapid.OneOf(rapid.Float64Range(0, 1e4), rapid.SampledFrom(hostile)).Draw(t, "limit"),
			Remaining:    rapid.SampledFrom(append([]float64{0, 1, 50, 1e4}, hostile...)).Draw(t, "remaining"),
			Used:         rapid.SampledFrom(append([]float64{0, 1}, hostile...)).Draw(t, "used"),
			Reset:        genDuration(t, "reset", time.Minute),
			Window:       rapid.SampledFrom([]time.Duration{0, time.Second, time.Minute}).Draw(t, "window"),
			HasLimit:     true,
			HasRemaining: true,
			HasReset:     true,
			HasWindow:    true,
		}
	}
	return s
}

// step advances now by a drawn gap and draws the Signal observed then.
func step(t *rapid.T, now time.Time) (time.Time, aimd.Signal) {
	now = now.Add(genDuration(t, "gap", 2*time.Second))
	return now, genSignal(t, now)
}

// checkInvariants verifies what must hold after every observation; i is
// the step index for the failure message.
func checkInvariants(t *rapid.T, c *aimd.Controller, i int, now time.Time, before aimd.Snapshot, s aimd.Signal) {
	t.Helper()
	cfg := aimd.ConfigOf(c)
	after := c.Snapshot()
	if r := c.Snapshot().Rate; r != after.Rate || !(r >= cfg.Min && r <= cfg.Max) {
		t.Fatalf("step %d (%+v): rate %g (snapshot %g) outside [%g, %g]", i, s, r, after.Rate, cfg.Min, cfg.Max)
	}
	if !(after.Ceiling >= 0) || math.IsInf(after.Ceiling, 0) {
		t.Fatalf("step %d (%+v): ceiling %g, want finite and >= 0", i, s, after.Ceiling)
	}
	if after.PausedUntil.Before(before.PausedUntil) {
		t.Fatalf("step %d (%+v): pause moved back from %v to %v", i, s, before.PausedUntil, after.PausedUntil)
	}
	// A served request's Retry-After is the caller's (a 202 polling a
	// job), not a pause of the provider.
	if s.RetryAfter > 0 && s.Class != forage.Success && after.PausedUntil.Before(now.Add(s.RetryAfter)) {
		t.Fatalf("step %d (%+v): paused until %v, want at least now+RetryAfter %v", i, s, after.PausedUntil, now.Add(s.RetryAfter))
	}
	if s.Class != forage.Success && after.Rate > before.Rate {
		t.Fatalf("step %d (%+v): a %v raised the rate from %g to %g", i, s, s.Class, before.Rate, after.Rate)
	}
	if s.Class == forage.Permanent && (after.Rate != before.Rate || after.Ceiling != before.Ceiling || after.Decreases != before.Decreases) {
		t.Fatalf("step %d (%+v): a permanent error moved %+v to %+v", i, s, before, after)
	}
	if after.Decreases < before.Decreases || after.Decreases > before.Decreases+1 {
		t.Fatalf("step %d (%+v): decreases went from %d to %d", i, s, before.Decreases, after.Decreases)
	}
}

// TestPropertyInvariants: for any Config and any sequence of responses, the
// rate stays in [Min, Max], the pause never moves back and covers every
// Retry-After, only a Success raises the rate, a permanent error moves
// nothing, and one response cuts at most once.
func TestPropertyInvariants(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c, err := aimd.New(genConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for i := range rapid.IntRange(1, 200).Draw(t, "steps") {
			var s aimd.Signal
			now, s = step(t, now)
			before := c.Snapshot()
			c.ObserveAt(now, s)
			checkInvariants(t, c, i, now, before, s)
		}
	})
}

// TestPropertyStateMachine runs the same invariants as a rapid state
// machine, whose actions shrink to the shortest failing sequence: one
// action per Class plus idle time, with a model of the time and the last
// snapshot.
func TestPropertyStateMachine(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c, err := aimd.New(genConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		now, i := t0, 0
		observe := func(k forage.Class) func(*rapid.T) {
			return func(t *rapid.T) {
				now = now.Add(genDuration(t, "gap", time.Second))
				s := genSignal(t, now)
				s.Class = k
				before := c.Snapshot()
				c.ObserveAt(now, s)
				checkInvariants(t, c, i, now, before, s)
				i++
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"success":    observe(forage.Success),
			"throttled":  observe(forage.Throttled),
			"overloaded": observe(forage.Overloaded),
			"transient":  observe(forage.Transient),
			"permanent":  observe(forage.Permanent),
			"idle": func(t *rapid.T) {
				now = now.Add(genDuration(t, "idle", time.Hour))
			},
			"": func(t *rapid.T) {
				if r := c.Snapshot().Rate; r != c.Snapshot().Rate {
					t.Fatalf("after %d steps: Snapshot().Rate %g, then %g with nothing observed", i, r, c.Snapshot().Rate)
				}
			},
		})
	})
}

// TestPropertyInitialBeforeAnyResponse: until the first response, the rate
// is Initial at any time, and the phase is start.
func TestPropertyInitialBeforeAnyResponse(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c, err := aimd.New(genConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Duration(rapid.Int64().Draw(t, "offset")))
		if got, want := c.Snapshot().Rate, aimd.ConfigOf(c).Initial; got != want {
			t.Fatalf("Snapshot().Rate at %v = %g before any response, want Initial %g", at, got, want)
		}
		if s := c.Snapshot(); s.Phase != aimd.PhaseStart || s.Decreases != 0 || !s.PausedUntil.IsZero() {
			t.Fatalf("Snapshot() before any response = %+v", s)
		}
	})
}

// TestPropertyOneDecreasePerOvershoot: after any history, a burst of
// refusals for requests sent before the first refusal arrived (the requests
// in flight) decreases once. The later ones (echoes) leave the ceiling and
// the count of decreases alone; they may lower the rate, never raise it,
// and never under EchoFloor x Decrease of the rate before the overshoot
// (nor under Min): each says the rate was further over the limit (see
// echoCut).
func TestPropertyOneDecreasePerOvershoot(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c, err := aimd.New(genConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for range rapid.IntRange(0, 50).Draw(t, "history") {
			var s aimd.Signal
			now, s = step(t, now)
			c.ObserveAt(now, s)
		}
		// Well after anything before, one success, then the first refusal
		// of a new overshoot.
		now = now.Add(time.Hour)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-time.Millisecond)})
		now = now.Add(time.Second)
		// 429s only: how a 503 reads depends on the provider's history (a
		// provider that throttles with 429, or whose 503s a cut did not
		// stop, is noisy: see TestPropertyNoiseNeverCollapses).
		kind := forage.Throttled
		before := c.Snapshot()
		c.ObserveAt(now, aimd.Signal{Class: kind, Sent: now.Add(-time.Millisecond)})
		first := c.Snapshot()
		cfg := aimd.ConfigOf(c)
		least := min(first.Rate, max(cfg.Min, aimd.EchoFloor*cfg.Decrease*before.Rate)) * (1 - 1e-9)
		prev := first
		for i := range rapid.IntRange(1, 100).Draw(t, "burst") {
			at := now.Add(genDuration(t, "arrival", 5*time.Second))
			sent := now.Add(-genDuration(t, "sentBefore", 5*time.Second))
			c.ObserveAt(at, aimd.Signal{Class: kind, Sent: sent})
			s := c.Snapshot()
			if s.Decreases != first.Decreases || s.Ceiling != first.Ceiling || s.Rate > prev.Rate || s.Rate < least {
				t.Fatalf("echo %d (sent %v before the first refusal): %+v, after %+v; want the decreases and ceiling of %+v, a rate in [%g, %g]",
					i, now.Sub(sent), s, prev, first, least, prev.Rate)
			}
			prev = s
		}
	})
}

// TestPropertyRefusalDuringPauseNeverCuts: after any history, once a
// refusal has paused the provider (Retry-After), refusals of requests sent
// during that pause, answered in any order and with their own Retry-After,
// never decrease the rate: they are the same overshoot.
func TestPropertyRefusalDuringPauseNeverCuts(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c, err := aimd.New(genConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for range rapid.IntRange(0, 50).Draw(t, "history") {
			var s aimd.Signal
			now, s = step(t, now)
			c.ObserveAt(now, s)
		}
		// Well after anything before: a success, then a refusal that pauses.
		if p := c.Snapshot().PausedUntil; p.After(now) {
			now = p
		}
		now = now.Add(time.Hour)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-time.Millisecond)})
		now = now.Add(time.Second)
		// 429s only: how a 503 reads depends on the provider's history (a
		// provider that throttles with 429, or whose 503s a cut did not
		// stop, is noisy: see TestPropertyNoiseNeverCollapses).
		kind := forage.Throttled
		pause := time.Millisecond + genDuration(t, "pause", time.Minute)
		c.ObserveAt(now, aimd.Signal{Class: kind, Sent: now.Add(-time.Millisecond), RetryAfter: pause})
		first := c.Snapshot()
		for i := range rapid.IntRange(1, 50).Draw(t, "during") {
			sent := now.Add(genDuration(t, "sentAfter", pause-1))
			at := sent.Add(genDuration(t, "latency", 2*time.Second))
			s := aimd.Signal{Class: kind, Sent: sent, RetryAfter: genDuration(t, "retryAfter", time.Minute)}
			if rapid.Bool().Draw(t, "success") {
				s = aimd.Signal{Class: forage.Success, Sent: sent}
			}
			before := c.Snapshot()
			c.ObserveAt(at, s)
			if got := c.Snapshot(); got.Decreases != first.Decreases {
				t.Fatalf("signal %d (%+v, sent %v into the %v pause): decreases %d -> %d, want none",
					i, s, sent.Sub(now), pause, before.Decreases, got.Decreases)
			}
		}
	})
}

// TestPropertyCoolOffWithoutSendTime: refusals with neither Sent nor
// Latency decrease at most once per CoolOff.
func TestPropertyCoolOffWithoutSendTime(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cfg.CoolOff = time.Duration(rapid.Int64Range(1, int64(time.Minute)).Draw(t, "coolOff"))
		c, err := aimd.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now, lastCut, cuts := t0, time.Time{}, uint64(0)
		for i := range rapid.IntRange(1, 100).Draw(t, "refusals") {
			now = now.Add(genDuration(t, "gap", cfg.CoolOff/2))
			c.ObserveAt(now, aimd.Signal{Class: forage.Throttled})
			d := c.Snapshot().Decreases
			if d > cuts {
				if !lastCut.IsZero() && now.Sub(lastCut) < cfg.CoolOff {
					t.Fatalf("refusal %d: decreased %v after the last decrease, within CoolOff %v", i, now.Sub(lastCut), cfg.CoolOff)
				}
				lastCut, cuts = now, d
			}
		}
	})
}

// TestPropertyQuotaPausesAndCaps: a spent quota pauses until its reset, and
// a declared Limit/Window caps the rate until another declaration replaces
// it or three successes in a row declare nothing.
func TestPropertyQuotaPausesAndCaps(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		c, err := aimd.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		var capRate float64
		var lateEnds []time.Time // the ends of windows whose cap what was left may have raised
		undeclared := 0
		for i := range rapid.IntRange(1, 100).Draw(t, "steps") {
			var s aimd.Signal
			now, s = step(t, now)
			c.ObserveAt(now, s)
			h := s.Quota
			// A spent quota on a response the limit let through (a
			// success, a transient or permanent failure) pauses unless it
			// is a bucket at its limit (a Reset of a second or less,
			// rounded up, hides the true wait; see the package
			// documentation); on a refusal it always does, but for the
			// "0 left, reset 1" that a bucket of one says after every
			// request.
			// Hostile counts are not known: a Remaining under 0 is 0, a
			// NaN or infinite one nothing; a limit that is not a finite
			// number >= 0, no limit.
			left := h.Remaining
			if left < 0 && !math.IsInf(left, -1) {
				left = 0
			}
			limit := h.Limit
			if !(limit >= 0) || math.IsInf(limit, 1) {
				limit = 0
			}
			refusal := s.Class == forage.Throttled || s.Class == forage.Overloaded
			spent := left == 0 && h.Reset > 0 && (refusal && (limit != 1 || h.Reset != time.Second) || h.Reset > time.Second && limit == 0)
			if spent && c.Snapshot().PausedUntil.Before(now.Add(h.Reset)) {
				t.Fatalf("step %d: spent quota %+v: paused until %v, want >= now+Reset", i, h, c.Snapshot().PausedUntil)
			}
			// A declaration holds until the next replaces it, or until
			// three successes in a row declare nothing.
			if _, known := h.Left(); !known {
				limit = 0
			}
			switch {
			case s.Class < forage.Permanent && limit > 0 && h.Window > 0:
				capRate, undeclared = max(limit/h.Window.Seconds(), aimd.ConfigOf(c).Min), 0
				// More left than the average spends by the reset: what is
				// left, over what is left of the window, from a Reset of
				// 2 s or more, and then to that window's end.
				end := now.Add(h.Reset)
				late := h.Reset >= 2*time.Second
				for _, e := range lateEnds {
					late = late || end.Sub(e).Abs() <= time.Second
				}
				if over := aimd.SpendOver(h.Reset, left).Seconds(); left > 0 && h.Reset > 0 && late && over > 0 && !math.IsInf(left, 1) {
					capRate = max(capRate, min(left/over, aimd.ConfigOf(c).Max))
					if h.Reset >= 2*time.Second {
						lateEnds = append(lateEnds, end)
					}
				}
			case capRate > 0 && s.Class == forage.Success && limit <= 0:
				if undeclared++; undeclared == 3 {
					capRate, undeclared = 0, 0
				}
			}
			if r := c.Snapshot().Rate; capRate > 0 && r > capRate*(1+1e-12) {
				t.Fatalf("step %d: rate %g above the declared %g", i, r, capRate)
			}
		}
	})
}

// TestPropertyLatencyAboveTargetNeverRaises: while responses stay slower
// than LatencyTarget, the rate never grows.
func TestPropertyLatencyAboveTargetNeverRaises(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cfg.LatencyTarget = time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Second)).Draw(t, "target"))
		c, err := aimd.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		prev := c.Snapshot().Rate
		for i := range rapid.IntRange(1, 100).Draw(t, "steps") {
			now = now.Add(genDuration(t, "gap", time.Second))
			lat := cfg.LatencyTarget + 1 + genDuration(t, "over", 5*time.Second)
			c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: lat})
			if r := c.Snapshot().Rate; r > prev {
				t.Fatalf("step %d: latency %v over target %v raised the rate %g -> %g", i, lat, cfg.LatencyTarget, prev, r)
			}
			prev = c.Snapshot().Rate
		}
	})
}

// TestPropertyBadConfigIsAnError: out-of-range values are errors naming the
// field, never silently clamped.
func TestPropertyBadConfigIsAnError(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		field := rapid.SampledFrom([]string{"Initial", "Min", "Max", "Increase", "Decrease", "Recovery", "SlowStart", "CoolOff", "LatencyTarget"}).Draw(t, "field")
		neg := -rapid.Float64Range(1e-9, 1e12).Draw(t, "negative")
		switch field {
		case "Initial":
			cfg.Initial = neg
		case "Min":
			cfg.Min = neg
		case "Max":
			cfg.Max = neg
		case "Increase":
			cfg.Increase = neg
		case "Decrease":
			cfg.Decrease = rapid.SampledFrom([]float64{neg, 1, 1 - neg}).Draw(t, "decrease")
		case "Recovery":
			cfg.Recovery = time.Duration(neg)
		case "SlowStart":
			cfg.SlowStart = time.Duration(neg)
		case "CoolOff":
			cfg.CoolOff = time.Duration(neg)
		case "LatencyTarget":
			cfg.LatencyTarget = time.Duration(neg)
		}
		if time.Duration(neg) == 0 && field != "Initial" && field != "Min" && field != "Max" && field != "Increase" && field != "Decrease" {
			t.Skip("rounds to a zero duration")
		}
		_, err := aimd.New(cfg)
		want := fmt.Sprintf("aimd: Config.%s ", field)
		if err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Fatalf("New with a bad %s: %v, want an error starting %q", field, err, want)
		}
	})
}
