package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage/gcra"
	"github.com/jackc/pgx/v5"
)

// The pacer's statements. Each is atomic on the key's row; $2 is an
// explicit now in nanoseconds, or NULL for the database clock, which is
// then read after the row lock is taken.
const (
	// reserveSQL books n units with gcra_reserve, and returns the wait, the
	// burst and the now it booked at. The now is read once, from the
	// locked row's CTE (a volatile CTE is evaluated once per row, in
	// order), so it is the time after the lock and the one the booking
	// used. Parameters: key, now, n.
	reserveSQL = `
WITH cur AS (
	SELECT key, tat, interval_ns, burst FROM {{schema}}.pacers WHERE key = $1 FOR UPDATE
), t AS MATERIALIZED (
	SELECT cur.*, coalesce($2::bigint, {{schema}}.clock_ns()) AS now FROM cur
), r AS (
	SELECT t.key, t.burst, x.new_tat, x.wait, t.now
	FROM t, LATERAL {{schema}}.gcra_reserve(t.tat, t.now, t.interval_ns, t.burst, $3::bigint) AS x
)
UPDATE {{schema}}.pacers p SET tat = r.new_tat FROM r WHERE p.key = r.key
RETURNING r.wait, r.burst, r.now`

	// reserveWithinSQL is reserveSQL that books only when the wait is at
	// most $4 nanoseconds; otherwise it books nothing and returns the wait
	// the booking would have had. Parameters: key, now, n, horizon.
	reserveWithinSQL = `
WITH cur AS (
	SELECT key, tat, interval_ns, burst FROM {{schema}}.pacers WHERE key = $1 FOR UPDATE
), t AS MATERIALIZED (
	SELECT cur.*, coalesce($2::bigint, {{schema}}.clock_ns()) AS now FROM cur
), r AS MATERIALIZED (
	SELECT t.key, t.burst, x.new_tat, x.wait, t.now
	FROM t, LATERAL {{schema}}.gcra_reserve(t.tat, t.now, t.interval_ns, t.burst, $3::bigint) AS x
), u AS (
	UPDATE {{schema}}.pacers p SET tat = r.new_tat FROM r WHERE p.key = r.key AND r.wait <= $4::bigint
	RETURNING p.key
)
SELECT r.wait, r.burst, r.now, EXISTS (SELECT 1 FROM u) FROM r`

	// decideSQL books n units with gcra_decide, only if they conform.
	// Parameters: key, now, n.
	decideSQL = `
WITH cur AS (
	SELECT key, tat, interval_ns, burst FROM {{schema}}.pacers WHERE key = $1 FOR UPDATE
), r AS (
	SELECT cur.key, x.*
	FROM cur, LATERAL {{schema}}.gcra_decide(cur.tat, coalesce($2::bigint, {{schema}}.clock_ns()),
		cur.interval_ns, cur.burst, $3::bigint) AS x
)
UPDATE {{schema}}.pacers p SET tat = r.new_tat FROM r WHERE p.key = r.key
RETURNING r.allowed, r.remaining, r.retry_after, r.reset_after`

	// unreserveSQL gives n units back. Parameters: key, now, n.
	unreserveSQL = `
UPDATE {{schema}}.pacers
SET tat = {{schema}}.gcra_unreserve(tat, coalesce($2::bigint, {{schema}}.clock_ns()), interval_ns, $3::bigint)
WHERE key = $1 AND $3::bigint <= burst`

	// forceRateSQL sets the interval, rescaling the backlog, or creates the
	// row at that interval. No row comes back when the row's burst times
	// the new interval would overflow. Parameters: key, now, interval,
	// burst of a new row.
	forceRateSQL = `
INSERT INTO {{schema}}.pacers AS p (key, tat, interval_ns, burst)
VALUES ($1, -9223372036854775808, $3::bigint, $4::bigint)
ON CONFLICT (key) DO UPDATE SET
	tat = CASE WHEN p.interval_ns = excluded.interval_ns THEN p.tat
		ELSE {{schema}}.gcra_rescale(p.tat, coalesce($2::bigint, {{schema}}.clock_ns()), p.interval_ns, excluded.interval_ns) END,
	interval_ns = excluded.interval_ns
WHERE {{schema}}.gcra_tolerance(excluded.interval_ns, p.burst) IS NOT NULL
RETURNING p.burst`

	// pauseSQL moves the TAT to at least until + L, creating the row if
	// needed. until is $2, or the database clock plus the delay $3.
	// Parameters: key, until, delay, interval and burst of a new row.
	pauseSQL = `
INSERT INTO {{schema}}.pacers AS p (key, tat, interval_ns, burst)
VALUES ($1, {{schema}}.gcra_pause(-9223372036854775808,
	coalesce($2::bigint, {{schema}}.gcra_sat({{schema}}.clock_ns()::numeric + $3::bigint)), $4::bigint, $5::bigint),
	$4::bigint, $5::bigint)
ON CONFLICT (key) DO UPDATE SET tat = {{schema}}.gcra_pause(p.tat,
	coalesce($2::bigint, {{schema}}.gcra_sat({{schema}}.clock_ns()::numeric + $3::bigint)), p.interval_ns, p.burst)`

	// ensurePacerSQL creates the key's row, idle. Parameters: key,
	// interval, burst.
	ensurePacerSQL = `
INSERT INTO {{schema}}.pacers (key, tat, interval_ns, burst) VALUES ($1, -9223372036854775808, $2, $3)
ON CONFLICT (key) DO NOTHING`

	// pacerStateSQL reads the row and the database clock.
	pacerStateSQL = `SELECT tat, interval_ns, burst, {{schema}}.clock_ns() FROM {{schema}}.pacers WHERE key = $1`
)

