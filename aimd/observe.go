package aimd

import "time"

// latencyWeight is the weight of one sample in the smoothed latency: about
// the last ten responses count.
const latencyWeight = 0.2

// latencyTolerance is how much longer, as a fraction of LatencyTarget, a
// request sent after a latency cut must wait than the first one sent after
// it before the queue counts as still growing (jitter is not growth).
const latencyTolerance = 0.1

// Observe feeds one response to the controller at the current time. It is
// ObserveAt(time.Now(), s).
func (c *Controller) Observe(s Signal) { c.ObserveAt(time.Now(), s) }

// ObserveAt feeds one response, received at now, to the controller. Call it
// once per response, from any goroutine; the package documentation tabulates
// what each [Kind] does to the rate, the pause and the ceiling. Whatever the
// Signal, the rate stays in [Config.Min, Config.Max], only a Success raises
// it, and the pause only moves forward.
func (c *Controller) ObserveAt(now time.Time, s Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started = true
	sent := s.Sent
	if sent.IsZero() && s.Latency > 0 {
		sent = now.Add(-s.Latency)
	}
	// A refusal of a request sent during a pause the provider asked for is
	// an echo of the overshoot that set the pause; its own pause still
	// counts, but does not make later refusals echoes too.
	refusal := s.Kind == Throttled || s.Kind == Overloaded
	echo := refusal && !sent.IsZero() && sent.Before(c.heldUntil)
	var until time.Time
	if s.RetryAfter > 0 {
		until = now.Add(s.RetryAfter)
	}
	if s.Hint.exhausted() && now.Add(s.Hint.Reset).After(until) {
		until = now.Add(s.Hint.Reset)
	}
	c.pause(until)
	if !echo && until.After(c.heldUntil) {
		c.heldUntil = until
	}
	if s.Kind == Permanent || s.Kind < Success || s.Kind > Permanent {
		return // a broken request says nothing about the rate
	}
	c.smooth(s)
	c.declare(s.Hint)
	switch s.Kind {
	case Success:
		c.success(now, sent, s)
	case Throttled, Overloaded:
		c.refused(now, sent, echo)
	case Transient:
		c.latencyPressure(now, sent, s.Latency)
	}
	c.hist.note(now, c.rate)
}

// success handles a served response: the end of a refusal episode, the
// latency check, then a rate set by a windowed hint, or the climb.
func (c *Controller) success(now, sent time.Time, s Signal) {
	if sent.IsZero() || sent.After(c.lastCut) {
		c.okSinceCut++ // a late answer to a request sent before the cut is no news
	}
	if est, ok := c.quota.success(now, sent); ok {
		c.applyQuota(est)
	}
	dt := c.credit(now)
	if c.latencyPressure(now, sent, s.Latency) {
		return
	}
	if r := s.Hint.windowRate(); r > 0 {
		c.rate = c.clamp(r)
		c.fitClimb()
		return
	}
	c.climb(dt)
}

// refused handles a Throttled or Overloaded response: a cut once per
// overshoot, and, after a long refusal, the rate the provider delivered. A
// request sent while a pause was in force (echo: a Retry-After or a spent
// quota, from an earlier response) was sent against the provider's word,
// by a pacer that had booked it before the pause; its refusal is an echo
// of the overshoot that set the pause, not a new one.
func (c *Controller) refused(now, sent time.Time, echo bool) {
	c.quota.refuse(now, sent)
	c.lastCredit = now // time spent refused is not successful traffic
	switch {
	case !sent.IsZero() && !c.lastCut.IsZero() && !sent.After(c.lastCut):
		c.confirm() // in flight at the last cut: an echo, which proves it
	case echo:
	case c.okSinceCut > 0 || c.cuts == 0:
		c.cut(now, sent, cutOvershoot)
	default:
		c.cut(now, sent, cutRefusing)
	}
	if c.pausedUntil.After(now) {
		if est, ok := c.quota.estimate(c.pausedUntil); ok {
			c.applyQuota(est)
		}
	}
}

