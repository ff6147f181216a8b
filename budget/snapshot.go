package budget

import (
	"time"

	"github.com/forage-go/forage"
)

// Snapshot is one provider's counters and state at a moment: the
// per-provider metrics an operator's dashboard shows.
type Snapshot struct {
	// Key is the provider key.
	Key string `json:"key"`
	// Status is the operator's status in force in this process,
	// [StatusActive] or [StatusPaused] (see [Registry.SetStatus]), and Why
	// the operator's reason given with it (a pause's or a resume's).
	Status string `json:"status"`
	Why    string `json:"why,omitempty"`
	// Rate is the pacing rate the provider is held to now, requests/s.
	Rate float64 `json:"rate"`
	// Ceiling is the learned ceiling, requests/s: where throttling began, or
	// what the provider's headers declared. Zero until known.
	Ceiling float64 `json:"ceiling"`
	// Phase is where the adaptive controller is in its climb.
	Phase string `json:"phase"`
	// PausedUntil is the end of the provider's latest pause (Retry-After, a
	// ban, a spent quota); in the past or zero when not paused (left out
	// of the JSON when zero).
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// PauseReason is why that pause is in force: [forage.ReasonBanned] or
	// [forage.ReasonThrottled]; "" when not paused.
	PauseReason forage.Reason `json:"pause_reason,omitempty"`
	// Limits is the usage of each known [Limit], in [Config.Limits] order.
	Limits []LimitSnapshot `json:"limits,omitempty"`
	// Breaker is the breaker's state.
	Breaker string `json:"breaker"`
	// InFlight is how many attempts are in flight now.
	InFlight int64 `json:"in_flight"`
	// Requests counts attempts sent (each one outbound call).
	Requests uint64 `json:"requests"`
	// OK counts successful attempts.
	OK uint64 `json:"ok"`
	// Throttled counts 429 and 418 answers.
	Throttled uint64 `json:"throttled"`
	// Overloaded counts 503 answers.
	Overloaded uint64 `json:"overloaded"`
	// Transient counts other retryable failures: 5xx, 408, timeouts, resets.
	Transient uint64 `json:"transient"`
	// Permanent counts non-retryable failures (4xx other than 408/418/429).
	Permanent uint64 `json:"permanent"`
	// Retries counts retry attempts granted by run retry budgets.
	Retries int64 `json:"retries"`
	// FastFails counts calls refused by the open breaker, no request sent.
	FastFails int64 `json:"fast_fails"`
	// Saturated counts calls that found every bulkhead slot taken and had
	// to queue: a sign the provider is the bottleneck.
	Saturated int64 `json:"saturated"`
	// SaveErrors counts the writes to the stores that failed: saves of
	// the provider's record to [Config.Records] (the pause and the learned
	// rate held in this process, but a restart before the next successful
	// save would not know them) and renewals of its lease in
	// [Config.Shares] (retried soon; a lease not renewed for long drops
	// this process to its safe share).
	SaveErrors int64 `json:"save_errors,omitempty"`
	// Share is the fraction of the provider's rate this process holds
	// and paces at when the provider is shared through [Config.Shares]
	// (Rate and Ceiling are the provider's, for every process together),
	// and 1 when it is not.
	Share float64 `json:"share"`
	// Shares are the leases of every process sharing the provider, as of
	// this process's last renewal; nil when it is not shared.
	Shares []Share `json:"shares,omitempty"`
	// TurnsUntil is, while the processes sharing the provider take turns
	// (they collided: see [Config.Shares]), when the turns end; zero
	// otherwise.
	TurnsUntil time.Time `json:"turns_until,omitzero"`
}

// LimitSnapshot is the usage of one known [Limit] at a moment.
type LimitSnapshot struct {
	// Name, Count and Per are the limit's (see [Limit]).
	Name  string        `json:"name,omitempty"`
	Count int           `json:"count"`
	Per   time.Duration `json:"per"`
	// Used is how many of Count the units already booked take from the
	// window of length Per that starts now (the limiter's backlog, a
	// reported usage included), so Count − Used may still go in it. With
	// [Config.Shares], it is this process's part: the units it booked of
	// its share of the limit.
	Used int `json:"used"`
	// Reset is when the limit is fully recovered (Used back to 0); zero
	// when it is already.
	Reset time.Time `json:"reset,omitzero"`
}

// Snapshot returns the provider's counters and state.
func (p *local) Snapshot() Snapshot {
	a, now := p.ctl.Snapshot(), time.Now()
	status, why := StatusActive, ""
	if p.op.paused.Load() {
		status = StatusPaused
	}
	if w := p.op.why.Load(); w != nil {
		why = *w // an operator's reason, for a pause or a resume
	}
	var reason forage.Reason
	if a.PausedUntil.After(now) {
		reason = p.pauseReason(now)
	}
	var limits []LimitSnapshot
	lims := p.lims()
	for i, l := range p.cfg.Limits {
		ls := LimitSnapshot{Name: l.Name, Count: l.Count, Per: l.Per}
		if owed := lims[i].AllowNAt(now, 0).ResetAfter; owed > 0 {
			iv := lims[i].Interval()
			ls.Used, ls.Reset = min(l.Count, int((owed+iv-1)/iv)), now.Add(owed)
		}
		limits = append(limits, ls)
	}
	return Snapshot{
		Key:         p.key,
		Status:      status,
		Why:         why,
		PauseReason: reason,
		Limits:      limits,
		Rate:        a.Rate,
		Ceiling:     a.Ceiling,
		Phase:       a.Phase.String(),
		PausedUntil: a.PausedUntil,
		Breaker:     p.brk.State().String(),
		InFlight:    p.n.inFlight.Load(),
		Requests:    p.n.requests.Load(),
		OK:          p.n.ok.Load(),
		Throttled:   p.n.throttled.Load(),
		Overloaded:  p.n.overloaded.Load(),
		Transient:   p.n.transient.Load(),
		Permanent:   p.n.permanent.Load(),
		Retries:     p.n.retries.Load(),
		FastFails:   p.n.fastFails.Load(),
		Saturated:   p.n.saturated.Load(),
		SaveErrors:  p.n.saveErrs.Load(),
		Share:       p.sh.fraction(),
		Shares:      p.sh.snapshot(),
		TurnsUntil:  p.sh.turnsUntil(),
	}
}
