package aimd_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// t0 is the tests' clock origin.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const ms = time.Millisecond

// mustNew returns a Controller for cfg or fails the test.
func mustNew(tb testing.TB, cfg aimd.Config) *aimd.Controller {
	tb.Helper()
	c, err := aimd.New(cfg)
	if err != nil {
		tb.Fatalf("New(%+v): %v", cfg, err)
	}
	return c
}

// succeed feeds a Success every step from now (exclusive) for d and returns
// the time of the last one.
func succeed(c *aimd.Controller, now time.Time, d, step time.Duration) time.Time {
	for end := now.Add(d); now.Before(end); {
		now = now.Add(step)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-step / 2)})
	}
	return now
}

// near reports whether got is within rel of want.
func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	got := aimd.ConfigOf(mustNew(t, aimd.Config{}))
	want := aimd.Config{
		Initial: 4, Min: 0.05, Max: 10000, Increase: 1, Decrease: 0.9,
		Recovery: 45 * time.Second, SlowStart: 250 * time.Millisecond, CoolOff: time.Second,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	// The default Initial moves into [Min, Max] rather than failing.
	if got := aimd.ConfigOf(mustNew(t, aimd.Config{Min: 5})).Initial; got != 5 {
		t.Errorf("Initial with Min 5 = %g, want 5", got)
	}
	if got := aimd.ConfigOf(mustNew(t, aimd.Config{Max: 0.5})).Initial; got != 0.5 {
		t.Errorf("Initial with Max 0.5 = %g, want 0.5", got)
	}
	// So does the default Min: a Max of one request a minute is a pinned
	// rate, not an error asking for a Min too.
	if got := aimd.ConfigOf(mustNew(t, aimd.Config{Max: 1.0 / 60})); got.Min != got.Max || got.Initial != got.Max {
		t.Errorf("Min, Initial with Max 1/60 = %g, %g, want both %g", got.Min, got.Initial, got.Max)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  aimd.Config
		want string
	}{
		{aimd.Config{Decrease: 1.5}, "aimd: Config.Decrease must be in (0, 1) (got 1.5)"},
		{aimd.Config{Decrease: 1}, "aimd: Config.Decrease must be in (0, 1) (got 1)"},
		{aimd.Config{Decrease: -0.1}, "aimd: Config.Decrease must be in (0, 1) (got -0.1)"},
		{aimd.Config{Decrease: math.NaN()}, "aimd: Config.Decrease must be in (0, 1) (got NaN)"},
		{aimd.Config{Initial: -1}, "aimd: Config.Initial must be 0 (the default) or in [1e-06, 1e+09] (got -1)"},
		{aimd.Config{Min: math.Inf(1)}, "aimd: Config.Min must be 0 (the default) or in [1e-06, 1e+09] (got +Inf)"},
		{aimd.Config{Min: 1e-9}, "aimd: Config.Min must be 0 (the default) or in [1e-06, 1e+09] (got 1e-09)"},
		{aimd.Config{Max: 2e9}, "aimd: Config.Max must be 0 (the default) or in [1e-06, 1e+09] (got 2e+09)"},
		{aimd.Config{Increase: math.NaN()}, "aimd: Config.Increase must be in [0, 1e+09] (got NaN)"},
		{aimd.Config{Increase: -1}, "aimd: Config.Increase must be in [0, 1e+09] (got -1)"},
		{aimd.Config{Min: 10, Max: 5}, "aimd: Config.Max must be >= Min (10) (got 5)"},
		{aimd.Config{Initial: 20, Max: 10}, "aimd: Config.Initial must be in [Min, Max] = [0.05, 10] (got 20)"},
		{aimd.Config{Initial: 0.01}, "aimd: Config.Initial must be in [Min, Max] = [0.05, 10000] (got 0.01)"},
		{aimd.Config{Recovery: -time.Second}, "aimd: Config.Recovery must be >= 0 (got -1s)"},
		{aimd.Config{SlowStart: -1}, "aimd: Config.SlowStart must be >= 0 (got -1ns)"},
		{aimd.Config{CoolOff: -time.Minute}, "aimd: Config.CoolOff must be >= 0 (got -1m0s)"},
		{aimd.Config{LatencyTarget: -ms}, "aimd: Config.LatencyTarget must be >= 0 (got -1ms)"},
	} {
		c, err := aimd.New(tc.cfg)
		if c != nil || err == nil || err.Error() != tc.want || !errors.Is(err, aimd.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, %v; want nil, %q wrapping ErrInvalidConfig", tc.cfg, c, err, tc.want)
		}
	}
}