// ReserveN books n units whether or not they conform, at the database's
// now, and returns how long to wait before sending: [gcra.Limiter.ReserveN]
// on the shared row. A cost outside [0, Burst] books nothing and returns
// [gcra.Never]. Give an unused slot back with [Pacer.UnreserveN].
func (p *Pacer) ReserveN(ctx context.Context, n int) (time.Duration, error) {
	wait, _, _, err := p.reserve(ctx, nil, n)
	return wait, err
}

// ReserveNAt is [Pacer.ReserveN] at now, on the shared time base (see
// [Pacer]).
func (p *Pacer) ReserveNAt(ctx context.Context, now time.Time, n int) (time.Duration, error) {
	ns := now.UnixNano()
	wait, _, _, err := p.reserve(ctx, &ns, n)
	return wait, err
}

// AllowN books n units only if they conform at the database's now, and
// reports the decision as [gcra.Limiter.AllowN] does; it never waits.
func (p *Pacer) AllowN(ctx context.Context, n int) (gcra.Result, error) { return p.decide(ctx, nil, n) }

// AllowNAt is [Pacer.AllowN] at now, on the shared time base (see
// [Pacer]).
func (p *Pacer) AllowNAt(ctx context.Context, now time.Time, n int) (gcra.Result, error) {
	ns := now.UnixNano()
	return p.decide(ctx, &ns, n)
}

// UnreserveN gives back n units booked by [Pacer.ReserveN] whose wait has
// not elapsed, as [gcra.Limiter.UnreserveN] does: the TAT moves back by n
// intervals but never below the database's now. Giving back a slot that
// was used, or twice, hands out credit that was never booked.
func (p *Pacer) UnreserveN(ctx context.Context, n int) error { return p.unreserve(ctx, nil, n) }

// UnreserveNAt is [Pacer.UnreserveN] at now, on the shared time base (see
// [Pacer]).
func (p *Pacer) UnreserveNAt(ctx context.Context, now time.Time, n int) error {
	ns := now.UnixNano()
	return p.unreserve(ctx, &ns, n)
}

// PauseUntilAt is [Pacer.PauseUntil] with t on the shared time base (see
// [Pacer]) and a context; it reports the database error, if any.
func (p *Pacer) PauseUntilAt(ctx context.Context, t time.Time) error {
	ns := t.UnixNano()
	return p.pause(ctx, &ns, nil)
}

