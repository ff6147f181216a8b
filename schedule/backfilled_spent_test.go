package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// Streams that share a host's envelope (Stream.Run) with a request cap:
// once it was spent, the scheduler ran each stream not done again every
// Requeue, each run leasing the stream and writing and resolving a gap
// record (941 runs in 14 s for 126 streams), and Backfilled waited for its
// ctx with no word of the cap. Now a spent envelope runs nothing more, and
// Backfilled returns at once an error that wraps the cap's reason.
func TestAStreamsSpentRunIsNotRunAgainAndBackfilledSaysSo(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		run, err := budget.NewRun(budget.Envelope{MaxRequests: 30})
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int64
		for i := range 20 {
			err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{
				Name: fmt.Sprintf("items-%d", i), Provider: "p", Backfill: tokens{n: 500, page: 50}, Sink: &kept{}, Run: run,
				OnRun: func(schedule.Job, slice.Report, error) { runs.Add(1) },
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		stop := start(t, s)
		defer stop()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		began := time.Now()
		err = s.Backfilled(ctx)
		took := time.Since(began)
		if r, _ := budget.ReasonOf(err); r != forage.ReasonRequestCap || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Backfilled = %v after %v; want the envelope's request cap, not the deadline", err, took)
		}
		if !strings.Contains(err.Error(), "request_cap") {
			t.Errorf("Backfilled = %q: want the cap named", err)
		}
		if took > time.Minute {
			t.Errorf("Backfilled returned after %v; want within a minute of the cap", took)
		}
		n := runs.Load()
		time.Sleep(5 * time.Minute)
		if more := runs.Load() - n; more > 0 {
			t.Errorf("%d stream runs in the 5 minutes after the envelope was spent; want none", more)
		}
	})
}
