package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
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
	_ = a.Provider("api.example.com").Do(context.Background(), nil, func(context.Context) budget.Outcome {
		return budget.Outcome{Status: 429, RetryAfter: 120 * time.Second}
	})

	b := open()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start, calls := time.Now(), 0
	err := b.Provider("api.example.com").Do(ctx, nil, func(context.Context) budget.Outcome {
		calls++
		return budget.Outcome{Status: 200}
	})
	if err == nil || calls != 0 {
		t.Fatalf("process B: Do = %v with %d attempts, want a stop and none during the pause", err, calls)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("process B waited %v to learn of a pause that outlasts its deadline", waited)
	}
}

// TestPauseStore: the PostgreSQL PauseStore keeps a pause across stores
// (processes), never shortens it, forgets it once ended, and refuses an
// invalid key; a provider on a new registry with it as its PauseStore
// ends a call at once, throttled, with the time to resume (rather than
// waiting in the shared pacer past MaxWait).
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
	if err := a.SavePause(ctx, "api.example.com", until); err != nil {
		t.Fatal(err)
	}
	if err := a.SavePause(ctx, "api.example.com", until.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := b.LoadPause(ctx, "api.example.com"); err != nil || !got.Equal(until) {
		t.Fatalf("LoadPause = %v, %v; want %v (a shorter save never shortens it)", got, err, until)
	}
	if err := a.SavePause(ctx, "ended.example.com", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := b.LoadPause(ctx, "ended.example.com"); err != nil || !got.IsZero() {
		t.Fatalf("LoadPause of an ended pause = %v, %v; want zero", got, err)
	}
	if _, err := b.LoadPause(ctx, "bad\xff"); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("LoadPause of an invalid key: %v, want ErrInvalid", err)
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{Pauses: b, NewPacer: func(key string) (budget.Pacer, error) {
		return b.NewPacer(key, pgstore.PacerConfig{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	start, calls := time.Now(), 0
	err = reg.Provider("api.example.com").Do(ctx, nil, func(context.Context) budget.Outcome {
		calls++
		return budget.Outcome{Status: 200}
	})
	var be *budget.Error
	if !errors.As(err, &be) || be.Reason != budget.ReasonThrottled || !be.Until.Equal(until) || calls != 0 {
		t.Fatalf("Do = %v with %d attempts; want throttled until %v, none sent", err, calls, until)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("Do waited %v for a pause longer than MaxWait", waited)
	}
}