func TestSlowStartDoublesPerSecondOfSuccess(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 1, SlowStart: time.Second})
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success}) // the first response earns nothing
	for i, want := range []float64{2, 4, 8} {
		now = succeed(c, now, time.Second, 10*ms)
		if got := c.Snapshot().Rate; !near(got, want, 1e-9) {
			t.Fatalf("after %ds of success: rate %g, want %g", i+1, got, want)
		}
	}
	// Idle time earns nothing: one success an hour later credits at most two
	// intervals at the current rate (2/8 s: x2^0.25).
	now = now.Add(time.Hour)
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	if got, want := c.Snapshot().Rate, 8*math.Pow(2, 0.25); !near(got, want, 1e-9) {
		t.Errorf("after an idle hour: rate %g, want %g", got, want)
	}
}

func TestAdditiveIncreaseWithoutSlowStart(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{DisableSlowStart: true, Initial: 10, Increase: 2})
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	succeed(c, now, 3*time.Second, 10*ms)
	if got := c.Snapshot().Rate; !near(got, 16, 1e-9) {
		t.Errorf("rate after 3s at +2/s per s = %g, want 16", got)
	}
	if got := c.Snapshot().Phase; got != aimd.PhaseAdditive {
		t.Errorf("phase %v, want additive", got)
	}
}

// TestOneCutPerOvershoot pins the worked example: a burst of refusals for
// requests sent before the first refusal arrived is one overshoot.
func TestOneCutPerOvershoot(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 40})
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	for i := range 10 {
		at := now.Add(time.Duration(i+1) * ms)
		c.ObserveAt(at, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-time.Duration(i) * ms)})
	}
	s := c.Snapshot()
	if s.Decreases != 1 || s.Rate != 24 || s.Ceiling != 38 {
		t.Errorf("after 10 echoes: %+v, want 1 decrease, rate 24 (slow-start exit x0.6), ceiling 38 (just under 40)", s)
	}
	// Without Sent, Latency dates the request; without either, CoolOff.
	c.ObserveAt(now.Add(50*ms), aimd.Signal{Class: forage.Throttled, Latency: 100 * ms})
	c.ObserveAt(now.Add(500*ms), aimd.Signal{Class: forage.Throttled})
	if got := c.Snapshot().Decreases; got != 1 {
		t.Errorf("echoes dated by Latency or within CoolOff: %d decreases, want 1", got)
	}
	c.ObserveAt(now.Add(1500*ms), aimd.Signal{Class: forage.Throttled})
	if got := c.Snapshot().Decreases; got != 2 {
		t.Errorf("a refusal after CoolOff: %d decreases, want 2", got)
	}
}

