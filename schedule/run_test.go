package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// The tests in this file run the scheduler's Run loop inside synctest
// bubbles: minutes of fake time in milliseconds, and a bubble that fails if
// any goroutine outlives Run.

// checkCadence fails unless starts begin at first and follow each other by
// interval ± 5%.
func checkCadence(t *testing.T, stream string, starts []time.Time, first time.Time, interval time.Duration, minRuns int) {
	t.Helper()
	if len(starts) < minRuns {
		t.Fatalf("%s ran %d times, want at least %d", stream, len(starts), minRuns)
	}
	if !starts[0].Equal(first) {
		t.Errorf("%s first ran at +%v, want +%v", stream, starts[0].Sub(first), time.Duration(0))
	}
	lo, hi := interval*95/100, interval*105/100
	for i := 1; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-1]); d < lo || d > hi {
			t.Errorf("%s: run %d came %v after run %d, want within [%v, %v]", stream, i, d, i-1, lo, hi)
		}
	}
}

// TestRunIncrementalCadence: incremental jobs run at their interval, each
// run within ±5% jitter of one interval after the previous one, however
// long the runs take.
func TestRunIncrementalCadence(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			return schedule.Result{}, sleepCtx(ctx, 7*time.Second) // runs take a while
		})
		s, _ := newSched(t, schedule.Config{}, rec)
		begin := time.Now()
		for _, p := range []string{"a", "b", "c"} {
			upsert(t, s, begin, schedule.Spec{Provider: p, Kind: schedule.KindIncremental, Stream: p + "/1m", Interval: time.Minute})
		}
		runFor(t, s, 30*time.Minute)
		for _, p := range []string{"a", "b", "c"} {
			checkCadence(t, p+"/1m", rec.startsOf(p+"/1m"), begin, time.Minute, 29)
		}
	})
}

// TestRunGapFillPreemptsQueuedIncremental: with one slot, a gap fill added
// while incremental jobs queue runs next, ahead of all of them.
func TestRunGapFillPreemptsQueuedIncremental(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			return schedule.Result{Done: true}, sleepCtx(ctx, 10*time.Second)
		})
		s, _ := newSched(t, schedule.Config{MaxRunning: 1}, rec)
		begin := time.Now()
		for i := range 4 {
			upsert(t, s, begin, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: fmt.Sprint("inc", i), Interval: time.Hour})
		}
		stop := start(t, s)
		time.Sleep(time.Second) // inc0 runs; inc1..3 queue
		upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindGapFill, Stream: "gap"})
		time.Sleep(time.Minute)
		stop()
		want := []string{"inc0", "gap", "inc1", "inc2", "inc3"}
		if got := rec.orderSoFar(); !slices.Equal(got, want) {
			t.Fatalf("run order %v, want %v", got, want)
		}
	})
}

// TestRunWaitsForRateLimitReset: a job that met a 429 resumes exactly when
// the provider's pause ends, not before; its provider's other jobs wait
// too; another provider's jobs do not.
func TestRunWaitsForRateLimitReset(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		reset := begin.Add(90 * time.Second)
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			if j.Stream == "a" && j.Stats.Runs == 0 {
				return schedule.Result{}, &budget.Error{Reason: forage.ReasonThrottled, Provider: "p", Status: 429, Until: reset}
			}
			return schedule.Result{}, nil
		})
		s, store := newSched(t, schedule.Config{}, rec)
		a := upsert(t, s, begin, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "a", Interval: time.Hour})
		upsert(t, s, begin, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "b", Interval: time.Hour, NextRun: begin.Add(30 * time.Second)})
		upsert(t, s, begin, schedule.Spec{Provider: "q", Kind: schedule.KindIncremental, Stream: "c", Interval: time.Hour, NextRun: begin.Add(30 * time.Second)})
		stop := start(t, s)
		time.Sleep(time.Second)
		synctest.Wait()
		if j, _ := store.Get(t.Context(), a.ID); j.State != schedule.StateWaitingRateLimit || !j.NextRun.Equal(reset) {
			t.Errorf("after the 429: state %s, next run +%v; want waiting_rate_limit, +90s", j.State, j.NextRun.Sub(begin))
		}
		time.Sleep(3 * time.Minute)
		stop()
		for stream, want := range map[string][]time.Duration{"a": {0, 90 * time.Second}, "b": {90 * time.Second}, "c": {30 * time.Second}} {
			var got []time.Duration
			for _, at := range rec.startsOf(stream) {
				got = append(got, at.Sub(begin))
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s started at %v, want %v", stream, got, want)
			}
		}
	})
}

// TestRunSlowProviderDoesNotDelayOthers: a provider whose every run takes
// ten minutes holds at most its MaxPerProvider slots; another provider's
// jobs keep their cadence to the instant.
func TestRunSlowProviderDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var slowNow, slowMax int
		rec := newRecorder(nil)
		rec.fn = func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			if j.Provider != "slow" {
				return schedule.Result{}, nil
			}
			rec.mu.Lock()
			slowNow++
			slowMax = max(slowMax, slowNow)
			rec.mu.Unlock()
			err := sleepCtx(ctx, 10*time.Minute)
			rec.mu.Lock()
			slowNow--
			rec.mu.Unlock()
			return schedule.Result{}, err
		}
		s, _ := newSched(t, schedule.Config{MaxRunning: 4, MaxPerProvider: 2}, rec)
		begin := time.Now()
		for i := range 6 {
			upsert(t, s, begin, schedule.Spec{Provider: "slow", Kind: schedule.KindIncremental, Stream: fmt.Sprint("slow", i), Interval: time.Minute})
		}
		for i := range 3 {
			upsert(t, s, begin, schedule.Spec{Provider: "fast", Kind: schedule.KindIncremental, Stream: fmt.Sprint("fast", i), Interval: time.Minute})
		}
		runFor(t, s, 30*time.Minute)
		for i := range 3 {
			checkCadence(t, fmt.Sprint("fast", i), rec.startsOf(fmt.Sprint("fast", i)), begin, time.Minute, 29)
		}
		if slowMax != 2 {
			t.Errorf("the slow provider ran %d jobs at once, want exactly its limit 2", slowMax)
		}
	})
}

