package aimd_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// TestLoneRefusalProbesFast: a single refusal leaving slow start (no echo:
// a fluke, or the client's own burst) must not pin the rate for minutes:
// the rate is back just under where it was refused within Recovery/16, and
// the unconfirmed probe passes it within Recovery/12 more. With an echo the
// same refusal is a real overshoot, and the climb back takes a Recovery.
func TestLoneRefusalProbesFast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		echo     bool
		after    time.Duration
		wantRate float64
		phase    aimd.Phase
	}{
		{"lone refusal: back at the ceiling (0.95 x 16) within Recovery/16", false, 2900 * ms, 0.95 * 16, aimd.PhaseProbe},
		{"lone refusal: ceiling x (2 - Decrease) within Recovery/12 more", false, 2900*ms + 3800*ms, 1.1 * 0.95 * 16, aimd.PhaseProbe},
		{"echoed: 7/8 of the way back from 0.6 x 16 halfway through Recovery", true, 22500 * ms, 15.2 - (15.2-9.6)/8, aimd.PhaseRecover},
	} {
		c := mustNew(t, aimd.Config{Initial: 16, SlowStart: time.Hour})
		now := t0
		c.ObserveAt(now, aimd.Signal{Class: forage.Success})
		now = now.Add(time.Second)
		c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-50 * ms)})
		if tc.echo {
			c.ObserveAt(now.Add(5*ms), aimd.Signal{Class: forage.Throttled, Sent: now.Add(-10 * ms)})
		}
		succeed(c, now, tc.after, 10*ms)
		s := c.Snapshot()
		if tc.echo && (!near(s.Rate, tc.wantRate, 0.01) || !near(s.Ceiling, 15.2, 1e-9)) || !tc.echo && s.Rate < tc.wantRate || s.Phase != tc.phase || s.Decreases != 1 {
			t.Errorf("%s: %+v, want rate %s %g, phase %v, 1 decrease", tc.name, s, map[bool]string{true: "~", false: ">="}[tc.echo], tc.wantRate, tc.phase)
		}
	}
}

// TestCutFromRateAtSend: the overshoot began at the rate the refused
// request was sent at, not at the rate the climb reached while its answer
// was on the way.
func TestCutFromRateAtSend(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 10, SlowStart: time.Second})
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	now = succeed(c, now, 2*time.Second, 10*ms) // slow start: 10 -> 40/s
	sent := now
	atSend := c.Snapshot().Rate
	now = succeed(c, now, 500*ms, 10*ms) // a slow answer: 40 -> ~57/s meanwhile
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: sent})
	// An echo confirms the overshoot; the rate at send is dated to 50ms.
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: sent.Add(ms)})
	if s := c.Snapshot(); !near(s.Rate, 0.6*atSend, 0.04) || !near(s.Ceiling, 0.95*atSend, 0.04) {
		t.Errorf("refusal of a request sent at %.1f/s, answered at %.1f/s: %+v, want rate %.1f, ceiling %.1f", atSend, c.Snapshot().Rate, s, 0.6*atSend, 0.95*atSend)
	}
}

// TestRefusalDuringPauseIsAnEcho: a request sent while a Retry-After pause
// was in force (a pacer that had booked it before) is refused as the
// provider said it would be; that is the same overshoot, not a new one. Its
// own Retry-After extends the pause but not the echo window: a refusal of a
// request sent after the original pause ended is news.
func TestRefusalDuringPauseIsAnEcho(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{Initial: 40})
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	now = succeed(c, now, time.Second, 10*ms)
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-20 * ms), RetryAfter: time.Second})
	cut := c.Snapshot()
	for i := range 10 { // sent during the pause, after the cut; each with its own Retry-After
		sent := now.Add(time.Duration(i+1) * 90 * ms)
		c.ObserveAt(sent.Add(30*ms), aimd.Signal{Class: forage.Throttled, Sent: sent, RetryAfter: time.Second})
		c.ObserveAt(sent.Add(30*ms), aimd.Signal{Class: forage.Success, Sent: sent})
	}
	if s := c.Snapshot(); s.Decreases != cut.Decreases || !s.PausedUntil.After(cut.PausedUntil) {
		t.Fatalf("refusals sent during the pause: %+v, want no decrease from %+v and the pause extended", s, cut)
	}
	sent := now.Add(1100 * ms) // after the first pause, within the extended one
	c.ObserveAt(sent.Add(30*ms), aimd.Signal{Class: forage.Throttled, Sent: sent, RetryAfter: time.Second})
	if s := c.Snapshot(); s.Decreases != cut.Decreases+1 {
		t.Errorf("a refusal sent after the pause the cut set: %d decreases, want %d", s.Decreases, cut.Decreases+1)
	}
}