// TestCutsAndClimb walks the ceiling logic step by step: the ordinary cut,
// the concave climb back within Recovery, the convex probe above, a shrink,
// and the back-off when refusals continue.
func TestCutsAndClimb(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 100, Recovery: 10 * time.Second})
	now := t0
	refuse := func(name string, wantRate, wantCeiling float64) {
		t.Helper()
		now = now.Add(10 * ms)
		c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms)})
		if s := c.Snapshot(); !near(s.Rate, wantRate, 1e-3) || !near(s.Ceiling, wantCeiling, 1e-3) {
			t.Fatalf("%s: rate %.4g ceiling %.4g, want %.4g and %.4g", name, s.Rate, s.Ceiling, wantRate, wantCeiling)
		}
	}
	climb := func(name string, d time.Duration, wantRate float64, wantPhase aimd.Phase) {
		t.Helper()
		now = succeed(c, now, d, 10*ms)
		if s := c.Snapshot(); !near(s.Rate, wantRate, 0.01) || s.Phase != wantPhase {
			t.Fatalf("%s: rate %.4g phase %v, want %.4g and %v", name, s.Rate, s.Phase, wantRate, wantPhase)
		}
	}
	echo := func(name string, wantRate, wantCeiling float64) {
		t.Helper()
		c.ObserveAt(now.Add(ms), aimd.Signal{Class: forage.Throttled, Sent: now.Add(-6 * ms)})
		if s := c.Snapshot(); !near(s.Rate, wantRate, 1e-3) || !near(s.Ceiling, wantCeiling, 1e-3) {
			t.Fatalf("%s: rate %.4g ceiling %.4g, want %.4g and %.4g", name, s.Rate, s.Ceiling, wantRate, wantCeiling)
		}
	}
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	refuse("slow-start exit: x0.6, the ceiling just under the rate it refused at, unconfirmed", 60, 95)
	echo("an echo confirms the overshoot; the ceiling stays just under it", 60, 95)
	climb("back at the ceiling after Recovery", 10*time.Second+10*ms, 95, aimd.PhaseProbe)
	climb("probe: ceiling x (2 - Decrease) after another Recovery", 10*time.Second, 104.5, aimd.PhaseProbe)
	log := func() aimd.Snapshot { return c.Snapshot() }
	// The episode since the exit delivered 100/s (one success per 10ms):
	// the limit lies between that and 104.5, so the cut is to 0.97 x 100.
	refuse("overshoot after a climb: to just under what the episode delivered, ceiling just under r0", 96.93, 99.275)
	climb("one success after the cut", 10*ms, 96.93, aimd.PhaseRecover)
	refuse("refused one success after the cut (no pause): x0.9 again, the ceiling just under r0", 87.23, 92.08)
	refuse("refusals continue with no success: back off", 43.62, 92.08)
	_ = log
	// Four overshoots within a minute: the refusal budget caps the climb at
	// 0.9 x the ceiling until they age out.
	climb("the climb back stops at the refusal budget's cap", 5*time.Second, 0.9*92.08, aimd.PhaseRecover)
}

// TestSpentWindowSetsDeliveredRate: a fixed window spent in 10s, then a
// Retry-After to its end, means 3000 per minute, not the rate that spent it.
func TestSpentWindowSetsDeliveredRate(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 300})
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	for range 2999 {
		now = now.Add(time.Second / 300)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-ms)})
	}
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-ms), RetryAfter: 50 * time.Second})
	s := c.Snapshot()
	if !near(s.Rate, 50, 0.01) || !near(s.Ceiling, 50, 0.01) || !s.PausedUntil.Equal(now.Add(50*time.Second)) {
		t.Errorf("after a spent window: %+v, want rate and ceiling ~50/s (3000 per 60s), paused 50s", s)
	}
}

// TestIdleAfterAShortPauseIsNoSpentQuota: a refusal with a Retry-After of
// a second, then nothing sent for 6 s (no demand, or the process waiting
// its turn among others that share the provider), then a success, is an
// ordinary overshoot: the provider said no for a second, not for six; so
// is one where, while this process sent nothing, another process sharing
// the provider drew a pause of its own (taken in with Restore). The
// controller used to read either as a spent quota and drop its ceiling to
// the rate delivered over the whole cycle (a ninth of the limit here; 8/s
// of 17/s for processes taking turns, real time).
func TestIdleAfterAShortPauseIsNoSpentQuota(t *testing.T) {
	t.Parallel()
	for _, share := range []float64{1, 1.0 / 8} {
		for _, other := range []bool{false, true} {
			c := mustNew(t, aimd.Config{Initial: 20, DisableSlowStart: true})
			c.SetShare(share)
			now := succeed(c, t0, 5*time.Second, 50*ms)
			now = now.Add(50 * ms)
			c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms), RetryAfter: time.Second})
			before := c.Snapshot()
			if other { // another process's refusal, 4 s later, paused them all for a second
				if err := c.Restore(aimd.State{PausedUntil: now.Add(5 * time.Second)}); err != nil {
					t.Fatal(err)
				}
			}
			now = now.Add(6 * time.Second) // idle well past the pauses
			c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-5 * ms)})
			if s := c.Snapshot(); s.Ceiling < 0.9*before.Ceiling || s.Rate < 0.9*before.Rate {
				t.Errorf("share %.2g, another's pause %v: after a 1 s pause and 6 s idle: rate %.3g ceiling %.3g; want about %.3g and %.3g, as after the cut",
					share, other, s.Rate, s.Ceiling, before.Rate, before.Ceiling)
			}
		}
	}
}

