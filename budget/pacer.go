package budget

import (
	"context"
	"fmt"
	"time"

	"github.com/forage-go/forage/gcra"
)

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
}

var _ Pacer = localPacer{}

func newLocalPacer(rate float64, burst int) (localPacer, error) {
	l, err := gcra.New(gcra.Config{Rate: rate, Burst: burst})
	if err != nil {
		return localPacer{}, err
	}
	return localPacer{l: l, head: make(chan struct{}, 1)}, nil
}

// WaitN waits until n units conform and books them. It fails at once, with
// an error wrapping context.DeadlineExceeded, when the next slot comes after
// ctx's deadline.
func (p localPacer) WaitN(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case p.head <- struct{}{}:
	default:
		select {
		case p.head <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r := p.l.AllowN(n)
	if r.Allowed { // the common case: no timer, nothing allocated
		<-p.head
		return nil
	}
	err := p.sleepUntilConform(ctx, n, r)
	<-p.head
	return err
}

// sleepUntilConform sleeps until the next slot and asks again, until the
// request conforms, ctx ends, or the slot would come after ctx's deadline.
func (p localPacer) sleepUntilConform(ctx context.Context, n int, r gcra.Result) error {
	var timer *time.Timer
	for !r.Allowed {
		if r.RetryAfter == gcra.Never {
			return fmt.Errorf("budget: pacer cost %d with burst %d: %w", n, p.l.Burst(), gcra.ErrInvalidCost)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < r.RetryAfter {
			return fmt.Errorf("%w (wait %v)", gcra.ErrWouldExceedDeadline, r.RetryAfter)
		}
		if timer == nil {
			timer = time.NewTimer(r.RetryAfter)
			defer timer.Stop()
		} else {
			timer.Reset(r.RetryAfter)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		r = p.l.AllowN(n)
	}
	return nil
}

// SetRate changes the rate; it applies to the very next slot.
func (p localPacer) SetRate(rate float64) error { return p.l.SetRate(rate) }

// PauseUntil holds every request until t; it applies to the very next slot.
func (p localPacer) PauseUntil(t time.Time) { p.l.PauseUntil(t) }