// credit returns the seconds of successful traffic since the previous
// success, at most two intervals at the current rate: idle time, or time the
// caller did not use the rate it had, earns nothing.
func (c *Controller) credit(now time.Time) float64 {
	last := c.lastCredit
	if now.After(last) {
		c.lastCredit = now
	}
	if last.IsZero() || !now.After(last) {
		return 0
	}
	return min(now.Sub(last).Seconds(), 2/c.rate)
}

// pause moves the pause end forward to until; it never moves back.
func (c *Controller) pause(until time.Time) {
	if until.After(c.pausedUntil) {
		c.pausedUntil = until
	}
}

// declare applies a Hint's declared quota, Limit/Window, as a ceiling the
// rate never exceeds.
func (c *Controller) declare(h Hint) {
	d := h.ceiling()
	if d <= 0 {
		return
	}
	c.declared = d
	if c.ceiling == 0 || c.ceiling > d {
		c.ceiling, c.confirmed = d, true // the provider's word, not a guess
	}
	c.rate = c.clamp(c.rate)
	c.fitClimb()
}

// applyQuota lowers the rate and the ceiling to est, the rate the provider
// delivered over a cycle that ended in a long refusal (a spent quota window,
// a ban): sending faster only moves the refusal earlier.
//
// The estimate is confirmed when it lands near the ceiling already learned
// (the same quota, spent again); otherwise it may be far too low (a ban
// counted in the cycle, a slow start ramp in the productive period) and the
// faster unconfirmed cycle probes above it.
func (c *Controller) applyQuota(est float64) {
	est = c.clamp(est)
	c.rate = min(c.rate, est)
	if c.ceiling == 0 || est < c.ceiling {
		c.ceiling, c.confirmed = est, c.near(est)
	}
	c.fitClimb()
}

// smooth folds s.Latency into the smoothed latency. Only a Success may pull
// it down: a fast refusal is not evidence of a healthy provider.
func (c *Controller) smooth(s Signal) {
	if s.Latency <= 0 {
		return
	}
	x := s.Latency.Seconds()
	if s.Kind == Success && (c.latencyMin == 0 || x < c.latencyMin) {
		c.latencyMin = x
	}
	switch {
	case c.latency == 0:
		c.latency = x
	case s.Kind == Success || x > c.latency:
		c.latency += latencyWeight * (x - c.latency)
	}
}

// latencyPressure reports whether the latency signal holds the rate: the
// smoothed latency is above LatencyTarget, or has not yet fallen halfway
// back to the lowest latency seen (hysteresis, so jitter around the target
// is one episode, not many). It cuts once when the latency crosses the
// target. After that cut the queue the overshoot built drains, so later
// requests wait less; if instead a request sent after the cut waits longer
// than the first one sent after it, the queue is still growing: the cut was
// not enough, and it cuts again.
func (c *Controller) latencyPressure(now, sent time.Time, sample time.Duration) bool {
	target := c.cfg.LatencyTarget.Seconds()
	if target == 0 {
		return false
	}
	if c.latency <= target {
		if c.latency <= (target+c.latencyMin)/2 {
			c.latencyHot = false
		}
		return c.latencyHot
	}
	switch {
	case !c.latencyHot:
		if c.cut(now, sent, cutLatency) {
			c.latencyHot, c.latencyBase = true, 0
		}
	case sent.IsZero() || !sent.After(c.lastCut):
		// sent before the cut: says nothing about whether it worked
	case c.latencyBase == 0:
		c.latencyBase = sample
	case sample > c.latencyBase+time.Duration(latencyTolerance*float64(c.cfg.LatencyTarget)):
		if c.cut(now, sent, cutLatencyGrowing) {
			c.latencyBase = 0
		}
	}
	return true
}