func TestQuotaHeaders(t *testing.T) {
	t.Parallel()
	window := func(remaining float64, reset time.Duration) forage.Quota {
		return forage.Quota{Limit: 600, Remaining: remaining, Reset: reset, Window: time.Minute, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}
	}
	for _, tc := range []struct {
		name      string
		kind      forage.Class
		hint      forage.Quota
		wantRate  float64
		wantPause time.Duration
	}{
		{"windowed success spreads Remaining over Reset (rounded up: less half a second)", forage.Success, window(300, 60*time.Second), 300 / 59.5, 0},
		{"more left than Limit/Window spends by the reset (a window entered late): spent by the reset", forage.Success, window(300, 10*time.Second), 300 / 9.5, 0},
		{"spent: pause until Reset", forage.Success, window(0, 7*time.Second), 10, 7 * time.Second},
		{"a refusal: capped at Limit/Window (a ceiling: no more slow start), then cut x0.9", forage.Throttled, window(50, 10*time.Second), 9, 0},
		{"a refusal with more left than Limit/Window spends: capped at what does, then cut x0.9", forage.Throttled, window(300, 10*time.Second), 0.9 * 300 / 9.5, 0},
		{"a permanent error ignores the ceiling", forage.Permanent, forage.Quota{Limit: 1, Remaining: 1, Reset: time.Second, Window: time.Minute, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}, 40, 0},
		{"a permanent error still pauses", forage.Permanent, forage.Quota{Limit: 1, Reset: 3 * time.Second, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}, 40, 3 * time.Second},
		{"no Window, not disproved: Remaining/Reset spends the window evenly", forage.Success, forage.Quota{Limit: 600, Remaining: 590, Reset: 30 * time.Second, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}, 590.0 / 29.5, 0},
		{"no Window, spent, Reset over a second: pause", forage.Success, forage.Quota{Limit: 10, Remaining: 0, Reset: 2 * time.Second, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}, 40, 2 * time.Second},
		{"spent, Reset of a second or less (rounded up): a bucket at its limit, no pause, hold", forage.Success, forage.Quota{Limit: 10, Remaining: 0, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}, 40, 0},
		{"a bucket of one says 0 left after every request: no pause", forage.Success, forage.Quota{Limit: 1, Remaining: 0, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}, 40, 0},
		{"spent, on a refusal: pause until Reset", forage.Throttled, forage.Quota{Limit: 1, Remaining: 0, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}, 24, time.Second},
		{"a refusal that names only its Reset: pause until Reset", forage.Throttled, forage.Quota{Reset: 5 * time.Second, HasReset: true}, 24, 5 * time.Second},
		{"a 503 that names only its Reset: pause until Reset (a lone 503 is no cut)", forage.Overloaded, forage.Quota{Reset: 5 * time.Second, HasReset: true}, 40, 5 * time.Second},
		{"a success that names only its Reset: nothing", forage.Success, forage.Quota{Reset: 5 * time.Second, HasReset: true}, 40, 0},
	} {
		c := mustNew(t, aimd.Config{Initial: 40})
		if tc.kind == forage.Throttled {
			// A refusal before any success says nothing of the rate (see
			// TestARefusalBeforeTheFirstSuccessSetsNoCeiling).
			c.ObserveAt(t0, aimd.Signal{Class: forage.Success})
		}
		c.ObserveAt(t0, aimd.Signal{Class: tc.kind, Quota: tc.hint})
		rate, pause := c.Snapshot().Rate, c.Snapshot().PausedUntil
		if !near(rate, tc.wantRate, 1e-9) {
			t.Errorf("%s: rate %g, want %g", tc.name, rate, tc.wantRate)
		}
		if tc.wantPause == 0 && !pause.IsZero() || tc.wantPause > 0 && !pause.Equal(t0.Add(tc.wantPause)) {
			t.Errorf("%s: paused until %v, want t0+%v", tc.name, pause, tc.wantPause)
		}
	}
}

