package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5"
)

// TestPauseSurvivesRestart: with PostgreSQL a provider's pause lives in
// the shared pacer's row, so it needs no budget.PauseStore: process A is
// told "429, Retry-After: 120"; process B, started after it on the same
// schema (a new store, registry and pacer), sends nothing before the pause
// ends. Its call with two seconds to live stops at once, no attempt made
// (issue 12 item 5: the file store had to learn this).
func TestPauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	open := func() *budget.Registry {
		s, err := pgstore.New(testPool(t), pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		reg, err := budget.NewRegistry(budget.RegistryConfig{NewPacer: func(key string) (budget.Pacer, error) {
			return s.NewPacer(key, pgstore.PacerConfig{})
		}})
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	a := open()
	_ = provider(a, "api.example.com").Do(context.Background(), nil, func(context.Context) forage.Outcome {
		return forage.Outcome{Status: 429, RetryAfter: 120 * time.Second}
	})

	b := open()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start, calls := time.Now(), 0
	err := provider(b, "api.example.com").Do(ctx, nil, func(context.Context) forage.Outcome {
		calls++
		return forage.Outcome{Status: 200}
	})
	if err == nil || calls != 0 {
		t.Fatalf("process B: Do = %v with %d attempts, want a stop and none during the pause", err, calls)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("process B waited %v to learn of a pause that outlasts its deadline", waited)
	}
}

// TestPauseStore: the PostgreSQL PauseStore keeps a pause and its reason
// across stores (processes), never shortens it (nor changes its reason by
// a shorter save), forgets it once ended, and refuses an invalid key or
// reason; a provider on a new registry with it as its PauseStore ends a
// call at once, banned (the reason saved, not "throttled"), with the time
// to resume (rather than waiting in the shared pacer past MaxWait); a row
// saved before migration 007 reads with no reason, as throttled.
func TestPauseStore(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	ctx := context.Background()
	open := func() *pgstore.Store {
		s, err := pgstore.New(testPool(t), pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	var _ budget.PauseStore = a
	until := time.Now().Add(2 * time.Minute).Truncate(time.Microsecond)
	if err := a.SavePause(ctx, "api.example.com", until, "throttled"); err != nil {
		t.Fatal(err)
	}
	if err := a.SavePause(ctx, "api.example.com", until, "banned"); err != nil {
		t.Fatal(err) // an equal end: the new reason
	}
	if err := a.SavePause(ctx, "api.example.com", until.Add(-time.Minute), "throttled"); err != nil {
		t.Fatal(err)
	}
	if got, why, err := b.LoadPause(ctx, "api.example.com"); err != nil || !got.Equal(until) || why != "banned" {
		t.Fatalf("LoadPause = %v, %q, %v; want %v, banned (a shorter save changes neither)", got, why, err, until)
	}
	if err := a.SavePause(ctx, "ended.example.com", time.Now().Add(-time.Second), "banned"); err != nil {
		t.Fatal(err)
	}
	if got, why, err := b.LoadPause(ctx, "ended.example.com"); err != nil || !got.IsZero() || why != "" {
		t.Fatalf("LoadPause of an ended pause = %v, %q, %v; want zero", got, why, err)
	}
	if _, _, err := b.LoadPause(ctx, "bad\xff"); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("LoadPause of an invalid key: %v, want ErrInvalid", err)
	}
	if err := a.SavePause(ctx, "p", until, "bad\nreason"); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("SavePause with an invalid reason: %v, want ErrInvalid", err)
	}
	// A row as migration 006 wrote it: no reason column given.
	old := pgx.Identifier{schema, "pauses"}.Sanitize()
	if _, err := testPool(t).Exec(ctx, "INSERT INTO "+old+" (provider, until) VALUES ($1, $2)", "old.example.com", until); err != nil {
		t.Fatal(err)
	}
	if got, why, err := b.LoadPause(ctx, "old.example.com"); err != nil || !got.Equal(until) || why != "" {
		t.Fatalf("LoadPause of a row saved before reasons = %v, %q, %v; want %v, no reason", got, why, err, until)
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{Pauses: b, NewPacer: func(key string) (budget.Pacer, error) {
		return b.NewPacer(key, pgstore.PacerConfig{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	start, calls := time.Now(), 0
	for key, want := range map[string]forage.Reason{"api.example.com": forage.ReasonBanned, "old.example.com": forage.ReasonThrottled} {
		err = provider(reg, key).Do(ctx, nil, func(context.Context) forage.Outcome {
			calls++
			return forage.Outcome{Status: 200}
		})
		var be *budget.Error
		if !errors.As(err, &be) || be.Reason != want || !be.Until.Equal(until) || calls != 0 {
			t.Fatalf("%s: Do = %v with %d attempts; want %s until %v, none sent", key, err, calls, want, until)
		}
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("Do waited %v for a pause longer than MaxWait", waited)
	}
}
