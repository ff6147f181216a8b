package budget

import (
	"math"
	"slices"
	"time"
)

// Turns. Processes that pace at their shares of a provider send at phases
// nobody chose: their requests interleave at random. A provider that
// tolerates no burst (a GCRA of burst one, a strict spacing rule) refuses
// every request that comes sooner than one interval after the previous
// one, whoever sent it, so random phases draw refusals at any rate worth
// having (three processes at 90% of such a limit: more than half). When the
// holders together see refusals that often, they take turns instead: time
// is cut into windows, each window belongs to one holder, and the holder
// paces at the provider's whole rate in its own window and sends nothing
// in the others'. Only one process sends at a time, so what the provider
// sees is one paced stream, with a guard at each change of hands of one
// interval and turnMargin. Turns last turnHold, after which the holders
// share by rate again and take turns again only if the refusals come back.
// Windows are read on each process's own clock: processes on different
// machines need clocks that agree to well under turnMargin (NTP on a local
// network keeps them within a millisecond or two).
const (
	// turnTrigger is the share of requests refused, over the last few
	// seconds and with at least turnMinRefused refusals, at which the
	// holders take turns: more than the overshoots of a climb draw, less
	// than random phases draw at any rate worth having (a climb's overshoot at
	// a burst-5 limiter shared by three processes drew 8-10%). Two
	// refusals are enough: early in a run, the second one, a second after
	// the climb's overshoot and at a rate well under it, is a collision,
	// and each one more costs the provider's whole rate for a second.
	turnTrigger    = 0.15
	turnMinRefused = 2
	// tallyTau is the time constant of the decayed tallies of requests
	// sent and refused.
	tallyTau = 5 * time.Second
	// turnHold is how long turns last once taken.
	turnHold = 2 * time.Minute
	// turnLead is how far ahead a plan starts: every holder renews, and so
	// learns it, before it is in force. Through a ShareWatcher the plan is
	// announced (turns starting are news) and every holder renews within
	// pushSpread of it: turnLeadWatched is enough there, unless the
	// announcement is lost, and then a holder learns of the plan at its
	// next renewal, up to a second late.
	turnLead        = shareEvery + 500*time.Millisecond
	turnLeadWatched = shareSoon + 2*pushSpread
	// turnWindow is the least length of a window, and turnSlots the least
	// number of the provider's intervals in one. turnMargin is the part of
	// a window's guard (see turnGuard) beyond one interval.
	turnWindow = 2 * time.Second
	turnSlots  = 16
	turnMargin = 10 * time.Millisecond
	// turnPlans is how many plans a document keeps.
	turnPlans = 4
)

// shareTurns are the turns in force, kept in the document.
type shareTurns struct {
	// Until is when the holders stop taking turns.
	Until time.Time `json:"until"`
	// Plans are in order of From: the last one that began is in force.
	Plans []turnPlan `json:"plans"`
	// Fresh says the first plan has not yet come into force.
	Fresh bool `json:"fresh,omitempty"`
}

// turnPlan gives the windows from From on to Holders in turn: window i,
// [From + i×Window, From + (i+1)×Window), is Holders[i mod len(Holders)]'s.
type turnPlan struct {
	From    time.Time     `json:"from"`
	Window  time.Duration `json:"window"`
	Holders []string      `json:"holders"`
}

