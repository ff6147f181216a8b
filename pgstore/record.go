package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5"
)

var _ budget.RecordStore = (*Store)(nil)

// The record statements. Parameters: key (and the record's fields in
// column order). A save merges as budget.RecordStore says: paused_until
// keeps the later end and the reason saved with it (for an equal end, the
// new reason); status and why keep the saved ones when the new status is
// empty. The SET expressions read the row as it was.
const (
	loadRecordSQL = `
SELECT status, why, rate, ceiling, confirmed, paused_until, pause_reason, requests, ok, throttled, updated, refusals, spent
FROM {{schema}}.provider_records WHERE key = $1`
	// listRecordsSQL orders by byte (COLLATE "C"), as Go compares keys,
	// whatever the database's collation. Parameters: after, limit.
	listRecordsSQL = `
SELECT key, status, why, rate, ceiling, confirmed, paused_until, pause_reason, requests, ok, throttled, updated, refusals, spent
FROM {{schema}}.provider_records WHERE key COLLATE "C" > $1 ORDER BY key COLLATE "C" LIMIT $2`
	saveRecordSQL = `
INSERT INTO {{schema}}.provider_records AS r
	(key, status, why, rate, ceiling, confirmed, paused_until, pause_reason, requests, ok, throttled, updated, refusals, spent)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (key) DO UPDATE SET
	status       = CASE WHEN excluded.status <> '' THEN excluded.status ELSE r.status END,
	why          = CASE WHEN excluded.status <> '' THEN excluded.why ELSE r.why END,
	rate         = excluded.rate,
	ceiling      = excluded.ceiling,
	confirmed    = excluded.confirmed,
	paused_until = GREATEST(r.paused_until, excluded.paused_until),
	pause_reason = CASE WHEN excluded.paused_until >= r.paused_until THEN excluded.pause_reason ELSE r.pause_reason END,
	requests     = excluded.requests,
	ok           = excluded.ok,
	throttled    = excluded.throttled,
	updated      = excluded.updated,
	refusals     = excluded.refusals,
	spent        = excluded.spent`
)

// LoadRecord returns the record saved for key and true, or the zero record
// and false when none is saved. It implements budget.RecordStore, so a
// provider created by any process, at any time, starts at the rate the
// collectors learned and honours a pause another process was given (a
// ban, a Retry-After), ending a call at once with the time to resume
// rather than waiting for it. It fails with an error wrapping
// [checkpoint.ErrInvalid] for a key that is not a valid name
// ([checkpoint.CheckName]). A spent column that is not an object of times
// (a hand edit) reads as none.
func (s *Store) LoadRecord(ctx context.Context, key string) (forage.ProviderRecord, bool, error) {
	if err := enter(ctx, checkpoint.CheckName("provider key", key)); err != nil {
		return forage.ProviderRecord{}, false, err
	}
	r, err := scanRecord(s.pool.QueryRow(ctx, s.sql.loadRecord, key), nil)
	r.Key = key
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return forage.ProviderRecord{}, false, nil
	case err != nil:
		return forage.ProviderRecord{}, false, s.fail("LoadRecord", err)
	}
	return r, true, nil
}

// ListRecords returns the saved records whose keys come after after in
// byte order, in that order, at most limit of them, in one statement: each
// as LoadRecord returns it. It implements budget.RecordLister, so an admin
// process lists every provider the collectors share. It fails with an
// error wrapping [checkpoint.ErrInvalid] for a limit < 1.
func (s *Store) ListRecords(ctx context.Context, after string, limit int) ([]forage.ProviderRecord, error) {
	var argErr error
	if limit < 1 {
		argErr = fmt.Errorf("pgstore: %w: ListRecords limit must be >= 1, got %d", checkpoint.ErrInvalid, limit)
	}
	if err := enter(ctx, argErr); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.sql.listRecords, after, limit)
	if err != nil {
		return nil, s.fail("ListRecords", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (forage.ProviderRecord, error) {
		var key string
		r, err := scanRecord(row, &key)
		r.Key = key
		return r, err
	})
	if err != nil {
		return nil, s.fail("ListRecords", err)
	}
	return out, nil
}

// scanRecord reads a record's columns from row in loadRecordSQL's order,
// after the key's into key when it is not nil (listRecordsSQL's); the
// record's Key is left to the caller. A spent column that is not an object
// of times (a hand edit) reads as none, rather than no provider built at
// all; the next save replaces it.
func scanRecord(row pgx.Row, key *string) (forage.ProviderRecord, error) {
	var r forage.ProviderRecord
	var spent []byte
	dest := []any{&r.Status, &r.Why, &r.Rate, &r.Ceiling, &r.Confirmed,
		&r.PausedUntil, &r.PauseReason, &r.Requests, &r.OK, &r.Throttled, &r.Updated, &r.Refusals, &spent}
	if key != nil {
		dest = append([]any{key}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return forage.ProviderRecord{}, err
	}
	if json.Unmarshal(spent, &r.Spent) != nil {
		r.Spent = nil
	}
	return r, nil
}

// SaveRecord upserts r under r.Key in one statement, as budget.RecordStore
// says: every field is r's, except that PausedUntil keeps the later of the
// saved and the new end (with the reason saved with it; for an equal end,
// r's), and that Status and Why keep the saved ones when r.Status is "".
// So processes saving at once, in any order, never shorten a pause nor undo
// an operator's status. Times are kept to the microsecond. It is
// idempotent. A key, or a non-empty Status, Why or PauseReason, that is
// not a valid name ([checkpoint.CheckName]), or a Rate or Ceiling that is
// negative, NaN or infinite, fails with an error wrapping
// [checkpoint.ErrInvalid].
func (s *Store) SaveRecord(ctx context.Context, r forage.ProviderRecord) error {
	if err := enter(ctx, checkRecord(r)); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, s.sql.saveRecord, r.Key, r.Status, r.Why, r.Rate, r.Ceiling, r.Confirmed,
		r.PausedUntil, string(r.PauseReason), r.Requests, r.OK, r.Throttled, r.Updated, refusals(r.Refusals), spent(r.Spent))
	if err != nil {
		return s.failWrite("SaveRecord", err)
	}
	return nil
}

// refusals returns ts as the refusals column holds them: never NULL.
func refusals(ts []time.Time) []time.Time {
	if ts == nil {
		return []time.Time{}
	}
	return ts
}

// spent returns m as the spent column holds it: an object, never null.
func spent(m map[string]time.Time) map[string]time.Time {
	if m == nil {
		return map[string]time.Time{}
	}
	return m
}

// checkRecord validates SaveRecord's record by the checkpoint stores' rule.
func checkRecord(r forage.ProviderRecord) error {
	if err := checkpoint.CheckName("provider key", r.Key); err != nil {
		return err
	}
	for _, f := range []struct{ what, v string }{{"Status", r.Status}, {"Why", r.Why}, {"PauseReason", string(r.PauseReason)}} {
		if f.v != "" {
			if err := checkpoint.CheckName(f.what, f.v); err != nil {
				return err
			}
		}
	}
	for _, f := range []struct {
		what string
		v    float64
	}{{"Rate", r.Rate}, {"Ceiling", r.Ceiling}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%w: %s must be >= 0 and finite (got %v)", checkpoint.ErrInvalid, f.what, f.v)
		}
	}
	return nil
}
