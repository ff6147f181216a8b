package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const loadSQL = `SELECT cursor, version, updated_at FROM {{schema}}.checkpoints WHERE stream = $1 AND mode = $2`

// commitSQL is the whole of a commit in one statement: it share-locks the
// stream's lease row (so no Acquire, Renew or Release can change the fence
// until the transaction ends), decides the fence, and only then runs the
// compare-and-swap, as an UPDATE on the expected version or, for version 0,
// an INSERT that loses to any existing row. Parameters: stream, mode,
// cursor, expect, lease token, lease owner, now.
const commitSQL = `
WITH l AS (
	SELECT lease_owner, lease_token, released FROM {{schema}}.streams WHERE stream = $1::text FOR SHARE
), fence AS (
	SELECT CASE
		WHEN $5::bigint > 0 THEN CASE WHEN EXISTS (
			SELECT FROM l WHERE lease_token = $5::bigint AND lease_owner = $6::text AND NOT released) THEN 'ok' ELSE 'lost' END
		WHEN EXISTS (SELECT FROM l WHERE NOT released) THEN 'held'
		ELSE 'ok' END AS verdict
), upd AS (
	UPDATE {{schema}}.checkpoints SET cursor = $3::bytea, version = version + 1, updated_at = $7::timestamptz
	WHERE stream = $1::text AND mode = $2::smallint AND version = $4::bigint AND $4::bigint > 0
		AND (SELECT verdict FROM fence) = 'ok'
	RETURNING version
), ins AS (
	INSERT INTO {{schema}}.checkpoints (stream, mode, cursor, version, updated_at)
	SELECT $1::text, $2::smallint, $3::bytea, 1, $7::timestamptz
	WHERE $4::bigint = 0 AND (SELECT verdict FROM fence) = 'ok'
	ON CONFLICT (stream, mode) DO NOTHING
	RETURNING version
)
SELECT (SELECT verdict FROM fence), coalesce((SELECT version FROM upd), (SELECT version FROM ins), 0),
	(SELECT lease_owner FROM l), (SELECT lease_token FROM l), (SELECT released FROM l)`

// Load implements [checkpoint.Checkpoints.Load].
func (s *Store) Load(ctx context.Context, key checkpoint.Key) (checkpoint.Checkpoint, error) {
	if err := enter(ctx, checkKey(key)); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	cp := checkpoint.Checkpoint{Key: key}
	err := s.pool.QueryRow(ctx, s.sql.load, key.Stream, int16(key.Mode)).Scan(&cp.Cursor, &cp.Version, &cp.UpdatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return checkpoint.Checkpoint{Key: key}, nil
	case err != nil:
		return checkpoint.Checkpoint{}, s.fail("Load "+key.String(), err)
	}
	return cp, nil
}

// Commit implements [checkpoint.Checkpoints.Commit] in one statement: the
// fence and the compare-and-swap are decided together, under a share lock
// on the stream's lease row.
func (s *Store) Commit(ctx context.Context, key checkpoint.Key, cursor []byte, expect int64, lease checkpoint.Lease) (checkpoint.Checkpoint, error) {
	if err := enter(ctx, checkCommit(key, expect, lease)); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	return s.commit(ctx, s.pool, "Commit", key, cursor, expect, lease)
}

// CommitTx commits cursor as key's checkpoint inside tx, the host's own
// transaction, with exactly the contract of [Store.Commit]: the same
// validation, fence and compare-and-swap, in the same order. The host
// writes its records in tx too, so that they and the checkpoint become
// durable together when the host commits tx, or not at all: exactly once,
// with no replay after a crash.
//
// The checkpoint is not durable, and the returned Checkpoint not real,
// until tx commits. On any error the host must roll tx back: a lost
// compare-and-swap or a lost lease leaves tx usable but its records must
// not land without the checkpoint. Until tx ends it holds a share lock on
// the stream's lease row (Acquire, Renew and Release of the stream wait)
// and the checkpoint row lock (other commits of key wait, then fail with
// [checkpoint.ErrConflict]); keep such transactions short. Under the
// REPEATABLE READ or SERIALIZABLE isolation levels a concurrent commit may
// surface as a serialization failure, returned wrapped in ErrConflict.
//
// tx must be a transaction on the store's database; its schema need not be
// the search path.
func (s *Store) CommitTx(ctx context.Context, tx pgx.Tx, key checkpoint.Key, cursor []byte, expect int64, lease checkpoint.Lease) (checkpoint.Checkpoint, error) {
	if err := enter(ctx, checkCommit(key, expect, lease)); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if tx == nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("%w: CommitTx needs a transaction (got nil)", checkpoint.ErrInvalid)
	}
	return s.commit(ctx, tx, "CommitTx", key, cursor, expect, lease)
}

