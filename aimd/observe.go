package aimd

import (
	"time"

	"github.com/forage-go/forage"
)

// latencyWeight is the weight of one sample in the smoothed latency: about
// the last ten responses count.
const latencyWeight = 0.2

// latencyTolerance is how much longer, as a fraction of LatencyTarget, a
// request sent after a latency cut must wait than the first one sent after
// it before the queue counts as still growing (jitter is not growth).
const latencyTolerance = 0.1

// ObserveAt feeds one response, received at now, to the controller. Call it
// once per response, from any goroutine; the package documentation tabulates
// what each [forage.Class] does to the rate, the pause and the ceiling. Whatever the
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
	h := hintOf(s.Quota)
	if at := sent; !at.IsZero() {
		if at.After(now) {
			at = now // a send stamped after its answer: another clock
		}
		c.quiet(now, at)
		c.sends.add(at, c.rateAt(at), c.pausedUntil)
	}
	c.seen = now
	if s.Class >= forage.Permanent {
		c.pause(c.retryAfter(now, s, h)) // the provider's word on when to come back holds
		return                           // a broken or canceled request says nothing about the rate
	}
	if c.inherited && c.inheritFrom.IsZero() {
		c.inheritFrom = sent
		if sent.IsZero() {
			c.inheritFrom = now
		}
	}
	kind := s.Class
	c.noise.observe(kind == forage.Overloaded)
	c.noise.follow(now, kind)
	switch kind {
	case forage.Throttled:
		c.throttled = true
	case forage.Overloaded:
		kind = c.readOverload(now, sent)
	}
	// A refusal of a request sent during a pause the provider asked for is
	// an echo of the overshoot that set the pause; its own pause still
	// counts, but does not make later refusals echoes too.
	refusal := kind == forage.Throttled || kind == forage.Overloaded
	echo := refusal && !sent.IsZero() && sent.Before(c.heldUntil)
	until := c.retryAfter(now, s, h)
	late := refusal && !echo && c.lateWindow(s.Quota)
	if late {
		// A provider whose spent windows paused it says nothing is left
		// and the reset under a second away: the window's last second,
		// its Reset rounded down. The requests wait for the window's end,
		// within that second. The rate did not draw the refusal: nothing
		// is cut, and the quota's word still stands (cut, the next
		// requests of the window's last second were refused too, up to
		// five a window, where a provider that bans at five a minute
		// counts them all, and the cuts left a quarter of the windows
		// unspent). Refused in the second after the end of such a pause,
		// the pause was short: every later spent window's pause lasts a
		// second more.
		until = later(until, now.Add(time.Second))
		if !sent.IsZero() && !sent.Before(c.windowEnd) && sent.Before(c.windowEnd.Add(time.Second)) {
			c.resetFloor = true
		}
	}
	switch {
	case kind == forage.Success:
		c.unknownEnds = 0
	case refusal && !echo && spentForGood(s):
		c.unknownEnds++ // the next such refusal pauses twice as long (see retryAfter)
	}
	if kind == forage.Success && c.resetFloor && spentLastSecond(s.Quota) {
		until = later(until, now.Add(time.Second)) // the window's last second, as above: wait for its end
	}
	if kind == forage.Success {
		c.watchQuota(now, h)
		c.watchSpent(now, h)
		// A served request's Retry-After is about that request (a 202
		// polling a job, a 303 to come back to later), not the provider's
		// pause: it paused every request to a host for as long as a job
		// took. A Quota that says the quota is spent still pauses.
		until = c.retryAfter(now, Signal{}, h)
	}
	if kind == forage.Success && h.exhausted() && !c.spentWindow(h) {
		until = now.Add(s.RetryAfter) // a bucket at the limit, not a spent window
		if s.RetryAfter <= 0 {
			until = time.Time{}
		}
	}
	c.pause(until)
	if !echo && until.After(c.heldUntil) {
		c.heldUntil = until
	}
	if h.exhausted() && h.reset >= time.Second && !until.Before(now.Add(h.reset)) {
		c.windowEnd = until // a spent window's pause (see lateWindow)
	}
	c.smooth(now, s)
	c.declare(now, kind, h)
	// A share of the traffic, a spent window or a ban, or 503s found to
	// be noise: the answers stop being one bucket's (see fitLog).
	if !c.fits.off {
		c.fits.note(sent, kind, c.weight > 1 || until.Sub(now) > fitLongPause || c.noise.noisy)
	}
	if c.fitTop > 0 && !sent.IsZero() && sent.After(c.lastCut) {
		c.applyFit(now)
	}
	switch kind {
	case forage.Success:
		c.success(now, sent, s, h)
	case forage.Throttled, forage.Overloaded:
		c.refused(now, sent, until, echo || late, kind)
	case forage.Transient:
		if !c.epStart.IsZero() && !sent.IsZero() && !sent.Before(c.epStart) && !c.noise.down {
			c.epFail += c.weight // admitted by the limit, unlike an outage's 503s
		}
		c.latencyPressure(now, sent, s.Latency)
	}
	c.hist.note(now, c.rate)
}

