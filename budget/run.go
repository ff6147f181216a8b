package budget

import (
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/retry"
)

// Envelope is the owner's budget for one run: how many request attempts it
// may make, until when, and how many of them may be retries. The zero
// Envelope is unbounded in requests and time, with the default retry ratio.
type Envelope struct {
	// MaxRequests caps the request attempts of the run (first attempts and
	// retries alike, each one outbound call). Zero means no cap.
	MaxRequests int
	// Deadline is the wall-clock end of the run. No attempt starts after it,
	// and no call sleeps past it. Zero means none.
	Deadline time.Time
	// RetryRatio is the share of first attempts that may be retried: every
	// first attempt deposits RetryRatio retry tokens, every retry withdraws
	// one. It must be in [1e-9, 1]. Zero means the default 0.2;
	// [retry.NoRetries] means no ratio at all (only the MinRetries floor).
	RetryRatio float64
	// MinRetries is the floor of the retry budget, so a tiny run can still
	// retry a transient failure or two. Zero means the default 3; use
	// [retry.NoRetries] for none at all.
	MinRetries int
	// Parent, if set, is a run this one is a part of: a command's whole
	// envelope, of which this run is one turn. Every attempt counts against
	// both, this run is spent as soon as either is (the parent's reason
	// first), and its deadline is the earlier of the two. The retry budget
	// is this run's own. Nil means none.
	Parent *Run
}

// Run is one run's envelope in use: it counts every attempt made through any
// [Provider] on its behalf, and answers whether the run's budget is spent. A
// nil *Run is valid and unbounded. Run is safe for concurrent use.
type Run struct {
	parent      *Run
	maxRequests int64
	deadline    time.Time
	attempts    atomic.Int64
	retries     *retry.Budget
}

// NewRun returns a Run for env, or an error naming the invalid field.
func NewRun(env Envelope) (*Run, error) {
	if env.MaxRequests < 0 {
		return nil, invalid.Must("Envelope.MaxRequests", "be >= 0", env.MaxRequests)
	}
	if r := env.RetryRatio; r != 0 && r != retry.NoRetries && !(r >= 1e-9 && r <= 1) {
		return nil, invalid.Must("Envelope.RetryRatio", "be in [1e-9, 1], 0 or NoRetries", r)
	}
	if m := env.MinRetries; m < 0 && m != retry.NoRetries {
		return nil, invalid.Must("Envelope.MinRetries", "be >= 0 or NoRetries", m)
	}
	rb, err := retry.NewBudget(retry.BudgetConfig{Ratio: env.RetryRatio, MinRetries: env.MinRetries})
	if err != nil {
		return nil, invalid.Wrap("Envelope", err)
	}
	return &Run{parent: env.Parent, maxRequests: int64(env.MaxRequests), deadline: env.Deadline, retries: rb}, nil
}

// Deadline returns the run's deadline (the earlier of its own and its
// parent's) and whether it has one.
func (r *Run) Deadline() (time.Time, bool) {
	if r == nil {
		return time.Time{}, false
	}
	pd, ok := r.parent.Deadline()
	switch {
	case r.deadline.IsZero():
		return pd, ok
	case ok && pd.Before(r.deadline):
		return pd, true
	}
	return r.deadline, true
}

// Attempts returns how many request attempts the run has made.
func (r *Run) Attempts() int {
	if r == nil {
		return 0
	}
	return int(r.attempts.Load())
}

// retryBudget returns the run's retry budget, or nil for a nil Run.
func (r *Run) retryBudget() *retry.Budget {
	if r == nil {
		return nil
	}
	return r.retries
}

// ExhaustedAt reports whether the run's budget is spent at now, and why:
// [forage.ReasonRequestCap] when every allowed attempt was made, [forage.ReasonDeadline]
// when now is at or past the deadline. Slice runners call it at slice
// boundaries.
func (r *Run) ExhaustedAt(now time.Time) (forage.Reason, bool) {
	if r == nil {
		return "", false
	}
	if why, spent := r.parent.ExhaustedAt(now); spent {
		return why, true
	}
	if r.maxRequests > 0 && r.attempts.Load() >= r.maxRequests {
		return forage.ReasonRequestCap, true
	}
	if !r.deadline.IsZero() && !now.Before(r.deadline) {
		return forage.ReasonDeadline, true
	}
	return "", false
}

// admitAt counts one attempt if the envelope allows it at now, and otherwise
// says why not. It never over-admits under concurrency.
func (r *Run) admitAt(now time.Time) (forage.Reason, bool) {
	if r == nil {
		return "", true
	}
	if why, ok := r.parent.admitAt(now); !ok {
		return why, false
	}
	why, ok := r.admitOwn(now)
	if !ok {
		r.parent.unadmit()
	}
	return why, ok
}

// admitOwn is admitAt for r's own envelope.
func (r *Run) admitOwn(now time.Time) (forage.Reason, bool) {
	if !r.deadline.IsZero() && !now.Before(r.deadline) {
		return forage.ReasonDeadline, false
	}
	if r.maxRequests == 0 {
		r.attempts.Add(1)
		return "", true
	}
	for {
		n := r.attempts.Load()
		if n >= r.maxRequests {
			return forage.ReasonRequestCap, false
		}
		if r.attempts.CompareAndSwap(n, n+1) {
			return "", true
		}
	}
}

// unadmit takes back an attempt admitAt counted but that was never made
// (the breaker refused it, or pacing could not fit it in).
func (r *Run) unadmit() {
	if r != nil {
		r.attempts.Add(-1)
		r.parent.unadmit()
	}
}

// remaining returns the time left before the deadline at now, and false when
// the run has no deadline.
func (r *Run) remaining(now time.Time) (time.Duration, bool) {
	d, ok := r.Deadline()
	if !ok {
		return 0, false
	}
	return d.Sub(now), true
}
