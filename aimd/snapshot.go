package aimd

import (
	"fmt"
	"math"
	"time"
)

// Phase names where the controller is in its climb, for metrics and logs.
// Phase is a value; it is safe for concurrent use.
type Phase int

const (
	// PhaseStart is before the first response: the rate is Config.Initial.
	PhaseStart Phase = iota
	// PhaseSlowStart is the multiplicative climb before the first pressure.
	PhaseSlowStart
	// PhaseAdditive is the additive climb before the first pressure, when
	// Config.DisableSlowStart is set.
	PhaseAdditive
	// PhaseRecover is below the learned ceiling: the concave climb back.
	PhaseRecover
	// PhaseProbe is at or above the learned ceiling: the slow convex probe
	// for a grown limit (or holding at a ceiling declared by a Quota).
	PhaseProbe
)

// String returns the phase's name, e.g. "slow-start".
func (p Phase) String() string {
	switch p {
	case PhaseStart:
		return "start"
	case PhaseSlowStart:
		return "slow-start"
	case PhaseAdditive:
		return "additive"
	case PhaseRecover:
		return "recover"
	case PhaseProbe:
		return "probe"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Snapshot is the controller's state at one instant: the rate to send at
// and the pause to honour, and how it got there, for metrics. It is a
// value; it is safe for concurrent use.
type Snapshot struct {
	// Rate is the rate to send at, requests/s: [Config.Initial] until the
	// first response, then the rate the responses so far have earned, in
	// [Config.Min, Config.Max]. It moves only when a response is observed.
	// A pause is separate (PausedUntil); the pacer honours both.
	Rate float64
	// Ceiling is the learned ceiling, requests/s: just under (x0.95) the
	// rate at which the last overshoot began, or where it was when a refusal
	// at it read as arrival jitter, or a declared or measured quota. Zero
	// until the first pressure or Quota.
	Ceiling float64
	// PausedUntil is the time before which no request should be sent, set
	// by a Retry-After or a spent quota (see [Signal].Quota); the zero Time
	// means no pause was ever requested. It only ever moves forward.
	PausedUntil time.Time
	// Decreases counts the decreases so far: one per overshoot, not one per
	// refusal.
	Decreases uint64
	// Latency is the smoothed response latency; zero before any sample.
	Latency time.Duration
	// Phase is where the controller is in its climb.
	Phase Phase
	// Allowance is the burst allowance the provider was measured to have,
	// in requests: how many more than its rate it admits after an idle
	// spell (see the package documentation on pauses and burst
	// allowances, and on the bucket fit). Zero until measured.
	Allowance float64
}

// Snapshot returns the controller's current state: the rate to send at,
// the pause in force, and the rest of what it has learned.
func (c *Controller) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Snapshot{
		Rate:        c.rate,
		Ceiling:     c.ceiling,
		PausedUntil: c.pausedUntil,
		Decreases:   c.cuts,
		Latency:     time.Duration(c.latency * float64(time.Second)),
		Phase:       c.phase(),
		Allowance:   c.allowance,
	}
}

// phase derives the Phase from the state.
func (c *Controller) phase() Phase {
	switch {
	case !c.started:
		return PhaseStart
	case c.ceiling == 0 && c.cfg.DisableSlowStart:
		return PhaseAdditive
	case c.ceiling == 0:
		return PhaseSlowStart
	case c.rate < c.ceiling:
		return PhaseRecover
	}
	return PhaseProbe
}

// State is what a controller has learned about its provider, to be kept
// across restarts (see [Controller.State] and [Controller.Restore]) so a
// new process does not start cold: the rate, the ceiling and whether it was
// confirmed, and the pause the provider asked for. It is a plain value that
// encodes to JSON; it is safe for concurrent use.
type State struct {
	// Rate is the rate in force, requests/s.
	Rate float64 `json:"rate"`
	// Ceiling is the learned ceiling, requests/s; zero when none is known.
	Ceiling float64 `json:"ceiling,omitempty"`
	// Confirmed says the ceiling was met twice (or declared by the
	// provider): the climb back to it is the slow cycle.
	Confirmed bool `json:"confirmed,omitempty"`
	// PausedUntil is the end of the pause the provider asked for; zero for
	// none.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Throttled says the provider has refused with 429 or 418: it names its
	// limit that way, so its 503s are read as failures, not as load
	// shedding (see [Signal]). Restore never forgets it: a state without
	// it leaves the controller's as it was.
	Throttled bool `json:"throttled,omitempty"`
	// Refusals are the times of the requests refused in the last minute
	// that asked for a pause of 2 s or less (echoes included; not a spent
	// window's; the latest eight), oldest first: the part of the
	// refusal budget spent (see the package documentation), which a
	// provider that bans counts whoever was refused. Restore adds them to
	// the controller's own, so that one of several processes sharing the
	// provider (see [Controller.SetShare]) counts them all.
	Refusals []time.Time `json:"refusals,omitempty"`
	// Updated is when the state was taken ([Controller.State] sets it);
	// zero means now. A fresh controller (one that has made no request)
	// restored from a state older than a minute, or dated more than a
	// minute ahead, does not trust its rate at once: see
	// [Controller.Restore].
	Updated time.Time `json:"updated,omitzero"`
}

// State returns the controller's learned state, for [Controller.Restore] in
// a later process.
func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	st := State{Rate: max(c.rate, c.reentry), Ceiling: c.ceiling, Confirmed: c.confirmed, PausedUntil: c.pausedUntil, Throttled: c.throttled,
		Refusals: c.violations.recent(now), Updated: now}
	if c.declCeil {
		// The provider's word, which its next answer gives again: not
		// learned, and not a ceiling for a later process to hold to (one
		// answer's lie would outlive it).
		st.Ceiling, st.Confirmed = 0, false
	}
	return st
}

