package schedule_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// TestBackfilledSaysWhatHoldsADueBackfill: a backfill that is due and has
// not started, its provider's breaker open, is described by Backfilled's
// error as due since its time, held by the breaker. It said "failed until"
// that time, long past, and nothing of the breaker.
func TestBackfilledSaysWhatHoldsADueBackfill(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{Defaults: budget.Config{Breaker: breaker.Config{MinRequests: 2}}})
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "items", Provider: "p", Backfill: &pager{end: 100}, Sink: dropAll}); err != nil {
			t.Fatal(err)
		}
		p, _ := s.Budget().Get("p")
		for range 5 {
			_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome { return forage.Outcome{Status: 503} })
		}
		if b := p.Snapshot().Breaker; b != breaker.StateOpen.String() {
			t.Fatalf("breaker %s after 503s, want open", b)
		}
		time.Sleep(time.Second) // the job is due since a second ago; no scheduler runs it
		wait, stop := context.WithTimeout(t.Context(), 2*time.Second)
		defer stop()
		err := s.Backfilled(wait)
		if err == nil || !strings.Contains(err.Error(), "items") || !strings.Contains(err.Error(), "due since") ||
			!strings.Contains(err.Error(), "held while the provider's breaker is open") {
			t.Fatalf("Backfilled = %v; want it to say the backfill is due, held by the open breaker", err)
		}
	})
}
