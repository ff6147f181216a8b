package gcra

import (
	"context"
	"fmt"
	"time"
)

// WaitN books a request of cost n (see [Limiter.ReserveNAt]; 1 for one
// request) and blocks until it conforms. It returns nil when the request may be sent. If the context
// ends first, or its deadline comes before the slot would, WaitN gives the
// slot back and returns an error: ctx.Err() when the context ended while
// waiting, or at once, without sleeping into a certain failure, an error
// wrapping [context.DeadlineExceeded] when the deadline is too near. A cost outside
// [0, Burst] never conforms: it returns an error wrapping [ErrInvalidConfig]
// without booking.
//
// The wait is a timer, which fires late by up to about a millisecond; the
// next booking is still measured from the slot, not from the late wake-up, so
// the rate holds as long as Burst covers the overshoot (see the package
// documentation on high rates).
func (l *Limiter) WaitN(ctx context.Context, n int) error {
	if n < 0 || n > l.Burst() {
		return fmt.Errorf("gcra: WaitN cost must be in [0, Burst %d] (got %d): %w", l.Burst(), n, ErrInvalidConfig)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	wait := l.reserve(0, true, n)
	if wait == 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left < wait {
			l.unreserve(0, true, n)
			return fmt.Errorf("%w (wait %v, deadline in %v)", errWouldExceedDeadline, wait, left)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		l.unreserve(0, true, n)
		return ctx.Err()
	}
}