// retryAfter returns the end of the pause s asks for: its Retry-After, or
// the reset of a quota its Quota says is spent (see quotaPauses), whichever
// is later; zero for none.
func (c *Controller) retryAfter(now time.Time, s Signal, h hint) time.Time {
	var until time.Time
	if s.RetryAfter > 0 {
		until = now.Add(s.RetryAfter)
	}
	if h.exhausted() && c.quotaPauses(s.Class, h) && now.Add(h.reset).After(until) {
		until = now.Add(h.reset)
		if c.resetFloor && h.reset >= time.Second {
			until = until.Add(time.Second) // its Reset is rounded down (see lateWindow)
		}
	}
	if q := s.Quota; s.Class == forage.Throttled || s.Class == forage.Overloaded {
		// A refusal that names only when the quota resets (no Remaining,
		// no Used) says as much as "0 left": requests sent before the
		// reset were refused again, and counted by a provider that bans.
		if _, left := q.Left(); !left && q.HasReset && q.Reset > 0 && now.Add(q.Reset).After(until) {
			until = now.Add(q.Reset)
		}
		if spentForGood(s) {
			// Spent, with no word on when it comes back (Salesforce's
			// rolling day, "api-usage=15000/15000", a 403 and no reset):
			// a second, doubled at each such refusal in a row, at most
			// an hour. Cut at each, the rate fell to its least and the
			// provider was asked every 20 s, all day: 4,300 refusals.
			until = later(until, now.Add(min(time.Second<<min(c.unknownEnds, 12), time.Hour)))
		}
	}
	return until
}

// spentForGood reports whether s says its quota is spent (nothing left)
// and names neither its reset nor a Retry-After.
func spentForGood(s Signal) bool {
	left, ok := s.Quota.Left()
	return ok && left <= 0 && !s.Quota.HasReset && s.RetryAfter <= 0
}

// lateWindow reports whether a refusal whose Quota is q comes in the last
// second of a spent window: q says nothing is left and the reset under a
// second away, from a provider whose spent windows paused it before (a
// provider that rounds its Reset down says "0 left, reset 18" with 18.9 s
// to go, then "0 left, reset 0" in the window's last second).
func (c *Controller) lateWindow(q forage.Quota) bool {
	return !c.windowEnd.IsZero() && spentLastSecond(q)
}

