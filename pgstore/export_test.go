package pgstore

import (
	"context"
	"time"
)

// OnAdmit makes every successful WaitN of p call f with the time its slot
// conforms at, in nanoseconds on the database clock: the admission time
// the GCRA bound holds for. Set it before p is used.
func OnAdmit(p *Pacer, f func(slot int64)) { p.onAdmit = f }

// AdjustAt is SetRateAt returning the policy's verdict ("" when nothing
// was sent).
func AdjustAt(ctx context.Context, p *Pacer, now time.Time, rate float64) (string, error) {
	ns := now.UnixNano()
	return p.adjust(ctx, &ns, rate)
}

// MinClimb is the smallest climb SetRate sends.
const MinClimb = minClimb