func TestTransientAndPermanentHold(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 40})
	for i, k := range []forage.Class{forage.Transient, forage.Permanent, forage.Transient, forage.Class(99)} {
		c.ObserveAt(t0.Add(time.Duration(i)*time.Second), aimd.Signal{Class: k, Latency: 5 * time.Second})
		if s := c.Snapshot(); s.Rate != 40 || s.Decreases != 0 || s.Ceiling != 0 {
			t.Fatalf("step %d (%v): %+v, want rate 40, no decrease, no ceiling", i, k, s)
		}
	}
}

// TestLatencySignal: latency above the target holds and cuts once per
// episode; jitter back under the target is the same episode; a drained
// queue resumes the climb.
func TestLatencySignal(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 40, LatencyTarget: 100 * ms})
	now := t0
	observe := func(lat time.Duration) {
		now = now.Add(20 * ms)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: lat})
	}
	for range 50 {
		observe(20 * ms)
	}
	climbed := c.Snapshot().Rate
	if climbed <= 40 {
		t.Fatalf("rate %g after 1s of fast successes, want > 40", climbed)
	}
	for range 50 {
		observe(300 * ms) // slow, but not slower and slower: one cut
	}
	// The cut is slow start's exit: 0.6 of the rate the first slow request
	// was sent at, 300ms before its answer crossed the target. (The rate
	// had stopped climbing by then: one answer every 20 ms is a caller
	// sending 50/s, which proves nothing above twice that.)
	if s := c.Snapshot(); s.Decreases != 1 || s.Rate > 0.6*climbed*1.001 || s.Rate < climbed/4 {
		t.Fatalf("after sustained slow responses: %+v, want one cut (slow-start exit: 0.6 of the rate at send, at most 0.6 × %g)", s, climbed)
	}
	held := c.Snapshot().Rate
	for range 3 {
		observe(80 * ms) // under the target, above the hysteresis: still held
	}
	if got := c.Snapshot().Rate; got != held {
		t.Fatalf("rate moved to %g within the hysteresis band, want held at %g", got, held)
	}
	for range 100 { // the queue drained: answers as fast as the rate sends (one every 20 ms was under half of it)
		now = now.Add(5 * ms)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: 20 * ms})
	}
	if got := c.Snapshot().Rate; got <= held {
		t.Errorf("rate %g after the queue drained, want above %g", got, held)
	}
}

// TestLatencyStillGrowingCutsAgain: a request sent after the cut that waits
// longer than the first one sent after it means the cut was not enough.
func TestLatencyStillGrowingCutsAgain(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 40, LatencyTarget: 100 * ms})
	now := t0
	lat := 200 * ms
	for range 100 {
		now = now.Add(20 * ms)
		lat += 5 * ms
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: lat})
	}
	if got := c.Snapshot().Decreases; got < 2 {
		t.Errorf("latency growing for 2s: %d decreases, want >= 2", got)
	}
}

