package aimd

import "time"

// historyLen and historyStep size the rate history: one entry per
// historyStep, which dates requests up to historyLen × historyStep (1.6s)
// old to within one step.
const (
	historyLen  = 32
	historyStep = 50 * time.Millisecond
)

// rateHistory remembers recent rates, so a refusal is judged by the rate in
// force when its request was sent rather than by the rate the climb reached
// while the answer was on its way. Not safe for concurrent use; the
// Controller's mutex guards it.
type rateHistory struct {
	at   [historyLen]time.Time
	rate [historyLen]float64
	next int // slot of the next entry
	n    int // entries held
}

// note records rate r at now, at most one entry per historyStep: between
// cuts the rate only climbs, so an entry is the lowest rate of its step.
func (h *rateHistory) note(now time.Time, r float64) {
	if h.n > 0 {
		last := (h.next + historyLen - 1) % historyLen
		if d := now.Sub(h.at[last]); d >= 0 && d < historyStep {
			return
		}
	}
	h.at[h.next], h.rate[h.next] = now, r
	h.next = (h.next + 1) % historyLen
	h.n = min(h.n+1, historyLen)
}

// reset forgets every entry and starts again at rate r at now: after a cut
// the earlier, higher rates describe nothing a later request was sent at.
func (h *rateHistory) reset(now time.Time, r float64) {
	h.n, h.next = 0, 0
	h.note(now, r)
}

// lookup returns the rate in force at t: the latest entry at or before t,
// or the oldest entry when t is older than all of them, or def without any.
func (h *rateHistory) lookup(t time.Time, def float64) float64 {
	r := def
	for i := range h.n {
		j := (h.next + historyLen - 1 - i) % historyLen
		r = h.rate[j]
		if !h.at[j].After(t) {
			break
		}
	}
	return r
}
