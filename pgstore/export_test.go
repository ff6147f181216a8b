package pgstore

import (
	"context"

	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5"
)

// CommitWith is the exactly-once step of a TxSink's Commit, for the tests
// that pin it alone: the checkpoint's fence and compare-and-swap, then
// write, in one transaction.
func (s *Store) CommitWith(ctx context.Context, key checkpoint.Key, cursor []byte, expect int64, lease checkpoint.Lease,
	write func(ctx context.Context, tx pgx.Tx) error) (checkpoint.Checkpoint, error) {
	return s.commitWith(ctx, key, cursor, expect, lease, write)
}