// takeTurns tallies what holder sent and had refused since its last
// renewal (decayed with tallyTau), starts turns when two holders or more
// collide, plans the windows again (lead from now on, or later) when the
// holders changed, and ends turns when they are over. It runs after
// mergeShares.
func takeTurns(doc *shareDoc, now time.Time, sent, refused float64, lead time.Duration) {
	if !doc.Tally.IsZero() && now.After(doc.Tally) {
		k := math.Exp(-now.Sub(doc.Tally).Seconds() / tallyTau.Seconds())
		doc.Sent, doc.Refused = doc.Sent*k, doc.Refused*k
	}
	doc.Tally = now
	doc.Sent += sent
	doc.Refused += refused
	holders := make([]string, 0, len(doc.Leases))
	for h := range doc.Leases {
		holders = append(holders, h)
	}
	slices.Sort(holders)
	t := doc.Turns
	if t != nil && !now.Before(t.Until) {
		doc.Turns, t = nil, nil
		doc.Sent, doc.Refused, doc.Top = 0, 0, 0 // a fresh look at how the holders fare without turns
	}
	if t == nil {
		if len(holders) < 2 || doc.Refused < turnMinRefused || doc.Refused < turnTrigger*doc.Sent {
			return
		}
		t = &shareTurns{Until: now.Add(turnHold), Fresh: true}
		doc.Turns = t
		doc.Sent, doc.Refused = 0, 0
	}
	if t.Fresh && len(t.Plans) > 0 && !now.Before(t.Plans[0].From) {
		// The first plan is in force. The refusals that led here, and
		// those until now, were collisions, not the provider's limit: the
		// ceiling they taught is forgotten, and the cuts made before are
		// stale. The holders climb back to the highest ceiling learned
		// before the collisions, unconfirmed (so the climb is fast and
		// the probe above it soon tells whether it was the limit), or
		// slow-start from the rate when none was.
		t.Fresh = false
		doc.Ceiling, doc.Confirmed, doc.Top = doc.Top, false, 0
		doc.Epoch++
	}
	for len(t.Plans) > 1 && !t.Plans[1].From.After(now) {
		t.Plans = t.Plans[1:] // the second is in force: the first is over
	}
	if n := len(t.Plans); n > 0 && sameHolders(t.Plans[n-1].Holders, holders) {
		return
	}
	if len(holders) == 0 || len(t.Plans) >= turnPlans {
		return
	}
	from := now.Add(lead)
	if i := slices.Index(holders, doc.Learner); len(t.Plans) == 0 && i > 0 {
		// The learner sends at the whole rate until the plan is in
		// force: the first window is its own, so nobody hands over then.
		holders = append(append([]string{doc.Learner}, holders[:i]...), holders[i+1:]...)
	}
	if n := len(t.Plans); n > 0 {
		// After the last plan's first window, at one of its window
		// starts: a plan a holder learned is never replaced, and a window
		// is never cut short.
		last := &t.Plans[n-1]
		if second := last.From.Add(last.Window); from.Before(second) {
			from = second
		}
		from = last.next(from)
		holders = rotation(last, from, holders)
	}
	t.Plans = append(t.Plans, planTurns(from, doc.Rate, holders))
}

// sameHolders reports whether plan (in a plan's order) and sorted hold the
// same holders.
func sameHolders(plan, sorted []string) bool {
	return len(plan) == len(sorted) && slices.Equal(slices.Sorted(slices.Values(plan)), sorted)
}