// commitWith runs one exactly-once step in a transaction of its own (a
// TxSink's Commit): it commits cursor as key's checkpoint as
// [Store.CommitTx] does, then calls write to store the records the cursor
// stands after, then commits. If the fence or the compare-and-swap fails,
// write is not called; if write fails, the transaction is rolled back and
// the checkpoint is unchanged. Either everything lands or nothing does.
//
// write must do all its work in tx and must not commit or roll it back.
// An error from write is returned wrapped. As with any remote commit, an
// I/O error while committing leaves the outcome unknown: Load to find out.
func (s *Store) commitWith(ctx context.Context, key checkpoint.Key, cursor []byte, expect int64, lease checkpoint.Lease,
	write func(ctx context.Context, tx pgx.Tx) error) (checkpoint.Checkpoint, error) {
	if err := enter(ctx, checkCommit(key, expect, lease)); err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if write == nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("%w: TxSink.Commit needs a write func (got nil)", checkpoint.ErrInvalid)
	}
	op := "TxSink.Commit " + key.String()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return checkpoint.Checkpoint{}, s.failWrite(op, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	cp, err := s.commit(ctx, tx, "TxSink.Commit", key, cursor, expect, lease)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if err := write(ctx, tx); err != nil {
		return checkpoint.Checkpoint{}, fmt.Errorf("pgstore: %s: write failed, nothing committed: %w", op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return checkpoint.Checkpoint{}, s.failWrite(op+": commit", err)
	}
	return cp, nil
}

// commit runs commitSQL on q and turns its verdict into the contract's
// result.
func (s *Store) commit(ctx context.Context, q querier, op string, key checkpoint.Key, cursor []byte, expect int64, l checkpoint.Lease) (checkpoint.Checkpoint, error) {
	now := s.clock()
	stored := bytes.Clone(cursor)
	if stored == nil {
		stored = []byte{} // an empty cursor is a cursor, not NULL
	}
	var (
		verdict  string
		version  int64
		owner    *string
		token    *int64
		released *bool
	)
	err := q.QueryRow(ctx, s.sql.commit, key.Stream, int16(key.Mode), stored, expect, l.Token, l.Owner, now).
		Scan(&verdict, &version, &owner, &token, &released)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" { // serialization_failure
			return checkpoint.Checkpoint{}, fmt.Errorf("%w: %v: a concurrent commit won (%w)", checkpoint.ErrConflict, key, err)
		}
		return checkpoint.Checkpoint{}, s.failWrite(op+" "+key.String(), err)
	}
	row := leaseRow{found: token != nil}
	if row.found {
		row.owner, row.token, row.released = *owner, *token, *released
	}
	switch {
	case verdict == "lost":
		return checkpoint.Checkpoint{}, row.lost(l)
	case verdict == "held":
		return checkpoint.Checkpoint{}, fmt.Errorf("%w: unfenced commit to stream %q, leased by %q (token %d)",
			checkpoint.ErrLeaseHeld, key.Stream, row.owner, row.token)
	case version == 0:
		return checkpoint.Checkpoint{}, fmt.Errorf("%w: %v is not at version %d", checkpoint.ErrConflict, key, expect)
	}
	return checkpoint.Checkpoint{Key: key, Cursor: stored, Version: version, UpdatedAt: now}, nil
}

// leaseRow is a stream's lease as stored; found is false for a stream that
// was never leased.
type leaseRow struct {
	found    bool
	owner    string
	token    int64
	expires  time.Time
	released bool
}

// lost explains, as an error wrapping checkpoint.ErrLeaseLost, why l is not
// the stream's current grant r.
func (r leaseRow) lost(l checkpoint.Lease) error {
	switch {
	case !r.found || l.Token > r.token:
		return fmt.Errorf("%w: stream %q: token %d was never granted", checkpoint.ErrLeaseLost, l.Stream, l.Token)
	case l.Token < r.token:
		return fmt.Errorf("%w: stream %q: token %d was superseded by token %d (owner %q)",
			checkpoint.ErrLeaseLost, l.Stream, l.Token, r.token, r.owner)
	case l.Owner != r.owner:
		return fmt.Errorf("%w: stream %q: token %d belongs to %q, not %q",
			checkpoint.ErrLeaseLost, l.Stream, l.Token, r.owner, l.Owner)
	default:
		return fmt.Errorf("%w: stream %q: token %d was released", checkpoint.ErrLeaseLost, l.Stream, l.Token)
	}
}
