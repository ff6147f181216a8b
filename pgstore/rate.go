package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage/gcra"
	"github.com/jackc/pgx/v5"
)

const (
	// adjustRateSQL applies a proposal with the rate policy. Parameters:
	// key, now, the pacer's last proposed interval (0: none), the new
	// one, the burst of a new row, the pacer's identity, the hold after a cut and
	// the growth factor per second.
	adjustRateSQL = `SELECT iv, verdict FROM {{schema}}.pacer_adjust($1, $2, $3, $4, $5, $6, $7, $8)`

	// minClimb is the smallest climb SetRate sends: a smaller one is kept
	// back and sent with the next, since the policy applies the step from
	// the last proposal sent, so nothing is lost but a database write.
	minClimb = 1.01
)

// SetRate proposes rate, in units per second, for the key: the rate the
// caller's controller (a [budget.Local]'s aimd) has just moved to. The
// shared rate does not become rate; it takes the same step, under a policy
// that makes every process sharing the key slow down together on a refusal
// and keeps one process's stale rate from undoing another's cut:
//
//   - The first call of a Pacer joins: it creates the row at rate if the
//     key is new, and otherwise leaves the shared rate alone (a process
//     starting at its controller's initial rate does not reset the
//     others).
//   - Each later call applies the factor by which the pacer's own proposal
//     changed (rate ÷ its last proposal) to the shared rate, in whole
//     nanoseconds of interval rounded towards the slower rate, so each
//     controller's steps count, whatever its absolute rate.
//   - A cut (a lower proposal) applies at once and starts a hold after a cut of
//     [PacerConfig.HoldAfterCut]. Cuts by other pacers within the hold after a cut of
//     the first cut of an episode are the same overshoot seen elsewhere:
//     the deepest applies, they do not compound. The first cutter's own
//     later cuts do compound, as its controller means them to.
//   - A climb (a higher proposal) by any pacer but the last cutter is
//     ignored until the hold after a cut of the latest cut ends. A climb never
//     lifts the shared rate above the proposal itself (a process still
//     climbing from a low start cannot push a faster shared rate), and all
//     climbs together spend one growth budget of [PacerConfig.MaxGrowth]
//     per second (at most a second of it banked): however many processes
//     climb, the shared rate grows no faster than that.
//
// Climbs of less than 1% since the last proposal sent are kept back and
// sent with the next (so a controller climbing smoothly writes about once
// per 1% step). The rescaling of what is already booked is that of
// [gcra.Limiter.SetRateAt], at the database's now. Every process sees the
// new rate at its next admission.
//
// It returns an error wrapping [gcra.ErrInvalidRate] for a rate gcra would
// refuse, or the database error; a failed proposal leaves the pacer's
// last proposal as it was, so the next call carries the step. Use
// [Pacer.ForceRate] to set the shared rate outright.
func (p *Pacer) SetRate(rate float64) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	_, err := p.adjust(ctx, nil, rate)
	return err
}

// SetRateAt is [Pacer.SetRate] at now, on the shared time base (see
// [Pacer]), with a context.
func (p *Pacer) SetRateAt(ctx context.Context, now time.Time, rate float64) error {
	ns := now.UnixNano()
	_, err := p.adjust(ctx, &ns, rate)
	return err
}

// ForceRate sets the shared rate to rate outright, bypassing the policy of
// [Pacer.SetRate]: for an operator, or a host that learned the provider's
// limit. What is booked is rescaled as [gcra.Limiter.SetRateAt] does, at
// the database's now; the pacers' later proposals move the shared rate
// from there. It returns an error wrapping [gcra.ErrInvalidRate], and
// keeps the old rate, for a rate gcra would refuse or one whose interval
// times the shared burst overflows int64 nanoseconds.
func (p *Pacer) ForceRate(ctx context.Context, rate float64) error { return p.force(ctx, nil, rate) }

// ForceRateAt is [Pacer.ForceRate] at now, on the shared time base (see
// [Pacer]).
func (p *Pacer) ForceRateAt(ctx context.Context, now time.Time, rate float64) error {
	ns := now.UnixNano()
	return p.force(ctx, &ns, rate)
}

// Rate reads the shared rate, in units per second: what every process
// sharing the key paces at, for a host to show. A key never used yet
// reports this pacer's configured rate.
func (p *Pacer) Rate(ctx context.Context) (float64, error) {
	st, err := p.State(ctx)
	if err != nil {
		return 0, err
	}
	return st.Rate(), nil
}

// adjust proposes rate with the policy and returns the policy's verdict
// ("" when nothing was sent).
func (p *Pacer) adjust(ctx context.Context, now *int64, rate float64) (string, error) {
	iv, rule := intervalOf(rate)
	if rule != "" {
		return "", fmt.Errorf("pgstore: pacer %q: SetRate rate must be %s (got %v): %w", p.key, rule, rate, gcra.ErrInvalidRate)
	}
	p.rateMu.Lock()
	defer p.rateMu.Unlock()
	last := p.lastIV
	if last != 0 && (iv == last || iv < last && float64(last) < minClimb*float64(iv)) {
		return "", nil // no step, or a climb too small to send yet
	}
	var (
		shared  int64
		verdict string
	)
	err := p.s.pool.QueryRow(ctx, p.s.sql.adjustRate, p.key, now, last, iv, p.burst, p.id,
		int64(p.holdAfterCut), p.growth).Scan(&shared, &verdict)
	if err != nil {
		return "", p.fail("SetRate", err)
	}
	p.lastIV = iv
	return verdict, nil
}

func (p *Pacer) force(ctx context.Context, now *int64, rate float64) error {
	iv, rule := intervalOf(rate)
	if rule != "" {
		return fmt.Errorf("pgstore: pacer %q: ForceRate rate must be %s (got %v): %w", p.key, rule, rate, gcra.ErrInvalidRate)
	}
	var burst int64
	err := p.s.pool.QueryRow(ctx, p.s.sql.forceRate, p.key, now, iv, p.burst).Scan(&burst)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: pacer %q: ForceRate rate %v gives an interval of %v; the shared Burst × interval must fit in int64 nanoseconds: %w",
			p.key, rate, time.Duration(iv), gcra.ErrInvalidRate)
	case err != nil:
		return p.fail("ForceRate", err)
	}
	return nil
}
