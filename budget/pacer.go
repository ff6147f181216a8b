package budget

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage/gcra"
)

// errPastDeadline is wrapped by the error of a wait for a pacing slot that
// would come after the caller's deadline (or the bound of the wait): the
// wait is not slept, and errors.Is sees [context.DeadlineExceeded].
var errPastDeadline = fmt.Errorf("budget: the pacing slot would come after the deadline: %w", context.DeadlineExceeded)

// localPacer is the default [Pacer]: a [gcra.Limiter] that books a slot only
// when it conforms at the current rate and pause. One waiter at a time asks
// the limiter; it sleeps until the next slot and asks again, and the others
// queue behind it.
//
// Why not [gcra.Limiter.WaitN]: it books the slot up front and sleeps on it,
// and a later SetRate or PauseUntil moves what is booked after, not the
// sleepers. With aimd changing the rate on every response, requests booked
// at a slow start rate then go out between those booked at the faster one,
// and requests booked before a Retry-After go out during the pause: each an
// avoidable 429, and each read by aimd as a new overshoot.
type localPacer struct {
	l    *gcra.Limiter
	head chan struct{} // held by the one waiter asking the limiter
	// faster wakes the waiter sleeping until its slot when the rate has
	// more than doubled since it went to sleep (slept, the interval it
	// computed its slot at; 0 while none sleeps): that slot was the
	// slower rate's. (At the floor's 0.05/s it slept up to 20 s after the
	// provider came back and the rate rose to 6/s.) Not for the small
	// steps of a climb: a waiter woken at each kept the sends too close
	// behind the climb, and the limit was met a few per cent lower.
	faster chan struct{}
	slept  *atomic.Int64
}

var _ Pacer = localPacer{}

func newLocalPacer(rate float64, burst int) (localPacer, error) {
	l, err := gcra.New(gcra.Config{Rate: rate, Burst: burst})
	if err != nil {
		return localPacer{}, err
	}
	return localPacer{l: l, head: make(chan struct{}, 1), faster: make(chan struct{}, 1), slept: new(atomic.Int64)}, nil
}

// WaitN waits until n units conform and books them. It fails at once, with
// an error wrapping context.DeadlineExceeded, when the next slot comes after
// ctx's deadline.
func (p localPacer) WaitN(ctx context.Context, n int) error { return p.waitBy(ctx, n, time.Time{}) }

// waitBy is WaitN with a bound by besides ctx's deadline (zero: none): it
// fails, booking nothing, with an error wrapping
// context.DeadlineExceeded, rather than wait past by, in the queue or for
// the slot. Unlike a context with that deadline, it allocates nothing when
// the units conform at once.
func (p localPacer) waitBy(ctx context.Context, n int, by time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case p.head <- struct{}{}:
	default:
		if err := p.queue(ctx, by); err != nil {
			return err
		}
	}
	iv := p.l.Interval() // the rate r is computed at, or a faster one
	r := p.l.AllowNAt(time.Now(), n)
	if r.Allowed { // the common case: no timer, nothing allocated
		<-p.head
		return nil
	}
	err := p.sleepUntilConform(ctx, n, r, iv, by)
	<-p.head
	return err
}

// queue waits for the head of the queue, until ctx ends or by (if set).
func (p localPacer) queue(ctx context.Context, by time.Time) error {
	var expired <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		expired = t.C
	}
	select {
	case p.head <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return fmt.Errorf("%w (queued past the bound)", errPastDeadline)
	}
}

// sleepUntilConform sleeps until the next slot and asks again, until the
// request conforms, ctx ends, or the slot would come after ctx's deadline
// or by (if set). iv is the interval r was reckoned at (read before it).
func (p localPacer) sleepUntilConform(ctx context.Context, n int, r gcra.Result, iv time.Duration, by time.Time) error {
	var timer *time.Timer
	for !r.Allowed {
		if r.RetryAfter == gcra.Never {
			return fmt.Errorf("budget: pacer cost must be in [0, Burst %d] (got %d): %w", p.l.Burst(), n, gcra.ErrInvalidConfig)
		}
		deadline, ok := ctx.Deadline()
		if !by.IsZero() && (!ok || by.Before(deadline)) {
			deadline, ok = by, true
		}
		if ok && time.Until(deadline) < r.RetryAfter {
			return fmt.Errorf("%w (wait %v)", errPastDeadline, r.RetryAfter)
		}
		if timer == nil {
			timer = time.NewTimer(r.RetryAfter)
			defer timer.Stop()
			defer p.slept.Store(0)
		} else {
			timer.Reset(r.RetryAfter)
		}
		// Stored, then the rate read again: a SetRate between the slot's
		// reckoning and the store either sees it and wakes this waiter,
		// or is seen here.
		p.slept.Store(int64(iv))
		if 2*p.l.Interval() >= iv {
			select {
			case <-timer.C:
			case <-p.faster:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		iv = p.l.Interval()
		r = p.l.AllowNAt(time.Now(), n)
	}
	return nil
}

// SetRate changes the rate; it applies to the very next slot, and, once
// the rate is more than twice the one a waiter computed its slot at, the
// waiter asks again.
func (p localPacer) SetRate(rate float64) error {
	if err := p.l.SetRate(rate); err != nil {
		return err
	}
	if was := time.Duration(p.slept.Load()); 2*p.l.Interval() < was {
		select {
		case p.faster <- struct{}{}:
		default: // one wake is pending already
		}
	}
	return nil
}

// PauseUntil holds every request until t; it applies to the very next slot.
func (p localPacer) PauseUntil(t time.Time) { p.l.PauseUntil(t) }

// waitAt returns how long after now a request of cost n would conform to l,
// booking nothing: the wait [gcra.Decide] computes, read from a probe (a
// cost-0 request, whose ResetAfter is the backlog TAT − now). A request
// conforms once the backlog is at most (Burst − n) intervals; one of a cost
// over the burst (see reserve) once the limiter has been idle n − Burst
// intervals: its backlog as of that long before now. (Counted from now, a
// call whose excess takes longer than MaxWait was refused at every try,
// each Until as far off as the last.)
func waitAt(l *gcra.Limiter, now time.Time, n int) time.Duration {
	if b := l.Burst(); n > b {
		return l.AllowNAt(now.Add(-time.Duration(n-b)*l.Interval()), 0).ResetAfter
	}
	backlog := l.AllowNAt(now, 0).ResetAfter
	return max(0, backlog-time.Duration(l.Burst()-n)*l.Interval())
}
