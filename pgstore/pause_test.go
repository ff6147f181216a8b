package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/forage-go/forage/budget"
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
