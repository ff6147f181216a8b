package schedule_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// RunUntilBackfilled is a command that collects and exits: it returns nil
// once every stream has collected up to now, everything in the sink, and
// the provider's answer when the streams are turned away for good; with
// Run returned either way.
func TestRunUntilBackfilled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		sink := &kept{}
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "items", Provider: "p", Backfill: tokens{n: 600, page: 50}, Sink: sink}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		if err := s.RunUntilBackfilled(ctx); err != nil {
			t.Fatalf("RunUntilBackfilled = %v, want nil", err)
		}
		if h := sink.holes(0, 600); len(h) > 0 {
			t.Fatalf("returned with %d of 600 items missing", len(h))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		bad := &refusing{tokens: tokens{n: 300, page: 50}}
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "items", Provider: "p", Backfill: bad, Sink: &kept{}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		err := s.RunUntilBackfilled(ctx)
		if r, _ := budget.ReasonOf(err); r != forage.ReasonPermanent || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wrong key: RunUntilBackfilled = %v; want the provider's 401", err)
		}
	})
}
