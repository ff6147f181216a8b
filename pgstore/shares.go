package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5"
)

var _ budget.ShareWatcher = (*Store)(nil)

// The share statements. Parameters: key; the document and, for an update,
// the version read.
const (
	loadSharesSQL   = `SELECT doc, version FROM {{schema}}.provider_shares WHERE key = $1`
	insertSharesSQL = `INSERT INTO {{schema}}.provider_shares (key, doc, version) VALUES ($1, $2, 1) ON CONFLICT (key) DO NOTHING`
	updateSharesSQL = `UPDATE {{schema}}.provider_shares SET doc = $2, version = version + 1 WHERE key = $1 AND version = $3`
)

// shareTries bounds the compare-and-swap rounds of one UpdateShares: each
// lost round means another process renewed in between, which at one
// renewal a second per process is rare.
const shareTries = 16

// UpdateShares implements budget.ShareStore: it reads the document kept
// under key (nil when none is), calls f with it, and saves what f returns
// if no other process saved in between, and otherwise reads again and
// calls f again, up to 16 times. No transaction is held open while f runs:
// a renewal is two statements, a read and a compare-and-swap write, and
// the processes sharing a provider make about one a second each, however
// many requests they send. An error from f is returned and nothing is
// saved. A key that is not a valid name ([checkpoint.CheckName]) fails
// with an error wrapping [checkpoint.ErrInvalid], before any statement.
func (s *Store) UpdateShares(ctx context.Context, key string, f func(doc []byte) ([]byte, error)) error {
	if err := enter(ctx, checkpoint.CheckName("provider key", key)); err != nil {
		return err
	}
	for range shareTries {
		var (
			doc     []byte
			version int64
		)
		err := s.pool.QueryRow(ctx, s.sql.loadShares, key).Scan(&doc, &version)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return s.fail("UpdateShares", err)
		}
		if err == nil && version < 1 {
			// A row edited by hand: read as no row, its insert did
			// nothing, and each save was "lost to other processes".
			return s.fail("UpdateShares", fmt.Errorf("the provider_shares row of %q has version %d, which no save writes (edited by hand?): delete the row, or set its version to 1 or more", key, version))
		}
		next, err := f(bytes.Clone(doc))
		if err != nil {
			return err
		}
		var n int64
		if version == 0 {
			tag, err := s.pool.Exec(ctx, s.sql.insertShares, key, next)
			if err != nil {
				return s.fail("UpdateShares", err)
			}
			n = tag.RowsAffected()
		} else {
			tag, err := s.pool.Exec(ctx, s.sql.updateShares, key, next, version)
			if err != nil {
				return s.fail("UpdateShares", err)
			}
			n = tag.RowsAffected()
		}
		if n == 1 {
			return nil
		}
	}
	return s.fail("UpdateShares", fmt.Errorf("%d saves of %q lost to other processes in a row", shareTries, key))
}
