package budget

import (
	"time"

	"github.com/forage-go/forage/breaker"
)

// readyPoll is how soon to ask again about a provider whose wait has no
// known end: every in-flight slot taken, or the half-open breaker's probes
// all out. A call would wait for another caller to finish, which no clock
// can tell.
const readyPoll = 100 * time.Millisecond

// ReadyAt returns when a call to the provider for key could start its
// attempt without waiting, as far as can be told at now: now itself when a
// call would be sent at once, else the latest of the end of its pause (a
// Retry-After, a ban, a spent quota), the end of its open breaker, its next
// pacing slot and its known [Limit]s' next slot. It books nothing and never
// blocks, so a crawler can ask it of every host and hand its workers only
// the URLs of hosts that are ready, rather than park them in one slow
// host's pacer ([Frontier] does exactly that).
//
// Some waits have no end a clock can tell; for them ReadyAt returns when to
// ask again: shortly after now (100ms) while every in-flight slot
// ([Config.MaxInFlight]) is taken or the half-open breaker's probes are all
// out, and five seconds after now while an operator has the provider paused
// (see [Registry.SetStatus]). A key with no provider yet is ready at now, as
// is one whose pacer is not the local one (a shared [Pacer] decides only
// when asked). The answer is a forecast: other callers may take the slot
// first. ReadyAt is safe for concurrent use, and costs [Provider.Do]
// nothing.
func (r *Registry) ReadyAt(key string, now time.Time) time.Time {
	pr, ok := r.Lookup(key)
	if !ok {
		return now
	}
	return pr.(*entry).p.readyAt(now, 1)
}

// readyAt returns when n calls in a row could all have started without
// waiting, as far as can be told at now: for n = 1 the next free slot, for
// n = 2 the one after it (see [Registry.ReadyAt]).
func (p *local) readyAt(now time.Time, n int) time.Time {
	if p.op.paused.Load() {
		if p.cfg.Records != nil {
			p.readStatus(now) // a paused provider gets no calls to read it
		}
		return now.Add(recordEvery)
	}
	at := now
	later := func(t time.Time) {
		if t.After(at) {
			at = t
		}
	}
	later(p.ctl.Snapshot().PausedUntil)
	switch p.brk.State() {
	case breaker.StateOpen:
		later(p.brk.OpenUntil())
	case breaker.StateHalfOpen:
		if c := p.brk.Counts(); int(c.Requests) >= max(1, p.cfg.Breaker.HalfOpenProbes) {
			later(now.Add(readyPoll))
		}
	}
	if len(p.slots) >= cap(p.slots) { // the calls that hold them say nothing of a second one
		later(now.Add(readyPoll))
	}
	if p.sh.gate.Load() != nil { // shared, and the others hold it all: ask again after the next renewal
		later(now.Add(shareSoon))
	}
	if w, _ := p.turnWait(now); w > 0 { // shared, in turns: its next window
		later(now.Add(w))
	}
	if lp, local := p.pacer.(localPacer); local {
		later(now.Add(waitAt(lp.l, now, n)))
	}
	for i, lim := range p.lims() {
		later(now.Add(waitAt(lim, now, n*p.cost(i, 1))))
	}
	return at
}