// TestRegressionLateSuccessDoesNotEndRefusal: with responses reordered, a
// success for a request sent before the first refusal (a late answer) used
// to end the refusal episode and shrink the rate to almost nothing when the
// next refusal's Retry-After was long.
func TestRegressionLateSuccessDoesNotEndRefusal(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 100})
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	for range 1000 {
		now = now.Add(10 * ms)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-50 * ms)})
	}
	first := now.Add(-30 * ms)
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: first, RetryAfter: 50 * time.Second})
	for i := range 20 { // late answers, then more refusals of the same burst
		at := now.Add(time.Duration(i) * ms)
		c.ObserveAt(at, aimd.Signal{Class: forage.Success, Sent: first.Add(-10 * ms)})
		c.ObserveAt(at, aimd.Signal{Class: forage.Throttled, Sent: first.Add(time.Duration(i) * ms), RetryAfter: 50 * time.Second})
	}
	if got := c.Snapshot().Rate; got < 10 {
		t.Errorf("rate %g after a reordered burst, want the delivered rate (~16/s), not a collapse", got)
	}
}

func TestStrings(t *testing.T) {
	t.Parallel()
	phases := map[aimd.Phase]string{aimd.PhaseStart: "start", aimd.PhaseSlowStart: "slow-start", aimd.PhaseAdditive: "additive",
		aimd.PhaseRecover: "recover", aimd.PhaseProbe: "probe", aimd.Phase(9): "Phase(9)"}
	for p, want := range phases {
		if got := p.String(); got != want {
			t.Errorf("Phase(%d).String() = %q, want %q", int(p), got, want)
		}
	}
}

// TestObserveAtTheFakeClock: ObserveAt at time.Now(), which synctest fakes.
func TestObserveAtTheFakeClock(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := mustNew(t, aimd.Config{})
		if got := c.Snapshot().Rate; got != 4 {
			t.Fatalf("Snapshot().Rate before any response = %g, want 4", got)
		}
		c.ObserveAt(time.Now(), aimd.Signal{Class: forage.Success}) // a first refusal would say nothing of the rate
		c.ObserveAt(time.Now(), aimd.Signal{Class: forage.Throttled, RetryAfter: 3 * time.Second})
		if got, want := c.Snapshot().PausedUntil, time.Now().Add(3*time.Second); !got.Equal(want) {
			t.Fatalf("Snapshot().PausedUntil = %v, want now+3s = %v", got, want)
		}
		time.Sleep(time.Minute)
		c.ObserveAt(time.Now(), aimd.Signal{Class: forage.Success})
		if s := c.Snapshot(); s.Decreases != 1 || s.Ceiling != 3.8 || s.Rate <= 2.4 || s.Rate >= 3.8 {
			t.Errorf("Snapshot() = %+v, want one decrease from 4/s to 2.4/s, the ceiling just under 4/s, climbing", s)
		}
	})
}

// TestConcurrentUse runs observers and readers at once under -race.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				now := t0.Add(time.Duration(i) * ms)
				c.ObserveAt(now, aimd.Signal{Class: forage.Class(i % 5), Latency: time.Duration(g) * ms, RetryAfter: time.Duration(i%7) * ms})
				if r := c.Snapshot().Rate; !(r >= 0.05 && r <= 10000) {
					t.Errorf("rate %g out of bounds", r)
				}
				_ = c.Snapshot()
				_ = c.Snapshot().PausedUntil
			}
		})
	}
	wg.Wait()
}

// TestSharedControllerReadsTheWhole: a controller that sees a quarter of
// the provider's traffic (SetShare(0.25), one of four processes) reads a
// spent window from its quarter of the successes as the whole window: 50/s,
// not 12.5/s; and a refusal that comes before any of its own requests
// succeeded since the last cut (the others' requests took the allowance)
// is an ordinary overshoot, not a sign the limit lies far below: no halving.
func TestSharedControllerReadsTheWhole(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 300})
	c.SetShare(0.25)
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	for range 749 { // a quarter of the 3000 the window held
		now = now.Add(4 * time.Second / 300)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-ms)})
	}
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-ms), RetryAfter: 50 * time.Second})
	if s := c.Snapshot(); !near(s.Rate, 50, 0.01) || !near(s.Ceiling, 50, 0.01) {
		t.Fatalf("after a spent window seen at a quarter share: %+v, want rate and ceiling ~50/s, the whole window's", s)
	}

	d := mustNew(t, aimd.Config{Initial: 100, Recovery: 10 * time.Second})
	d.SetShare(0.25)
	now = t0
	d.ObserveAt(now, aimd.Signal{Class: forage.Success})
	now = now.Add(10 * ms)
	d.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms)}) // leaves slow start: 60
	now = succeed(d, now, 2*time.Second, 10*ms)
	before := d.Snapshot()
	now = now.Add(10 * ms)
	d.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms)})
	now = now.Add(20 * ms) // no success of its own since: the others' turn
	d.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms)})
	if s := d.Snapshot(); s.Rate < 0.7*before.Rate {
		t.Fatalf("a quarter-share controller refused twice in a row: rate %.4g from %.4g; want ordinary cuts, not a halving", s.Rate, before.Rate)
	}
}