// spentLastSecond reports whether q says nothing is left and the reset
// under a second away.
func spentLastSecond(q forage.Quota) bool {
	left, ok := q.Left()
	return ok && left <= 0 && q.HasReset && q.Reset < time.Second
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// quotaPauses reports whether a response of class k whose Quota h says the
// quota is spent pauses the provider until h's reset. A response the limit
// let through (a success, a 502 behind it, a 404) does so when h describes
// a spent window (see spentWindow): a token bucket of one says "0 left,
// reset 1" after every request it admits, and the 5% of a 10/s provider's
// answers that a gateway failed, each pausing a second, took half of its
// rate. A refusal does so unless it comes from a bucket of one (see
// watchSpent) and says what every answer of such a bucket says, "0 left,
// reset 1": its Reset is one interval rounded up to a second, a tenth of a
// second at 10/s, and the refusal's cut spaces the requests that follow,
// as for a bare 429 or 503. (Paused a second at each 503, a 10/s provider
// that allows no burst was served 16% of its rate over 5 s, and 78% over
// 30 s; the same 503s with no headers, 79% and 90%.) Any other refusal's
// spent quota pauses: a window of a second, spent, refuses every request
// until it ends, and the Reset of a bigger bucket is the time to refill it
// whole (a 10/s bucket of 5 that answers 503 and bans at five refused
// requests banned 8 runs in 8 when it no longer paused, as it does with
// no headers). A Retry-After pauses as it says, whatever the class.
func (c *Controller) quotaPauses(k forage.Class, h hint) bool {
	if k == forage.Throttled || k == forage.Overloaded {
		return !c.quotaWatch.quick || h.limit != 1 || h.reset != time.Second
	}
	return c.spentWindow(h)
}

// watchSpent follows the successes that say a quota of one is spent with a
// Reset of a second (whole seconds: the true wait is up to a second): a
// token bucket of one says so after every request it admits, a window of
// one once a window, so three of them span a window or more. Three within
// half a second (half the Reset: latency jitter cannot make a window of a
// second look so) show a bucket of one, or a window of one that refills as
// fast, whose Reset is the rounding up of a shorter wait. Called for every
// success.
func (c *Controller) watchSpent(now time.Time, h hint) {
	w := &c.quotaWatch
	if w.quick || !h.exhausted() || h.limit != 1 || h.reset != time.Second {
		return
	}
	if first := w.spent[0]; !first.IsZero() && now.Sub(first) < h.reset/2 {
		w.quick = true
	}
	w.spent = [2]time.Time{w.spent[1], now}
}

// spentWindow reports whether a served response's Quota that says the quota
// is spent (Remaining 0, Reset > 0) should pause the provider until Reset:
// whether it describes a window that refills at its reset, rather than a
// token bucket at its limit that refills as it goes. A bucket's headers say
// "0 left" after every request sent at its rate, with a Reset rounded up
// to a whole second; pausing a second each time would spend a 20/s bucket
// at 1/s. So a provider known to be a bucket never pauses on it, and one
// not yet known to be a window pauses only for a Reset over a second (the
// rounding hides the true wait of a shorter one). The rate holds instead.
func (c *Controller) spentWindow(h hint) bool {
	switch c.quotaMode {
	case quotaBucket:
		return false
	case quotaWindow:
		return true
	}
	return h.reset > time.Second
}

// windowHint reports whether h describes the current state of a quota
// window (Limit per some window, Remaining left, reset in Reset), so that
// Remaining/Reset is the rate that spends it evenly: the Window is
// declared, or the provider is not known to be a bucket and either was seen
// to keep to its word over a whole window or the Reset is long enough (2s)
// that its rounding cannot mislead.
func (c *Controller) windowHint(h hint) bool {
	if h.limit <= 0 || h.left <= 0 || h.reset <= 0 || c.quotaMode == quotaBucket {
		return false
	}
	return h.window > 0 || c.quotaMode == quotaWindow || h.reset >= 2*time.Second
}

// watchQuota follows a provider's word on its quota to tell a window from
// a bucket: after a response saying r are left until its reset, more than
// r+1 successes before that reset (less a second for rounding) show a quota
// that refills as it goes, a bucket; a window never admits more than it
// said was left. A watch that runs to its end without that marks a window.
// Called for every served response with a Quota.
func (c *Controller) watchQuota(now time.Time, h hint) {
	w := &c.quotaWatch
	if c.quotaMode == quotaBucket || h.limit <= 0 || h.reset <= 0 {
		return
	}
	if !w.end.IsZero() && now.Before(w.end) {
		if w.count += c.weight; w.count > w.left+1 {
			c.quotaMode = quotaBucket
		}
		return
	}
	if !w.end.IsZero() {
		c.quotaMode = quotaWindow
	}
	w.end, w.left, w.count = time.Time{}, 0, 0
	if h.reset >= 2*time.Second {
		w.end, w.left = now.Add(h.reset-time.Second), h.left
	}
}

// spendOver returns the time to spread left, what is left of a window,
// over: a Reset in whole seconds is rounded up by most providers, so the
// window resets within the last second of it, and the middle of that
// second is the best guess. A finer Reset is the provider's own: spread
// evenly over it, the last of what is left was sent at the reset itself,
// and fell in the next window (a bucket of 5 with its reset in
// milliseconds was spent at 65-70% of it, no refusal); spread over
// left/(left+½) of it, the last goes half an interval before the reset,
// and the one after it half an interval after. Spreading the rest over a
// shorter time never sends more than was left before the real reset (a
// response that says none is left pauses until it), so this wastes less of
// the window without risking a refusal.
func spendOver(reset time.Duration, left float64) time.Duration {
	switch {
	case reset%time.Second != 0 && left >= 1:
		return time.Duration(float64(reset) * left / (left + 0.5))
	case reset < time.Second:
		return reset
	}
	return reset - time.Second/2
}

// readOverload decides what a 503 means: pressure (the provider sheds load
// because the client sends too fast) or noise (a flaky gateway failing a
// steady share of requests whatever the rate). A provider that has refused
// with 429 names its limit that way, so its 503s are failures, not rate
// signals. Otherwise a 503 is pressure, unless the cuts for them do not
// stop them: a 503 for a request sent after the last cut, before noiseProof
// successes came back, is a cut that failed, and when noiseFailed of the
// last noiseTrials cuts for 503s failed, the 503s do not depend on the
// rate. Those cuts are then undone (at the next success) and the provider
// marked noisy; from then on a 503 counts as pressure only while the recent
// 503 share rises well above the share measured then.
func (c *Controller) readOverload(now, sent time.Time) forage.Class {
	m := &c.noise
	switch {
	case c.throttled:
		return forage.Transient
	case m.down || m.run >= outageRun && now.Sub(m.runFrom) >= outageGap:
		// Nothing but 503s for outageGap: a provider that is down, not
		// one that sheds the excess of a rate (the cuts of a descent to a
		// limit its allowance hid meet a success within moments). They
		// no longer cut at each answer, and the breaker judges them: cut
		// after cut, the rate was at the floor before the breaker saw
		// enough of them to open, and a provider down for maintenance was
		// called once every 20 s for good. The rate goes down slowly
		// instead (outageDecay a second, to outageFloor), so that a
		// shedder that counts refused requests too, which admits none
		// while the rate is over its limit, is let out (held, it served
		// 1.5% for good), and a spent window answered with 503 draws few.
		if !m.down {
			m.down, m.downAt = true, now
		}
		if now.Sub(m.downAt) >= outageStep {
			m.downAt = now
			if r := c.rate * outageDecay; r < c.rate && c.rate > outageFloor {
				c.rate = c.clamp(max(r, outageFloor))
				c.postCut = min(c.postCut, c.rate)
				c.fitClimb()
				c.hist.reset(now, c.rate)
			}
		}
		return forage.Transient
	case m.noisy:
		if m.pressure() {
			return forage.Overloaded
		}
		return forage.Transient
	case m.origin.rate > 0 && !m.cutAt.IsZero() && !sent.IsZero() && sent.After(m.cutAt) && m.okAfter >= noiseSettle && c.rateAt(sent) > m.cutMid:
		// Sent after the climb took the rate more than halfway back to
		// where the last cut for a 503 began, with successes since it:
		// that cut stopped them, and the climb met the limit again, short
		// of the noiseProof successes that prove a cut worked. The descent
		// starts over from here. (Slow start's overshoot of an allowance
		// that hid a 10/s limit came at 80/s; the limit met again came at
		// an eighth of that, read as a descent no cut had stopped: noise,
		// the cuts undone, and 1.7 times the limit sent with 42% refused
		// for good.)
		m.origin = snapshot{}
		return forage.Overloaded
	case m.origin.rate > 0 && !sent.IsZero() && c.rateAt(sent) <= m.from/noiseDescent && m.okOrigin >= noiseProof && m.share() < noiseMaxShare:
		// Cut after cut for 503s, none of which stopped them, down to an
		// eighth of the rate the caller sent at when the first came (see
		// noiseDescent), with noiseProof successes or more between
		// them all along: a shedder's 503s stop once the rate is under
		// its limit, and the share it sheds falls as the rate does; a
		// gateway's come at any rate. (The trials below rarely settle
		// when the noise is a sixth of the answers: the next 503 comes
		// before noiseSettle successes, or after the climb back; a 241/s
		// provider failing 15% of requests with 503 was cut to 1/s.)
		m.noisy, m.restore = true, true
		m.first, m.trials, m.cutAt = m.origin, 0, time.Time{}
		m.floor, m.origin = m.share(), snapshot{}
		return forage.Transient
	case !m.cutAt.IsZero() && !sent.IsZero() && sent.After(m.cutAt) && m.okAfter >= noiseSettle && m.okAfter < noiseProof && c.rateAt(sent) <= m.cutMid:
		// The cut did not stop them. A cut may simply not have been enough
		// (the rate is still over the limit), but when most of the recent
		// cuts for 503s did not stop them either, they do not depend on the
		// rate. A 503 before noiseSettle successes since the cut proves
		// nothing: a provider whose burst allowance hid its limit refuses
		// all but a few requests while the cuts go down to it, each a step
		// short of it, and a gateway's noise comes between runs of
		// successes. Nor does one sent after the climb took the rate more
		// than halfway back to where the cut began: that may be the next
		// overshoot of a limit the cut went under (a slow provider climbs
		// back before noiseProof successes). Nor is a share of noiseMaxShare or more noise: a
		// provider that fails that much whatever the rate is down, which
		// is the breaker's to judge, and one that sheds that much at this
		// rate is far over its limit. (Read as noise, a 7/s provider with
		// an allowance of 24 had its cuts undone, slow start resumed, and
		// took 10/s with 32% refused for good.)
		m.cutAt = time.Time{}
		if !m.record(false) || m.share() >= noiseMaxShare {
			return forage.Overloaded
		}
		m.noisy, m.restore = true, true // undone at the next success: only a success raises the rate
		m.floor = m.share()             // at least the share that just proved itself noise
		m.origin = snapshot{}
		return forage.Transient
	}
	return forage.Overloaded
}

// undo restores the controller to what it was before a cut that noise
// caused. It runs on a success, so only a success raises the rate.
func (c *Controller) undo(now time.Time, b snapshot) {
	c.rate, c.postCut, c.confirmed = c.clamp(b.rate), c.clamp(b.postCut), b.confirmed
	// Undoing a slow-start exit resumes slow start: nothing is known of
	// the limit yet.
	c.ceiling, c.confirmed = 0, b.confirmed
	if b.ceiling > 0 {
		c.ceiling = c.bound(b.ceiling)
	}
	c.lastCut = b.lastCut // Decreases stays: it counts what happened
	c.fitClimb()
	c.hist.reset(now, c.rate)
}

// success handles a served response: the end of a refusal episode, the
// latency check, then a rate set by a windowed hint, or the climb.
func (c *Controller) success(now, sent time.Time, s Signal, h hint) {
	c.inherited = false
	if sent.IsZero() || sent.After(c.lastCut) {
		c.okSinceCut++ // a late answer to a request sent before the cut is no news
	}
	if !c.epStart.IsZero() && !sent.IsZero() && !sent.Before(c.epStart) {
		c.epOK += c.weight
		c.epN++
	}
	if sp := &c.span; !sp.from.IsZero() && !sent.IsZero() && sent.After(sp.from) {
		sp.add(sent, c.weight)
	}
	if m := &c.noise; !m.cutAt.IsZero() && !sent.IsZero() && sent.After(m.cutAt) {
		if m.okAfter += c.weight; m.okAfter >= noiseProof {
			m.cutAt, m.origin = time.Time{}, snapshot{}
			m.record(true) // the cut worked: the 503s were about the rate
		}
	}
	if m := &c.noise; m.origin.rate > 0 {
		m.okOrigin += c.weight
	}
	if m := &c.noise; m.restore {
		m.restore = false
		if m.first.rate > c.rate {
			c.undo(now, m.first)
		}
	}
	if est, ok := c.quota.success(now, sent); ok {
		c.applyQuota(est * c.weight) // what the provider delivered to every process (see SetShare)
	}
	dt := c.credit(now)
	defer func() { c.unheld = false }() // this success's, whatever path it takes (see credit)
	if c.latencyPressure(now, sent, s.Latency) {
		return
	}
	if c.windowHint(h) {
		// Over the time to the reset and a round trip: what is left
		// leaves out the requests in flight, rate x round trip of them.
		// (Spread over the reset alone, a window met late with 1,200
		// left ran out before its end, and those were refused.)
		spend := c.clamp(h.left / (spendOver(h.reset, h.left).Seconds() + c.latency))
		c.hintPlenty = h.left >= plentyLeft*h.limit
		if !c.quotaLied {
			c.rate, c.hinted = spend, true // spend the window evenly, from its first answer
			c.fitClimb()
			return
		}
		// Refused for rate while the quota set the rate (see refused):
		// what is left only bounds the climb. Taken as the rate,
		// it undid every cut at the next answer, and 44% of the requests
		// were refused.
		c.climb(now, dt)
		c.rate = min(c.rate, spend)
		return
	}
	c.hinted = false // the quota no longer sets the rate
	if !c.loneAt.IsZero() {
		c.loneOK++
	}
	if h.exhausted() && h.limit > 1 {
		return // at the limit of a bucket: hold (a bucket of one is always at it)
	}
	c.climb(now, dt)
}

// refused handles a Throttled or Overloaded response: a cut once per
// overshoot, and, after a long refusal, the rate the provider delivered. A
// request sent while a pause was in force (echo: a Retry-After or a spent
// quota, from an earlier response) was sent against the provider's word,
// by a pacer that had booked it before the pause; its refusal is an echo
// of the overshoot that set the pause, not a new one. until is the end of
// the pause the response asked for (zero for none).
func (c *Controller) refused(now, sent, until time.Time, echo bool, kind forage.Class) {
	c.quota.refuse(now, sent, until)
	c.is429 = kind == forage.Throttled
	c.lastCredit = now // time spent refused is not successful traffic
	c.reentry = 0      // the climb back to a restored rate ends at the first refusal, cut or not
	before := c.state()
	cut := false
	switch {
	case kind == forage.Overloaded && c.ceiling == 0 && c.cuts == 0 && !c.throttled && (c.loneAt.IsZero() || c.loneOK >= loneGap):
		// A 503 in slow start, from a provider that has not refused with
		// 429, after loneGap successes or more: a shedder at the top of
		// the climb refuses the next requests too, a gateway's noise
		// comes alone. The next 503 within loneGap successes ends the
		// climb. (The first of 5% random 503s, read as its end, held a
		// 17/s provider at 5/s for 25 s of a 30 s run.)
		c.loneAt, c.loneOK = sent, 0
		if sent.IsZero() {
			c.loneAt = now
		}
	case c.hinted && !c.quotaLied && !echo && (c.hintPlenty || !until.After(now.Add(rateRefusal))):
		// Refused for rate while the quota's word set the rate: a tighter
		// limit it does not name (10 a second under 1200 a minute), or a
		// lie (99999 of 100000 left while refusing at 10 a second). Its
		// word set the rate, so nothing was learned of the limit:
		// discovery starts over, from the start (see Config.Initial), and
		// the quota's word only bounds the climb from now on. With a tenth
		// of the quota or more left, whatever pause the refusal asks for
		// (an unnamed limit answered with 60 s of Retry-After drew one
		// refusal a minute, each undone at the next answer); with less, a
		// refusal that asks for a longer pause than a rate's is the
		// quota's own, its window spent by another client or by requests
		// in flight, and pauses until its reset. A shorter one is not the
		// quota's: near a window's end, what is left over its reset can
		// exceed a tighter limit the start of the window kept under (22/s
		// under 1200 a minute), and a cut the next answer undid drew 40
		// bare 429s in each window's last seconds, and a ban from a
		// provider that bans at five.
		c.quotaLied, c.hinted = true, false
		c.rate = c.clamp(min(c.cfg.Initial, c.rate))
		if !c.declCeil {
			c.ceiling, c.confirmed = 0, false
		}
		c.lastCut = now
		c.fitClimb()
	case !sent.IsZero() && !c.lastCut.IsZero() && !sent.After(c.lastCut):
		c.confirm() // in flight at the last cut: an echo, which proves it
		c.echoCut(now)
	case echo:
	case c.inherited && c.cuts == 0 && sent.Before(c.inheritFrom.Add(inheritWindow)) && (c.restored || until.After(now)):
		// Another's doing, maybe (see inheritWindow). The bucket fit
		// takes the allowance to be full at the first answer it logs:
		// it starts again after this one's pause.
		c.fits.restart()
	case c.okSinceCut > 0 || c.cuts == 0 || c.weight > 1:
		// (A controller that sees a share of the traffic learns nothing
		// from having had no success of its own since the last cut: the
		// others may have had them. Nor does one whose refusal came back
		// sooner than a success could have: a host that queues answers
		// what it sheds at once and the rest a queue's wait later, and
		// read as refusals with no success, every one halved the rate,
		// the ceiling kept: 64 workers at a host that serves 30/s and
		// sheds past a queue of 50 were refused 68 times a minute.)
		cut = c.cut(now, sent, cutOvershoot)
	default:
		c.shed = c.shedAhead(now, sent)
		cut = c.cut(now, sent, cutRefusing)
		c.shed = false
	}
	if cut {
		if c.strikes.count(now) == 0 {
			c.span = strikeSpan{from: sent}
			if sent.IsZero() {
				c.span.from = now
			}
		}
		c.strikes.add(now)
	}
	if m := &c.noise; cut && kind == forage.Overloaded {
		sending := before.rate
		if u, ok := c.sends.use(); ok && u < 1 {
			sending *= u
		}
		m.cut(now, before, c.rate, sending)
	}
	if !until.After(now.Add(rateRefusal)) {
		if !cut {
			c.holdForEcho(now)
		}
		// Echoes too: a provider that bans counts every refused request.
		// Not a refusal that pauses for longer (a spent window): the rate
		// did not draw it, and a rate held under the window's would leave
		// the window unspent (fixed windows shared by processes: 100% ->
		// 88-95% of 200/10s).
		c.violations.add(now)
	}
	if d := until.Sub(now); d >= quotaMinRefusal && kind == forage.Throttled {
		c.costly = d // a refusal for rate here costs that much of the provider (see probeCost)
	} else if !echo {
		// A short pause, or none: refusals are cheap again. (Not a 503's
		// long pause either: a maintenance window says nothing of what a
		// refusal for rate costs.)
		c.costly = 0
	}
	if c.pausedUntil.After(now) {
		if est, ok := c.quota.estimate(c.pausedUntil); ok {
			c.applyQuota(est * c.weight) // what the provider delivered to every process (see SetShare)
		}
	}
}

// shedAhead reports whether a refusal of a request sent at sent, answered
// at now, came back sooner than a success of a request sent after the last
// cut could have: in under half the smoothed latency, within one smoothed
// latency of the cut. A host that queues sheds what it cannot hold at once
// and serves the rest a queue's wait later: no success since the cut then
// says nothing of how far under its limit the cut went (see cut).
func (c *Controller) shedAhead(now, sent time.Time) bool {
	return c.latency > 0 && !sent.IsZero() && now.Sub(sent).Seconds() < c.latency/2 && now.Sub(c.lastCut).Seconds() < c.latency
}

// state returns what a cut changes, so a cut that noise caused can be
// undone.
func (c *Controller) state() snapshot {
	return snapshot{rate: c.rate, ceiling: c.ceiling, postCut: c.postCut, confirmed: c.confirmed, lastCut: c.lastCut}
}

// credit returns the seconds of successful traffic since the previous
// success, at most two intervals at the current rate: idle time, or time the
// caller did not use the rate it had, earns nothing.
func (c *Controller) credit(now time.Time) float64 {
	last := c.lastCredit
	if now.After(last) {
		c.lastCredit = now
	}
	if from := c.firstCredit; last.IsZero() && !from.IsZero() {
		c.firstCredit = time.Time{}
		if now.After(from) {
			c.unheld = true // see Restore
			return min(now.Sub(from).Seconds(), 2/c.rate, firstCreditMax.Seconds())
		}
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

// declare applies a Quota's declared quota, Limit/Window (or, when more is
// left than that spends by the window's reset, what is left over what is
// left of the window), as a ceiling the rate never exceeds, until another
// declaration replaces it, raising it or
// lowering it; a ceiling learned from refusals under it stays. A
// declaration lapses after declareLapse successes in a row that declare
// nothing: it was one endpoint's (an export allowed 10 an hour, on the host
// of an API allowed 20 a second), or a lie; one answer's
// "RateLimit-Policy: 1;w=31536000" held a provider at one request every
// 20 seconds for good, and in its record across restarts.
func (c *Controller) declare(now time.Time, kind forage.Class, h hint) {
	d := h.ceiling()
	if d > 0 && c.windowHint(h) {
		// What is left spread over what is left of the window: more than
		// its average once the window was entered late, or spent slowly
		// so far. Capped at the average, the rest of a day's quota
		// entered in its last hour went at a 24th of what spends it, and
		// lapsed unused; spread evenly to the reset, it never overspends.
		// From a Reset of 2 s or more, and then to the end of that window
		// (the same end, within the second a Reset's rounding blurs): "599
		// of 600 a minute left, reset 1", out of the blue, is a bucket's
		// next token, or a lie, not a window's end, and would have sent
		// the rest at 1,200/s.
		end := now.Add(h.reset)
		if h.reset >= 2*time.Second || !c.lateEnd.IsZero() && end.Sub(c.lateEnd).Abs() <= time.Second {
			if over := spendOver(h.reset, h.left).Seconds() + c.latency; over > 0 && h.left/over > d { // a round trip too: see success
				d = min(h.left/over, c.cfg.Max)
				if h.reset >= 2*time.Second {
					c.lateEnd = end
				}
			}
		}
	}
	if d <= 0 {
		if c.declared > 0 && kind == forage.Success && h.limit <= 0 {
			if c.undeclared++; c.undeclared >= declareLapse {
				c.declared, c.undeclared = 0, 0
				if c.declCeil {
					c.ceiling, c.confirmed, c.declCeil = 0, false, false // slow start from the rate: nothing is known
				}
				c.fitClimb()
			}
		}
		return
	}
	c.declared, c.undeclared = d, 0
	if c.ceiling == 0 || c.ceiling > d || c.declCeil {
		c.ceiling, c.confirmed, c.declCeil = d, true, true // the provider's word, not a guess
	}
	c.rate = c.clamp(c.rate)
	c.fitClimb()
}

// loneGap is how many successes must separate two 503s in slow start for
// the later to be let pass too (see refused).
const loneGap = 10

// plentyLeft is the share of its limit a Quota must say is left for any
// refusal then to show it is not the whole story (see refused).
const plentyLeft = 0.1

// declareLapse is how many successes in a row that declare no quota end a
// declaration (see declare).
const declareLapse = 3

// applyQuota lowers the rate and the ceiling to est, the rate the provider
// delivered over a cycle that ended in a long refusal (a spent quota window,
// a ban): sending faster only moves the refusal earlier.
//
// The estimate is confirmed when it lands near the ceiling already learned
// (the same quota, spent again); otherwise it may be far too low (a ban
// counted in the cycle, a slow start ramp in the productive period) and the
// faster unconfirmed cycle probes above it. The refusals of the requests
// in flight when the long refusal began do not confirm it (see confirm).
func (c *Controller) applyQuota(est float64) {
	est = c.clamp(est)
	c.rate = min(c.rate, est)
	c.postCut = min(c.postCut, c.rate) // the rate the next episode starts from (steady is judged against it)
	if c.ceiling == 0 || est < c.ceiling {
		c.ceiling, c.confirmed, c.declCeil = est, c.near(est), false
		c.quotaCeil = est
		// The fast climb above the estimate stops a margin under the
		// rate the long refusal came at (see quotaTopShare).
		c.quotaTop = 0
		if top := c.lastR0 * quotaTopShare; !c.confirmed && top > est {
			c.quotaTop = top
		}
	}
	c.fitClimb()
}

// quotaTopShare is how far under the rate a long refusal came at the fast
// climb above that cycle's delivered rate stops, the ceiling confirmed
// there, so the probe above it is slow. A spent window is spent again
// below it, as a rate climbing into it spent it; a provider that answers
// every refusal at its rate limit with a long Retry-After (60 s) is not
// refused again at each cycle's top: climbing fast above each cycle's
// estimate, a 201/s one was called 20 s in every 80, 9% of it, for good.
const quotaTopShare = 0.85

// smooth folds s.Latency into the smoothed latency. Only a Success may pull
// it down: a fast refusal is not evidence of a healthy provider.
func (c *Controller) smooth(now time.Time, s Signal) {
	if s.Latency <= 0 {
		return
	}
	x := s.Latency.Seconds()
	if s.Class == forage.Success {
		c.recent.add(x)
		c.tail.add(now, x)
		if c.latencyMin == 0 || x < c.latencyMin {
			c.latencyMin = x
		}
	}
	switch {
	case c.latency == 0:
		c.latency = x
	case s.Class == forage.Success || x > c.latency:
		c.latency += latencyWeight * (x - c.latency)
	}
}

// latencyRing keeps the latencies of the last len(at) successes, in
// seconds. Not safe for concurrent use; the Controller's mutex guards it.
type latencyRing struct {
	at [32]float32
	n  int // samples so far
}

// add records a success's latency x.
func (r *latencyRing) add(x float64) {
	r.at[r.n%len(r.at)] = float32(x)
	r.n++
}

// latencyTail keeps the highest latency of the successes of each of the
// last few slots of tailSlot, so the highest of the last refusal window:
// the rare long hold a busy machine's network stack gives one request in
// tens or hundreds, which the ring's 95th percentile does not see. Not
// safe for concurrent use; the Controller's mutex guards it.
type latencyTail struct {
	at   [tailSlots]float32
	slot [tailSlots]int64 // the slot each holds, as time since the epoch / tailSlot
}

// tailSlot and tailSlots: latencyTail keeps the last tailSlots slots of
// tailSlot each, one more than a refusal window holds.
const (
	tailSlot  = 10 * time.Second
	tailSlots = int(refusalWindow/tailSlot) + 1
)

// add records a success's latency x, answered at now.
func (t *latencyTail) add(now time.Time, x float64) {
	n := now.UnixNano() / int64(tailSlot)
	i := int(n % int64(tailSlots))
	if i < 0 {
		i += tailSlots
	}
	if t.slot[i] != n {
		t.slot[i], t.at[i] = n, 0
	}
	t.at[i] = max(t.at[i], float32(x))
}

// high returns the highest latency answered within refusalWindow before
// now, or 0.
func (t *latencyTail) high(now time.Time) float64 {
	n := now.UnixNano() / int64(tailSlot)
	hi := float32(0)
	for i, s := range t.slot {
		if s > n-int64(tailSlots) && s <= n {
			hi = max(hi, t.at[i])
		}
	}
	return float64(hi)
}

// high returns the second highest latency of the ring (of 32: about the
// 95th percentile), or 0 with fewer than 8 samples.
func (r *latencyRing) high() float64 {
	if r.n < 8 {
		return 0
	}
	var a, b float32 // the highest and the second highest
	for _, x := range r.at[:min(r.n, len(r.at))] {
		switch {
		case x > a:
			a, b = x, a
		case x > b:
			b = x
		}
	}
	return float64(b)
}

// arrivalJitter returns how much later than it was sent a request may
// reach the provider, as the spread of the last successes' latencies
// shows it: their 95th percentile over the lowest latency seen. A delay on
// the way back shows in the latency as one on the way out does; the two
// cannot be told apart, so the spread is taken whole.
func (c *Controller) arrivalJitter() time.Duration {
	return c.jitterOver(c.recent.high())
}

// tailJitter is arrivalJitter from the highest latency of the last
// refusal window (see latencyTail), not its 95th percentile: the longest
// hold on the way that window showed.
func (c *Controller) tailJitter(now time.Time) time.Duration {
	return c.jitterOver(c.tail.high(now))
}

// jitterOver returns how much the latency hi is over the lowest seen.
func (c *Controller) jitterOver(hi float64) time.Duration {
	if hi > c.latencyMin {
		return time.Duration((hi - c.latencyMin) * float64(time.Second))
	}
	return 0
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

// quietSpell is the least time with nothing sent or answered that is a
// quiet spell (see quiet); it must span quietIntervals intervals at the
// rate and quietLatencies smoothed latencies too.
const (
	quietSpell     = 3 * time.Second
	quietIntervals = 4
	quietLatencies = 3
)

// quiet starts the episode afresh when nothing was sent nor answered for
// a quiet spell before an answer at now to a request sent at sent, since
// the start of the episode under way (a process frozen by a laptop's
// suspend, a collector between its turns, a caller that had nothing to
// ask): what the provider delivered is measured from where the caller
// sent again (sent, or now for an answer read after the spell), not over
// time it did not use (counted over it, 20 successes over the 31 s since
// the last cut, 30 of them frozen, read a 20/s provider as 0.66/s, held
// there, confirmed, and saved for the next run). The episode is one after
// a pause: the spell refilled the provider's allowance as a pause does,
// and the bursts that spend it are no steady rate. (Read as steady, a
// caller that sent a second's burst every few seconds had each burst
// refused once and cut 10% for it, and a 7.7/s provider with an allowance
// of 5 banned it at the fifth.) The refusals' span (see spanFloor) stays:
// a refusal left the allowance empty, so its successes over its time
// still bound the limit from under, and the ban guard's hold with them.
// Answers that go on coming are no spell: workers all
// held by a host's queue send nothing for seconds, and their episode
// stands (cut at each gap, a host that queues 50 and serves 30/s was held
// at 91% of it, not 96-99%); nor is a wait of a few latencies (one worker
// at a slow host). A pause's wait is none: the episode after a pause
// starts at its end (see startEpisode). Nor is a retry's wait of a second
// or two past a pause's end: at one second, the lone stream of a
// collector whose requests all waited out their retries after a limit
// halved had its episode cut there and drew a refusal more (69-71% of the
// halving row over 30 s, 74-79% before). c.seen is the previous answer's.
func (c *Controller) quiet(now, sent time.Time) {
	last := c.sends.last
	if c.seen.After(last) {
		last = c.seen
	}
	if c.epStart.After(last) {
		last = c.epStart // nothing sent since the pause the episode began at ended
	}
	if last.IsZero() || c.epStart.IsZero() || !(c.rate > 0) {
		return
	}
	spell := func(from, to time.Time) bool {
		gap := to.Sub(from)
		return gap >= quietSpell && gap.Seconds() >= quietIntervals/c.rate && gap.Seconds() >= quietLatencies*c.latency
	}
	end := now // an answer read after the spell, to a request sent before it or just before it began
	switch {
	case sent.After(last) && sent.Before(now) && spell(last, sent):
		end = sent // the first request sent after the spell
	case sent.After(last) && sent.Before(now):
		if !spell(sent, now) {
			return
		}
	case !spell(last, now):
		return
	}
	c.epStart, c.epOK, c.epN, c.epFail, c.epPaused = end, 0, 0, 0, true
}