// rotation orders holders for a plan that follows last from from on: the
// turn goes on where last would have gone on (the holder whose window last
// has at from first, then the others of last in its order), and newcomers
// come after them, so a change of holders never sends a holder that was
// about to have its turn to the back of the line.
func rotation(last *turnPlan, from time.Time, holders []string) []string {
	n := len(last.Holders)
	i := int(from.Sub(last.From) / last.Window % time.Duration(n))
	out := make([]string, 0, len(holders))
	for k := range n {
		if h := last.Holders[(i+k)%n]; slices.Contains(holders, h) {
			out = append(out, h)
		}
	}
	for _, h := range holders {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// planTurns makes the plan from from on for holders, at rate (the
// provider's, requests/s; zero when unknown).
func planTurns(from time.Time, rate float64, holders []string) turnPlan {
	window := turnWindow
	if rate > 0 {
		window = max(window, turnSlots*time.Duration(float64(time.Second)/rate))
	}
	return turnPlan{From: from, Window: window, Holders: holders}
}

// turnGuard is how long before the end of its window a holder pacing at
// rate (requests/s, the provider's whole rate: see turnWait) sends its last
// request: one interval at that rate, so that the interval the provider
// counts from that request has passed when the next holder's window opens,
// and turnMargin for the requests' arrival jitter and the holders' clocks.
// It is the holder's own rate at the time, not the plan's: a rate cut
// since the plan widens the guard at once.
func turnGuard(rate float64) time.Duration {
	if rate <= 0 {
		return turnMargin + 50*time.Millisecond
	}
	return time.Duration(float64(time.Second)/rate) + turnMargin
}

// next returns the start of the first window of p that begins at or after
// t (p.From if t is before it).
func (p *turnPlan) next(t time.Time) time.Time {
	if !t.After(p.From) {
		return p.From
	}
	i := (t.Sub(p.From) + p.Window - 1) / p.Window
	return p.From.Add(i * p.Window)
}

// turnEdge returns how long after now holder renews under turns t, so that
// the holders hand on the climb with the turn: at the start of its next
// window, to take up the rate the holder before it left, and half a guard
// before the end of its own, after its last request, to leave the rate it
// climbed to for the next; in the guard before the first plan comes into
// force, at its start. Zero when turns are not in force otherwise, or no
// edge is ahead.
func turnEdge(t *shareTurns, holder string, now time.Time, guard time.Duration) time.Duration {
	wait, on := turnWait(t, holder, now, guard)
	if !on || wait > 0 {
		return wait // zero, or the next window's start
	}
	k := 0
	for k+1 < len(t.Plans) && !t.Plans[k+1].From.After(now) {
		k++
	}
	p := &t.Plans[k]
	end := p.From.Add((now.Sub(p.From)/p.Window + 1) * p.Window)
	return max(0, end.Add(-min(guard, p.Window/2)/2).Sub(now))
}

// turnWait returns how long holder must wait at now before it may send
// under turns t, keeping guard at the end of each of its windows (see
// turnGuard; at most half the window, so a rate cut far under the plan's
// never leaves a holder no time to send), and for the last such guard
// before the first plan comes into force unless the first window is its
// own (inForce is false then): zero when turns are not in force otherwise,
// or in holder's own
// window before its guard; otherwise until its next window starts, or until
// turns end when the plans give it no window before they end, or shareSoon
// when the last plan does not have it (the next renewal may bring a plan
// that does). inForce says whether turns are in force.
func turnWait(t *shareTurns, holder string, now time.Time, guard time.Duration) (wait time.Duration, inForce bool) {
	if t == nil || !now.Before(t.Until) || len(t.Plans) == 0 {
		return 0, false
	}
	if first := &t.Plans[0]; now.Before(first.From) {
		// Not yet in force, but the holders that send before it (the
		// learner, see learn; or all of them, by rate) stop a guard before
		// it, but for the first window's holder: the learner's last
		// request, sent just before the plan came into force, and that
		// holder's first drew a refusal from a provider that allows no
		// burst at each hand-over.
		if w := first.From.Sub(now); w <= min(guard, first.Window/2) && len(first.Holders) > 0 && first.Holders[0] != holder {
			return w, false
		}
		return 0, false
	}
	k := 0
	for k+1 < len(t.Plans) && !t.Plans[k+1].From.After(now) {
		k++
	}
	for at := now; k < len(t.Plans); k++ {
		p := &t.Plans[k]
		end := t.Until
		if k+1 < len(t.Plans) {
			end = t.Plans[k+1].From
		}
		me := slices.Index(p.Holders, holder)
		for i := int64(at.Sub(p.From) / p.Window); me >= 0; i++ {
			start := p.From.Add(time.Duration(i) * p.Window)
			if !start.Before(end) {
				break
			}
			if int(i%int64(len(p.Holders))) == me {
				if stop := start.Add(p.Window - min(guard, p.Window/2)); at.Before(stop) {
					return max(0, start.Sub(now)), true
				}
			}
		}
		at = end
		if me < 0 && k+1 == len(t.Plans) {
			return shareSoon, true // in no plan yet: the next renewal may bring one
		}
	}
	return max(0, t.Until.Sub(now)), true // no window before turns end: go then, as before
}
