package schedule_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// tSlowDB is a Sink over a database that has stopped answering: each
// write gives up after its own 5 s statement timeout, or (cancelled) fails
// with the error a closed pool returns.
type tSlowDB struct{ err error }

func (d tSlowDB) Write(ctx context.Context, _ slice.Page[int64]) error {
	if d.err == context.DeadlineExceeded {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		<-ctx.Done()
		return fmt.Errorf("insert contacts: %w", ctx.Err())
	}
	return fmt.Errorf("insert contacts: %w", d.err)
}

func tSinkDown(t *testing.T, err error) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		src := &pager{delay: 10 * time.Millisecond}
		if e := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "saas/contacts", Provider: "saas",
			Backfill: src, Sink: tSlowDB{err}}); e != nil {
			t.Fatal(e)
		}
		runFor(t, s, 2*time.Minute)
		jobs, _ := s.Store().List(t.Context(), schedule.Query{})
		j := jobs[0]
		t.Logf("2 minutes of a sink failing with %v: %d requests to the provider; job %s, runs %d, failures %d, streak %d, last error %q",
			err, src.calls.Load(), j.State, j.Stats.Runs, j.Stats.Failures, j.Stats.Streak, j.Stats.LastError)
		if j.Stats.Failures == 0 {
			t.Errorf("a sink that failed every write for 2 minutes: %d runs, none counted a failure, no error kept", j.Stats.Runs)
		}
	})
}

// A Sink's own timeout read as the run's planned hand-off (requeued in
// 1 s, no failure, no reason kept), its own cancellation as an interrupt
// (due again at once): run after run, for good (found by a review). Both
// are failures now, counted, kept and backed off.
func TestASinksOwnTimeoutIsAFailure(t *testing.T)      { tSinkDown(t, context.DeadlineExceeded) }
func TestASinksOwnCancellationIsAFailure(t *testing.T) { tSinkDown(t, context.Canceled) }