// PacerState is a snapshot of a shared pacer's row, read by [Pacer.State]:
// a plain value, safe to copy and share.
type PacerState struct {
	// Interval is the emission interval 1/Rate.
	Interval time.Duration
	// Burst is the row's burst.
	Burst int
	// Backlog is how far the bookings reach beyond the database's now
	// (TAT − now, or zero when idle): a request of cost n conforms now if
	// Backlog + n·Interval ≤ Burst·Interval.
	Backlog time.Duration
}

// Rate returns the rate in units per second.
func (st PacerState) Rate() float64 { return 1e9 / float64(st.Interval) }

// State reads the row at the database's now. A key never used yet reports
// this pacer's configured rate and burst, idle.
func (p *Pacer) State(ctx context.Context) (PacerState, error) {
	var tat, iv, burst, now int64
	err := p.s.pool.QueryRow(ctx, p.s.sql.pacerState, p.key).Scan(&tat, &iv, &burst, &now)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return PacerState{Interval: time.Duration(p.iv), Burst: p.burst}, nil
	case err != nil:
		return PacerState{}, p.fail("State", err)
	}
	return PacerState{Interval: time.Duration(iv), Burst: int(burst), Backlog: time.Duration(max(tat, now) - now)}, nil
}

// reserve runs reserveSQL, creating the row first if it is missing. at is
// the now it booked at, in nanoseconds on the shared time base.
func (p *Pacer) reserve(ctx context.Context, now *int64, n int) (wait time.Duration, burst, at int64, err error) {
	err = p.withRow(ctx, "ReserveN", func() error {
		return p.s.pool.QueryRow(ctx, p.s.sql.reserve, p.key, now, n).Scan(&wait, &burst, &at)
	})
	return wait, burst, at, err
}

// reserveWithin runs reserveWithinSQL, creating the row first if it is
// missing: it books n units only if they conform within horizon, and
// reports whether it did.
func (p *Pacer) reserveWithin(ctx context.Context, now *int64, n int, horizon time.Duration) (wait time.Duration, burst, at int64, booked bool, err error) {
	err = p.withRow(ctx, "ReserveN", func() error {
		return p.s.pool.QueryRow(ctx, p.s.sql.reserveWithin, p.key, now, n, int64(horizon)).Scan(&wait, &burst, &at, &booked)
	})
	return wait, burst, at, booked, err
}

// decide runs decideSQL, creating the row first if it is missing.
func (p *Pacer) decide(ctx context.Context, now *int64, n int) (r gcra.Result, err error) {
	err = p.withRow(ctx, "AllowN", func() error {
		var remaining int64
		err := p.s.pool.QueryRow(ctx, p.s.sql.decide, p.key, now, n).Scan(&r.Allowed, &remaining, &r.RetryAfter, &r.ResetAfter)
		r.Remaining = int(remaining)
		return err
	})
	return r, err
}

func (p *Pacer) unreserve(ctx context.Context, now *int64, n int) error {
	if _, err := p.s.pool.Exec(ctx, p.s.sql.unreserve, p.key, now, n); err != nil {
		return p.fail("UnreserveN", err)
	}
	return nil
}

// pause runs pauseSQL with an absolute until or a delay from the database
// clock (exactly one of them non-nil).
func (p *Pacer) pause(ctx context.Context, until, delay *int64) error {
	if _, err := p.s.pool.Exec(ctx, p.s.sql.pause, p.key, until, delay, p.iv, p.burst); err != nil {
		return p.fail("PauseUntil", err)
	}
	return nil
}

// withRow runs stmt, and if it found no row for the key, creates the row
// (idle, at the configured rate and burst) and runs stmt again.
func (p *Pacer) withRow(ctx context.Context, op string, stmt func() error) error {
	err := stmt()
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := p.s.pool.Exec(ctx, p.s.sql.ensurePacer, p.key, p.iv, p.burst); err != nil {
			return p.fail(op, err)
		}
		err = stmt()
	}
	if err != nil {
		return p.fail(op, err)
	}
	return nil
}

// fail wraps a database error, naming the pacer.
func (p *Pacer) fail(op string, err error) error {
	return p.s.fail(fmt.Sprintf("pacer %q: %s", p.key, op), err)
}