// TestRestoreHandsOnAClimb: two controllers that take turns, each climbing
// for a second and then handing its state to the other (Restore), climb as
// one controller would: to the ceiling within the cycle. Fitting a new
// climb of a whole cycle from each handed-on rate left them short of it
// (97% after 9 hand-offs, and further behind the more often they hand on).
func TestRestoreHandsOnAClimb(t *testing.T) {
	t.Parallel()
	cfg := aimd.Config{Initial: 1, Recovery: 10 * time.Second}
	a, b := mustNew(t, cfg), mustNew(t, cfg)
	for _, c := range []*aimd.Controller{a, b} {
		if err := c.Restore(aimd.State{Rate: 50, Ceiling: 100, Confirmed: true}); err != nil {
			t.Fatal(err)
		}
	}
	now := t0
	for i := range 9 {
		on, off := a, b
		if i%2 == 1 {
			on, off = b, a
		}
		on.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-ms)})
		now = succeed(on, now, time.Second, 10*ms)
		if err := off.Restore(on.State()); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Snapshot().Rate; got < 99 {
		t.Errorf("after 9 s of a climb handed on every second: rate %.4g; want >= 99 (one controller: 99.95)", got)
	}
}

// TestRestoreWithoutCeilingForgetsIt: a state with a rate and no ceiling
// (what processes sharing a provider agree on once they learn that the
// refusals they saw were their own collisions) forgets the ceiling the
// controller had: it slow-starts from the rate, rather than creeping up on
// a ceiling that was never the provider's.
func TestRestoreWithoutCeilingForgetsIt(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 1, SlowStart: time.Second})
	if err := c.Restore(aimd.State{Rate: 8, Ceiling: 9, Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(aimd.State{Rate: 8}); err != nil {
		t.Fatal(err)
	}
	if s := c.State(); s.Ceiling != 0 || s.Confirmed {
		t.Fatalf("after restoring no ceiling: %+v, want none", s)
	}
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	succeed(c, now, time.Second, 10*ms)
	if got := c.Snapshot().Rate; !near(got, 16, 1e-9) {
		t.Fatalf("a second of success after: rate %g, want 16 (slow start)", got)
	}
}

// TestSharedJitterAtTheCeilingKeepsIt: a controller that sees a share of
// the traffic (one of eight processes taking turns) and held its ceiling
// for 10 s with no refusal from any process reads the next refusal there as
// arrival jitter: a 3% cut, the ceiling kept. Cut a Decrease step with the
// ceiling 5% under it, eight processes at a 17/s provider held 85% of it
// for the rest of the run. A refusal on its second request after that
// cut's pause is a limit that fell: a deep cut.
func TestSharedJitterAtTheCeilingKeepsIt(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 100, Recovery: 10 * time.Second})
	c.SetShare(0.125)
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	now = now.Add(10 * ms)
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms)})         // leaves slow start: 60, ceiling 95
	c.ObserveAt(now.Add(ms), aimd.Signal{Class: forage.Throttled, Sent: now.Add(-6 * ms)}) // an echo confirms it
	now = succeed(c, now, 11*time.Second, 10*ms)
	before := c.Snapshot()
	if !near(before.Rate, before.Ceiling, 0.05) {
		t.Fatalf("after 11 s of successes: rate %.4g, ceiling %.4g; want the rate at the ceiling", before.Rate, before.Ceiling)
	}
	now = now.Add(10 * ms)
	r0 := c.Snapshot().Rate
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms), RetryAfter: time.Second})
	if s := c.Snapshot(); !near(s.Rate, 0.97*r0, 0.01) || s.Ceiling != before.Ceiling {
		t.Fatalf("refused at the ceiling after 11 s without a refusal: rate %.4g ceiling %.4g; want %.4g and the ceiling kept, %.4g", s.Rate, s.Ceiling, 0.97*r0, before.Ceiling)
	}
	kept := c.Snapshot()
	now = now.Add(time.Second + 10*ms) // the pause, then one success
	c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-5 * ms)})
	now = now.Add(60 * ms)
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms), RetryAfter: time.Second})
	if s := c.Snapshot(); s.Rate > 0.55*kept.Rate {
		t.Fatalf("refused on the second request after the jitter cut's pause: rate %.4g from %.4g; want a deep cut", s.Rate, kept.Rate)
	}

	// Not jitter: another process's refusal 2 s before (merged at a
	// renewal), or a refusal well under the ceiling; nor, after the
	// controller took up the shared rate again (Restore: the episode its
	// jitter cut began is over), a refusal of its second request. (In a
	// bubble: State and Restore date refusals by the clock.)
	synctest.Test(t, func(t *testing.T) {
		plateau := func() (*aimd.Controller, time.Time) {
			c := mustNew(t, aimd.Config{Initial: 100, Recovery: 10 * time.Second})
			c.SetShare(0.125)
			now := time.Now()
			c.ObserveAt(now, aimd.Signal{Class: forage.Success})
			now = now.Add(10 * ms)
			c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms)})
			c.ObserveAt(now.Add(ms), aimd.Signal{Class: forage.Throttled, Sent: now.Add(-6 * ms)})
			now = succeed(c, now, 11*time.Second, 10*ms)
			time.Sleep(time.Until(now))
			return c, now
		}
		d, now := plateau()
		st := d.State()
		st.Refusals = append(st.Refusals, now.Add(-2*time.Second))
		if err := d.Restore(st); err != nil {
			t.Fatal(err)
		}
		top := d.Snapshot().Ceiling
		now = succeed(d, now, 100*ms, 10*ms).Add(10 * ms)
		d.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms), RetryAfter: time.Second})
		if s := d.Snapshot(); s.Ceiling >= top {
			t.Errorf("refused at the ceiling 2 s after another process's refusal: ceiling %.4g kept; want it lowered (not jitter)", s.Ceiling)
		}
		e, now := plateau()
		st = e.State()
		st.Rate = 0.9 * st.Ceiling
		if err := e.Restore(st); err != nil {
			t.Fatal(err)
		}
		now = now.Add(10 * ms)
		e.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms), RetryAfter: time.Second})
		if s := e.Snapshot(); s.Ceiling >= st.Ceiling {
			t.Errorf("refused at 90%% of the ceiling: ceiling %.4g kept; want it lowered (not jitter)", s.Ceiling)
		}
		f, now := plateau()
		now = now.Add(10 * ms)
		f.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms), RetryAfter: time.Second}) // jitter
		time.Sleep(time.Until(now.Add(500 * ms)))
		if err := f.Restore(f.State()); err != nil { // in its pause, the window of another process's rate, taken up
			t.Fatal(err)
		}
		now = now.Add(time.Second + 10*ms)
		was := f.Snapshot().Rate
		f.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-5 * ms)})
		now = now.Add(60 * ms)
		f.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms), RetryAfter: time.Second})
		if s := f.Snapshot(); s.Rate < 0.7*was {
			t.Errorf("refused on its second request after taking up the shared rate: rate %.4g from %.4g; want an ordinary cut, not a halving", s.Rate, was)
		}
	})
}
