package aimd

import (
	"math"
	"time"
)

// The shape of the cuts and the climb. They were tuned with the explicit-time
// simulation in sim_test.go; see the package documentation for the why.
const (
	// exitCut is the cut on leaving slow start: slow start overshoots by a
	// round trip of doubling, and by much more against a burst allowance,
	// which only refuses once the burst is spent.
	exitCut = 0.5
	// deepCut is the cut when the provider keeps refusing with no success
	// since the last cut, or when an overshoot comes at the rate the last cut
	// set (the limit shrank).
	deepCut = 0.5
	// shrinkSlack is how far above the rate the last cut set an overshoot
	// still counts as "at that rate": the limit shrank below it.
	shrinkSlack = 1.05
	// ceilingMargin places the learned ceiling just under the rate the
	// overshoot began at, so the flat top of the climb sits under the limit
	// and the slow start of the probe above it crosses the limit gently.
	ceilingMargin = 0.99
	// minCycleRequests is the fewest requests a climb back to the ceiling
	// spans, so a slow provider (a few requests/s) still sees about one
	// overshoot per this many requests, not one per Recovery.
	minCycleRequests = 200
)

// cutKind says why the rate is cut.
type cutKind int

const (
	cutOvershoot      cutKind = iota // the first refusal since a success
	cutRefusing                      // refusals continue with no success since the last cut
	cutLatency                       // the smoothed latency crossed the target
	cutLatencyGrowing                // the queue still grows after a latency cut
)

// cut decreases the rate once per overshoot. A signal for a request sent
// before the last cut (or, with no send time, within CoolOff of it) is an
// echo of the overshoot already handled, and cuts nothing. A new overshoot
// records the rate it began at as the learned ceiling. The cut is Decrease,
// or deeper (see exitCut, deepCut):
//
//   - leaving slow start;
//   - refusals continue with no success since the last cut, or the queue
//     still grows after a latency cut: back off fast, ceiling unchanged;
//   - an overshoot at about the rate the last cut set: that rate is already
//     too much, the limit shrank; the ceiling goes a little below it too.
//
// It reports whether it cut.
func (c *Controller) cut(now, sent time.Time, why cutKind) bool {
	if !c.lastCut.IsZero() {
		if !sent.IsZero() && !sent.After(c.lastCut) {
			return false
		}
		if sent.IsZero() && now.Sub(c.lastCut) < c.cfg.CoolOff {
			return false
		}
	}
	beta, w := c.cfg.Decrease, c.rate*ceilingMargin
	switch {
	case c.ceiling == 0 && !c.cfg.DisableSlowStart:
		beta, w = min(beta, exitCut), c.rate
	case why == cutRefusing || why == cutLatencyGrowing:
		beta, w = min(beta, deepCut), c.ceiling
	case why == cutOvershoot && c.cuts > 0 && c.rate <= shrinkSlack*c.postCut:
		beta, w = min(beta, deepCut), c.rate*(1+c.cfg.Decrease)/2
	}
	if w <= 0 {
		w = c.rate
	}
	if c.declared > 0 {
		w = min(w, c.declared)
	}
	c.ceiling = max(w, c.cfg.Min)
	c.rate = c.clamp(c.rate * beta)
	c.postCut = c.rate
	c.fitClimb()
	c.lastCut, c.okSinceCut = now, 0
	c.cuts++
	return true
}

// climb grows the rate by dt seconds of successful traffic: slow start or
// additive increase while no ceiling is known, the ceiling curve after.
func (c *Controller) climb(dt float64) {
	if dt <= 0 {
		return
	}
	switch {
	case c.ceiling == 0 && !c.cfg.DisableSlowStart:
		c.rate *= math.Exp2(dt / c.cfg.SlowStart.Seconds())
	case c.ceiling == 0:
		c.rate += c.cfg.Increase * dt
	default:
		c.rate = curve(c.rate, c.ceiling, c.kUp, c.kProbe(), dt)
	}
	c.rate = c.clamp(c.rate)
}

// curve advances rate r by dt seconds along the cubic through the ceiling
// w (t = 0 at w): w + kUp·t³ below it, concave, fast far from w and flat
// near it; w + kProbe·t³ above it, convex, probing slowly and then faster.
func curve(r, w, kUp, kProbe, dt float64) float64 {
	if kUp <= 0 {
		kUp = kProbe
	}
	var t float64
	if r < w {
		t = -math.Cbrt((w - r) / kUp)
	} else {
		t = math.Cbrt((r - w) / kProbe)
	}
	t += dt
	if t < 0 {
		return w + kUp*t*t*t
	}
	return w + kProbe*t*t*t
}

// recovery returns the time, in seconds, the climb back to the ceiling
// takes: Recovery, or the time of minCycleRequests at the ceiling if longer.
func (c *Controller) recovery() float64 {
	return max(c.cfg.Recovery.Seconds(), minCycleRequests/c.ceiling)
}

// kProbe returns the coefficient of the probe above the ceiling: the mirror
// image of an ordinary cut's climb, reaching ceiling × (2 - Decrease) one
// recovery after passing the ceiling.
func (c *Controller) kProbe() float64 {
	rec := c.recovery()
	return c.ceiling * (1 - c.cfg.Decrease) / (rec * rec * rec)
}

// fitClimb fits the climb from the current rate to the ceiling to take one
// recovery, however deep the cut was.
func (c *Controller) fitClimb() {
	c.kUp = 0
	if c.ceiling > 0 && c.rate < c.ceiling {
		rec := c.recovery()
		c.kUp = (c.ceiling - c.rate) / (rec * rec * rec)
	}
}