// TestRunStopsCleanly: when Run's context ends, every runner's context is
// cancelled with cause ErrInterrupted, Run returns once they have all
// returned, and the interrupted jobs are due again at once, unleased, with
// no failure counted. The bubble proves no goroutine is left behind.
func TestRunStopsCleanly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 10)
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return schedule.Result{}, ctx.Err()
		})
		s, store := newSched(t, schedule.Config{}, rec)
		begin := time.Now()
		for _, p := range []string{"a", "b", "c"} {
			upsert(t, s, begin, schedule.Spec{Provider: p, Kind: schedule.KindBackfill, Stream: p})
		}
		runFor(t, s, 10*time.Second)
		close(causes)
		n := 0
		for c := range causes {
			n++
			if !errors.Is(c, schedule.ErrInterrupted) {
				t.Errorf("runner's context cause %v, want ErrInterrupted", c)
			}
		}
		if n != 3 {
			t.Fatalf("%d runners saw their context end, want 3", n)
		}
		jobs, _ := store.List(t.Context(), schedule.Query{})
		for _, j := range jobs {
			if j.State != schedule.StateQueued || j.Lease.Owner != "" || !j.NextRun.Equal(begin) || j.Stats.Failures != 0 || j.Stats.Runs != 1 {
				t.Errorf("job %s after shutdown: state %s, lease %+v, next +%v, stats %+v; want queued, unleased, due at once, no failure",
					j.Stream, j.State, j.Lease, j.NextRun.Sub(begin), j.Stats)
			}
		}
		if d := snapshot(t, s).Decisions; d.Interrupted != 3 || d.Failed != 0 {
			t.Errorf("decisions %+v, want 3 interrupted, 0 failed", d)
		}
	})
}

// TestRunRescuesCrashedScheduler: a job claimed by a scheduler that died
// is run by another once the lease expires, not before; a live scheduler
// renews its leases so long runs are never taken over.
func TestRunRescuesCrashedScheduler(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := schedule.NewMemoryJobStore()
		cfg := schedule.Config{LeaseTTL: 30 * time.Second}
		dead, _ := schedule.New(cfg, store, idle)
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			return schedule.Result{Done: true}, sleepCtx(ctx, 5*time.Minute) // long: outlives many leases
		})
		live, _ := schedule.New(cfg, store, rec)
		begin := time.Now()
		upsert(t, live, begin, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
		if got := claim(t, dead, begin); len(got) != 1 {
			t.Fatalf("the doomed scheduler claimed %v", streams(got))
		}
		stop := start(t, live)
		defer stop()
		time.Sleep(31 * time.Second)
		starts := rec.startsOf("s")
		if len(starts) != 1 || starts[0].Sub(begin) < 30*time.Second {
			t.Fatalf("rescued run started at %v, want once, within a poll of the lease's expiry (+30s)", starts)
		}
		// While the rescued run lasts (5 minutes, ten lease lifetimes), a
		// third scheduler keeps trying to claim it, and never can.
		thief, _ := schedule.New(cfg, store, idle)
		for range 25 {
			if got := claim(t, thief, time.Now()); len(got) != 0 {
				t.Fatalf("at +%v another scheduler claimed %v while its run was renewed", time.Since(begin), streams(got))
			}
			time.Sleep(10 * time.Second)
		}
	})
}

// TestRunTimeoutRequeues: a run cut by RunTimeout counts as a spent
// budget: re-queued, not failed.
func TestRunTimeoutRequeues(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			<-ctx.Done()
			return schedule.Result{}, ctx.Err()
		})
		s, _ := newSched(t, schedule.Config{RunTimeout: 5 * time.Second, Requeue: time.Hour}, rec)
		j := upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
		runFor(t, s, 10*time.Second)
		got := get(t, s, j.ID)
		if got.State != schedule.StateQueued || got.Stats.Failures != 0 {
			t.Fatalf("after RunTimeout: state %s, stats %+v; want queued, no failure", got.State, got.Stats)
		}
		if d := snapshot(t, s).Decisions; d.Requeued != 1 {
			t.Fatalf("decisions %+v, want 1 requeued", d)
		}
	})
}

// TestRunnerPanicIsAFailure: a panicking runner fails its job and does not
// take the scheduler down.
func TestRunnerPanicIsAFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) { panic("bad page") })
		s, _ := newSched(t, schedule.Config{}, rec)
		j := upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
		runFor(t, s, time.Second)
		if got := get(t, s, j.ID); got.State != schedule.StateFailed || got.Stats.LastError == "" {
			t.Fatalf("after a panic: state %s, last error %q; want failed with the panic", got.State, got.Stats.LastError)
		}
	})
}

func snapshot(t *testing.T, s *schedule.Scheduler) schedule.Snapshot {
	t.Helper()
	snap, err := s.SnapshotPage(t.Context(), time.Now(), "", math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
