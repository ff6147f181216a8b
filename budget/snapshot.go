package budget

import "time"

// Snapshot is one provider's counters and state at a moment: the
// per-provider metrics an operator's dashboard shows.
type Snapshot struct {
	// Key is the provider key.
	Key string `json:"key"`
	// Rate is the pacing rate the provider is held to now, requests/s.
	Rate float64 `json:"rate"`
	// Ceiling is the learned ceiling, requests/s: where throttling began, or
	// what the provider's headers declared. Zero until known.
	Ceiling float64 `json:"ceiling"`
	// Phase is where the adaptive controller is in its climb.
	Phase string `json:"phase"`
	// PausedUntil is the end of the provider's latest pause (Retry-After, a
	// ban, a spent quota); in the past or zero when not paused.
	PausedUntil time.Time `json:"paused_until"`
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
	// SaveErrors counts saves of the provider's record that
	// [Config.Records] failed: the pause and the learned rate held in this
	// process, but a restart before the next successful save would not
	// know them.
	SaveErrors int64 `json:"save_errors,omitempty"`
	// Share is the fraction of the provider's rate this process holds
	// and paces at when the provider is shared through [Config.Shares]
	// (Rate and Ceiling are the provider's, for every process together),
	// and 1 when it is not.
	Share float64 `json:"share"`
	// Shares are the leases of every process sharing the provider, as of
	// this process's last renewal; nil when it is not shared.
	Shares []Share `json:"shares,omitempty"`
}

// Snapshot returns the provider's counters and state.
func (p *Local) Snapshot() Snapshot {
	a := p.ctl.Snapshot()
	return Snapshot{
		Key:         p.key,
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
	}
}
