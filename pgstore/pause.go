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

// The pause statements. Parameters: provider (and until, reason). A save
// keeps the later end and the reason saved with it; for an equal end the
// new reason (the SET expressions read the row as it was).
const (
	loadPauseSQL = `SELECT until, reason FROM {{schema}}.pauses WHERE provider = $1`
	savePauseSQL = `
INSERT INTO {{schema}}.pauses AS p (provider, until, reason) VALUES ($1, $2, $3)
ON CONFLICT (provider) DO UPDATE SET
	until  = GREATEST(p.until, excluded.until),
	reason = CASE WHEN excluded.until >= p.until THEN excluded.reason ELSE p.reason END`
	dropPausesSQL = `DELETE FROM {{schema}}.pauses WHERE until < $1`
)

// LoadPause returns the end of the pause saved for provider and the reason
// saved with it (a forage.Reason's wire name, "" for a pause saved before
// reasons were kept), or the zero Time and "" when none is saved or it has
// ended. It implements
// budget.PauseStore, so a provider created by any process, at any time,
// honours a pause another process was given (a ban, a Retry-After) and can
// end a call at once with the time to resume, rather than wait in the
// shared pacer. It fails with an error wrapping [checkpoint.ErrInvalid]
// for a key that is not a valid name ([checkpoint.CheckName]).
func (s *Store) LoadPause(ctx context.Context, provider string) (time.Time, string, error) {
	if err := enter(ctx, checkpoint.CheckName("provider", provider)); err != nil {
		return time.Time{}, "", err
	}
	var until time.Time
	var reason string
	err := s.pool.QueryRow(ctx, s.sql.loadPause, provider).Scan(&until, &reason)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, "", nil
	case err != nil:
		return time.Time{}, "", s.fail("LoadPause", err)
	case !until.After(s.clock()):
		return time.Time{}, "", nil
	}
	return until, reason, nil
}

// SavePause records that provider must not be called before until, for
// reason (a forage.Reason's wire name such as "banned"; "" for none). It
// never shortens a saved pause: the later end is kept with the reason
// saved with it, and for an equal end the new reason replaces the old. It
// is idempotent; pauses that have ended are dropped on the way. A provider
// or a non-empty reason that is not a valid name ([checkpoint.CheckName])
// fails with an error wrapping [checkpoint.ErrInvalid]. It implements
// budget.PauseStore.
func (s *Store) SavePause(ctx context.Context, provider string, until time.Time, reason string) error {
	err := checkpoint.CheckName("provider", provider)
	if err == nil && reason != "" {
		err = checkpoint.CheckName("reason", reason)
	}
	if err := enter(ctx, err); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.dropPauses, s.clock()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.sql.savePause, provider, until, reason)
		return err
	})
	if err != nil {
		return s.failWrite("SavePause", err)
	}
	return nil
}
