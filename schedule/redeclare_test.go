package schedule_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// TestARedeclaredBackfillIsNotDoneByTheRunOfTheOldOne: a stream declared
// again while its backfill runs, with a Backfill that reaches further (a
// later boundary), is collected to the new end before Backfilled says it
// is done. The run under way, of the old declaration, reached the old end
// and marked the backfill done: the new declaration's range was never
// fetched, and Backfilled returned nil.
func TestARedeclaredBackfillIsNotDoneByTheRunOfTheOldOne(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		var mu sync.Mutex
		have := map[int64]bool{}
		sink := slice.SinkFunc[int64](func(_ context.Context, p slice.Page[int64]) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range p.Records {
				have[r] = true
			}
			return nil
		})
		declare := func(end int64) {
			t.Helper()
			st := schedule.Stream[int64]{Name: "items", Provider: "p", Backfill: &pager{end: end, delay: time.Second}, Sink: sink}
			if err := schedule.AddStream(t.Context(), s, st); err != nil {
				t.Fatal(err)
			}
		}
		declare(10)
		stop := start(t, s)
		defer stop()
		time.Sleep(3500 * time.Millisecond) // the backfill is under way, its old end not reached
		declare(20)
		wait, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		if err := s.Backfilled(wait); err != nil {
			t.Fatalf("Backfilled: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(have) != 20 {
			t.Fatalf("Backfilled said done with %d of the 20 records the stream's new declaration reaches", len(have))
		}
	})
}