// Restore resumes from a state an earlier controller of the same provider
// exported with [Controller.State]: the rate and ceiling are taken (within
// [Config.Min] and [Config.Max], which may have changed since), the climb
// continues from there, and a pause still in force is honoured. A state
// further along the climb under way (the same ceiling, a higher rate)
// moves the controller along that climb, as fitted when it began, so that
// controllers that hand a climb on to each other (processes sharing a
// provider, taking turns) climb as one; any other state fits a new climb
// from its rate. A state with a rate and no ceiling forgets the ceiling the
// controller had: it slow-starts from the rate. A fresh controller (one
// that has made no request) restored from a state taken more than a
// minute ago, or dated more than a minute ahead of this clock (see
// State.Updated), sends at [Config.Initial] first and climbs back to the
// state's rate at slow start's pace, unless a refusal
// ends that climb: the provider may serve less than it did when the state
// was taken, and a restored rate sent at once from every worker drew a
// refusal from each request in flight (a provider that bans after five a
// minute banned 1.1 s after the start, where a start with no state was
// never banned). [Controller.State] reports the state's rate meanwhile. A
// state with a rate or ceiling that is negative, NaN or infinite is rejected with an
// error wrapping [ErrInvalidConfig], and nothing changes; the zero State
// changes nothing either. Refusals are added to the controller's own
// (those of the last minute, up to now and a second: a later time is
// another machine's clock, or garbage).
func (c *Controller) Restore(s State) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"Rate", s.Rate}, {"Ceiling", s.Ceiling}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return invalid.Must("State."+f.name, "be >= 0 and finite", f.v)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	fresh := !c.started
	c.violations.merge(now, s.Refusals)
	if !c.started {
		// A state an earlier process saved, taken before this one made a
		// request: its refusals count against the refusal budget as this
		// controller's own overshoots (the cap on the climb, see
		// refusalCap). A collector restarted again and again climbed back
		// to its restored ceiling each time, drew a refusal per start,
		// and was banned at the fifth.
		c.refusals.merge(now, s.Refusals)
		c.strikes.merge(now, s.Refusals) // and toward the ban guard (see banGuard)
	}
	c.throttled = c.throttled || s.Throttled
	if s.Rate == 0 && s.PausedUntil.IsZero() {
		return nil
	}
	c.pause(s.PausedUntil)
	c.heldUntil = c.pausedUntil
	if s.Rate == 0 {
		return nil
	}
	if !c.started {
		// A state an earlier process learned: it may have left the
		// provider's allowance anything but full at this one's first
		// request, which the bucket fit takes it to be, and the first
		// refusals do not cut (see inheritWindow).
		c.fits.drop()
		c.inherited, c.restored = true, true
	}
	c.started = true
	if fresh {
		// An earlier process's state: what this one measured of its own
		// demand (nothing much) starts afresh. (Not at each adoption of a
		// shared rate: its slots are counted at the rate of each send.)
		c.sends = sendMeter{}
	}
	was, wasCeiling, wasConfirmed := c.rate, c.ceiling, c.confirmed
	c.rate, c.reentry = c.clamp(s.Rate), 0
	if age := now.Sub(s.Updated); fresh && c.rate > c.cfg.Initial && !s.Updated.IsZero() && (age > reentryAge || age < -reentryAge) {
		// The provider may serve less than it did (its limit fell while
		// the collector was down a while; a record edited by hand): the rate
		// starts at Initial and climbs back at slow start's pace
		// (doubling every 250 ms: 1 s from 4/s to 64/s), unless a refusal
		// ends the climb first. Sent at once from every worker, a
		// restored rate drew a refusal from each request in flight, and
		// a provider that bans after five a minute banned 1.1 s after the
		// start, where a start with no record was never banned. A state
		// dated more than a minute ahead of this clock (garbage, a hand
		// edit, a clock stepped back) is of unknown age too: trusted as
		// just taken, a record dated 9999 sent at Max from the start.
		c.rate, c.reentry = c.cfg.Initial, c.rate
	}
	c.ceiling, c.confirmed = 0, false // none known: slow start from the rate
	if s.Ceiling > 0 {
		// Within Max too, which no ceiling learned here passes: a
		// ceiling of 1e308 was kept, shown, and climbed towards.
		c.ceiling, c.confirmed = min(c.bound(s.Ceiling), c.cfg.Max), s.Confirmed
	}
	if c.guarded(now, 0) {
		c.rate = c.clamp(min(c.rate, c.banSafe(now))) // a rate another process set, under the ban guard too
	}
	c.postCut = c.rate
	// A fresh controller restored under its cold start, with no confirmed
	// ceiling, where refusals with no success between them left it (an
	// outage, a provider that refused everything for a while): its first
	// success earns the time since the restore, up to two intervals of the
	// restored rate and firstCreditMax, as the first after a slot's wait
	// would, not nothing; and climbs though a restored pause's hold is on
	// (see held). (A rate restored at the floor of 0.05/s took 20 s per
	// step: 1 request in 10 s against a provider that had come back at
	// 20/s. Two whole intervals, 40 s of climb, overshot it: 7 refusals,
	// and so did the time since the restore across a pause of a minute.)
	c.firstCredit = time.Time{}
	if fresh && c.lastCredit.IsZero() && c.rate < c.cfg.Initial && !c.confirmed {
		c.firstCredit = now
	}
	if c.ceiling != wasCeiling || c.confirmed != wasConfirmed || c.rate < was || c.kUp == 0 {
		c.fitClimb()
	} // else further along the climb under way: it goes on as it was fitted
	// Requests sent from now on go at the restored rate: a refusal of one
	// is measured against it, and so is what the provider delivers.
	c.hist.note(now, c.rate)
	c.startEpisode(now)
	c.longCut = false // the episode the last cut began is over: a refusal now says nothing of it
	return nil
}

// SetShare tells the controller that it sees the responses of only share
// of the provider's traffic (0 < share <= 1; 1 by default): one of several
// processes that call the provider together, each pacing at its share of
// the controller's rate. The rate and ceiling stay the provider's. Each
// success counts 1/share where the controller measures what the provider
// delivered (a spent quota's cycle, the watch that tells a quota window
// from a bucket, the noise meter), so a process holding a third of the
// traffic does not read its own third as the whole; and a share's episodes
// are samples, not the provider's whole answer, so below 1 a refusal cuts
// as an ordinary overshoot: no drop to an episode's delivered rate, no
// halving because none of its own requests succeeded since the last cut
// (the others' may have), but for a refusal of its second request after
// the pause of its own jitter cut, in the episode that cut began (see
// the package documentation). A share out of range is ignored.
func (c *Controller) SetShare(share float64) {
	if !(share > 0 && share <= 1) {
		return
	}
	c.mu.Lock()
	c.weight = 1 / share
	c.mu.Unlock()
}
