package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5"
)

// addGapSQL draws the next ID from the single gap_ids row and inserts the
// gap in one statement. The row lock is held until the statement commits,
// so IDs are issued in commit order: a reader never sees gap n+1 before
// gap n, and a drain that pages with After never skips one. Parameters:
// stream, mode, cursor, range start and end (seconds, nanoseconds; NULL for
// none), reason, created.
var addGapSQL = `
WITH next AS (UPDATE {{schema}}.gap_ids SET last_id = last_id + 1 RETURNING last_id)
INSERT INTO {{schema}}.gaps (id, stream, mode, cursor, range_start, range_end, reason, created)
SELECT last_id, $1::text, $2::smallint, $3::bytea, ` + numTime("$4", "$5") + `, ` + numTime("$6", "$7") + `, $8::text, $9::timestamptz
FROM next
RETURNING id`

// listGapsSQL is the head of ListGaps; the filters and the limit are
// appended per query, so each shape gets a plan that uses its index.
var listGapsSQL = `
SELECT id, stream, mode, cursor, ` + timeNum("range_start") + `, ` + timeNum("range_end") + `, reason, created
FROM {{schema}}.gaps WHERE id > $1`

// resolveGapSQL deletes the gap and reports whether it did, and the last ID
// ever issued, to tell a resolved gap from one that never existed.
const resolveGapSQL = `
WITH d AS (DELETE FROM {{schema}}.gaps WHERE id = $1 RETURNING id)
SELECT (SELECT count(*) FROM d), (SELECT last_id FROM {{schema}}.gap_ids)`

// AddGap implements [checkpoint.Gaps.AddGap].
func (s *Store) AddGap(ctx context.Context, gap checkpoint.Gap) (checkpoint.Gap, error) {
	if err := enter(ctx, checkGap(gap)); err != nil {
		return checkpoint.Gap{}, err
	}
	gap.Created = s.clock()
	gap.Cursor = append([]byte{}, gap.Cursor...) // never NULL; the caller's slice is not kept
	var start, end [2]*int64
	if !gap.Range.IsZero() {
		start, end = splitTime(gap.Range.Start), splitTime(gap.Range.End)
	}
	err := s.pool.QueryRow(ctx, s.sql.addGap, gap.Key.Stream, int16(gap.Key.Mode), gap.Cursor,
		start[0], start[1], end[0], end[1], gap.Reason, gap.Created).Scan(&gap.ID)
	if errors.Is(err, pgx.ErrNoRows) { // the gap_ids row is missing
		return checkpoint.Gap{}, fmt.Errorf("%w: schema %q has no gap_ids row; call (*pgstore.Store).Migrate first", ErrNotMigrated, s.schema)
	}
	if err != nil {
		return checkpoint.Gap{}, s.failWrite("AddGap "+gap.Key.String(), err)
	}
	return gap, nil
}

// ListGaps implements [checkpoint.Gaps.ListGaps].
func (s *Store) ListGaps(ctx context.Context, q checkpoint.GapQuery) ([]checkpoint.Gap, error) {
	if err := enter(ctx, checkQuery(q)); err != nil {
		return nil, err
	}
	query, args := s.listQuery(q)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.fail("ListGaps", err)
	}
	var out []checkpoint.Gap
	for rows.Next() {
		var (
			g      checkpoint.Gap
			mode   int16
			rs, re [2]*int64
		)
		if err := rows.Scan(&g.ID, &g.Key.Stream, &mode, &g.Cursor, &rs[0], &rs[1], &re[0], &re[1], &g.Reason, &g.Created); err != nil {
			rows.Close()
			return nil, s.fail("ListGaps", err)
		}
		g.Key.Mode = checkpoint.Mode(mode)
		if rs[0] != nil {
			g.Range = checkpoint.Range{Start: joinTime(rs), End: joinTime(re)}
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("ListGaps", err)
	}
	return out, nil
}

// listQuery appends q's filters to listGapsSQL.
func (s *Store) listQuery(q checkpoint.GapQuery) (string, []any) {
	var b strings.Builder
	b.WriteString(s.sql.listGaps)
	args := []any{q.After}
	if q.Stream != "" {
		args = append(args, q.Stream)
		b.WriteString(" AND stream = $" + strconv.Itoa(len(args)))
	}
	if q.Mode != 0 {
		args = append(args, int16(q.Mode))
		b.WriteString(" AND mode = $" + strconv.Itoa(len(args)))
	}
	b.WriteString(" ORDER BY id")
	if q.Limit > 0 {
		args = append(args, q.Limit)
		b.WriteString(" LIMIT $" + strconv.Itoa(len(args)))
	}
	return b.String(), args
}

// ResolveGap implements [checkpoint.Gaps.ResolveGap].
func (s *Store) ResolveGap(ctx context.Context, id int64) error {
	var argErr error
	if id <= 0 {
		argErr = fmt.Errorf("%w: gap id must be > 0 (got %d)", checkpoint.ErrInvalid, id)
	}
	if err := enter(ctx, argErr); err != nil {
		return err
	}
	var deleted int64
	var last *int64
	if err := s.pool.QueryRow(ctx, s.sql.resolveGap, id).Scan(&deleted, &last); err != nil {
		return s.failWrite(fmt.Sprint("ResolveGap ", id), err)
	}
	if deleted == 0 && (last == nil || id > *last) {
		return fmt.Errorf("%w: no gap was recorded with id %d", checkpoint.ErrNotFound, id)
	}
	return nil
}

// Times in ranges are stored exactly, as numeric seconds since the Unix
// epoch with nine decimals: Unix() and Nanosecond() cover every time.Time,
// where UnixNano() would stop at the years 1678 and 2262.

// numTime is the SQL expression for the numeric time of a (seconds,
// nanoseconds) parameter pair.
func numTime(sec, nsec string) string {
	return "(" + sec + "::bigint::numeric + " + nsec + "::bigint::numeric * 0.000000001)"
}

// timeNum is the SQL select list that splits a numeric time column back
// into seconds and nanoseconds.
func timeNum(col string) string {
	return "floor(" + col + ")::bigint, ((" + col + " - floor(" + col + ")) * 1000000000)::bigint"
}

// splitTime returns t as the (seconds, nanoseconds) parameters of numTime.
func splitTime(t time.Time) [2]*int64 {
	sec, nsec := t.Unix(), int64(t.Nanosecond())
	return [2]*int64{&sec, &nsec}
}

// joinTime rebuilds a time scanned from timeNum, in UTC.
func joinTime(p [2]*int64) time.Time { return time.Unix(*p[0], *p[1]).UTC() }
