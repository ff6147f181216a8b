package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5"
)

var _ budget.PauseStore = (*Store)(nil)

// The pause statements. Parameters: provider (and until).
const (
	loadPauseSQL = `SELECT until FROM {{schema}}.pauses WHERE provider = $1`
	savePauseSQL = `
INSERT INTO {{schema}}.pauses AS p (provider, until) VALUES ($1, $2)
ON CONFLICT (provider) DO UPDATE SET until = GREATEST(p.until, excluded.until)`
	dropPausesSQL = `DELETE FROM {{schema}}.pauses WHERE until < $1`
)

// LoadPause returns the end of the pause saved for provider, or the zero
// Time when none is saved or it has ended. It implements
// budget.PauseStore, so a provider created by any process, at any time,
// honours a pause another process was given (a ban, a Retry-After) and can
// end a call at once with the time to resume, rather than wait in the
// shared pacer. It fails with an error wrapping [checkpoint.ErrInvalid]
// for a key that is not a valid name ([checkpoint.CheckName]).
func (s *Store) LoadPause(ctx context.Context, provider string) (time.Time, error) {
	if err := enter(ctx, checkpoint.CheckName("provider", provider)); err != nil {
		return time.Time{}, err
	}
	var until time.Time
	err := s.pool.QueryRow(ctx, s.sql.loadPause, provider).Scan(&until)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, s.fail("LoadPause", err)
	case !until.After(s.clock()):
		return time.Time{}, nil
	}
	return until, nil
}

// SavePause records that provider must not be called before until. It
// never shortens a saved pause and is idempotent; pauses that have ended
// are dropped on the way. It implements budget.PauseStore.
func (s *Store) SavePause(ctx context.Context, provider string, until time.Time) error {
	if err := enter(ctx, checkpoint.CheckName("provider", provider)); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.dropPauses, s.clock()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.sql.savePause, provider, until)
		return err
	})
	if err != nil {
		return s.failWrite("SavePause", err)
	}
	return nil
}
