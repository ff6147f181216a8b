package pgstore

import (
	"context"
	"fmt"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
	"github.com/jackc/pgx/v5"
)

// txSink is the [slice.TxSink] [NewTxSink] returns.
type txSink[R any] struct {
	store *Store
	write func(ctx context.Context, tx pgx.Tx, p slice.Page[R]) error
}

var _ slice.TxSink[struct{}] = (*txSink[struct{}])(nil)

// NewTxSink returns a [slice.TxSink] on PostgreSQL that makes pages durable
// in s's database with write, which stores p's records in tx: typically one
// upsert on the records' natural key (INSERT … ON CONFLICT), so that a fill
// that writes records a stream run committed changes nothing. write must do
// all its work in tx, must not commit or roll it back, and may be called
// with a page without records (it may then do nothing). Its error rolls
// back everything, the checkpoint included, and ends the run.
//
// The sink's Commit writes a page's records with write and commits the
// cursor after them as the stream's checkpoint, in one transaction: the
// lease fence and the compare-and-swap first, as [Store.CommitTx] runs them
// (so a stale holder or a lost race never runs the write), then the write,
// then the commit. It has the errors of [Store.Commit]
// ([checkpoint.ErrInvalid], [checkpoint.ErrLeaseLost],
// [checkpoint.ErrLeaseHeld], [checkpoint.ErrConflict]); the write's error
// is returned wrapped, with nothing committed. An I/O error while
// committing leaves the outcome unknown, both or neither: the next run's
// Load tells. Its Write writes a page's records in a transaction of their
// own, with no checkpoint: the runner calls it for pages that commit none
// (fills, see slice.Runner.Fill).
//
// Set it as the runner's slice.Config.TxSink, with the same Store as
// slice.Config.Store, and a stream run is exactly once: a crash replays no
// page, a failed write leaves the checkpoint where it was, and a lost
// compare-and-swap or lease leaves no record. The sink holds no state of
// its own; it is safe for concurrent use, as far as write is.
//
// It returns an error wrapping [ErrInvalidConfig] if s or write is nil.
func NewTxSink[R any](s *Store, write func(ctx context.Context, tx pgx.Tx, p slice.Page[R]) error) (slice.TxSink[R], error) {
	switch {
	case s == nil:
		return nil, invalid.Must("NewTxSink's store", "not be nil: pass the *pgstore.Store that is the runner's Config.Store", "nil")
	case write == nil:
		return nil, invalid.Must("NewTxSink's write", "not be nil: pass a func that stores a page's records in the transaction", "nil")
	}
	return &txSink[R]{store: s, write: write}, nil
}

// Commit implements [slice.TxSink.Commit]; see [NewTxSink].
func (t *txSink[R]) Commit(ctx context.Context, key checkpoint.Key, p slice.Page[R], expect int64, lease checkpoint.Lease) (checkpoint.Checkpoint, error) {
	return t.store.commitWith(ctx, key, p.Next, expect, lease, func(ctx context.Context, tx pgx.Tx) error {
		return t.write(ctx, tx, p)
	})
}

// Write implements [slice.Sink.Write]: p's records in a transaction of
// their own. It returns once the transaction committed; on an error nothing
// of p landed, unless the error says the outcome is unknown.
func (t *txSink[R]) Write(ctx context.Context, p slice.Page[R]) error {
	if err := enter(ctx, nil); err != nil {
		return err
	}
	s := t.store
	const op = "TxSink.Write"
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.failWrite(op, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := t.write(ctx, tx, p); err != nil {
		return fmt.Errorf("pgstore: %s: write failed, nothing written: %w", op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.failWrite(op+": commit", err)
	}
	return nil
}
