package schedule_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/schedule"
)

// The control calls (pause, resume, run now, delete; pause a provider)
// against a running scheduler, in synctest bubbles.

// TestRunPauseAndResumeJob: pausing a running job interrupts its run and
// keeps it from running; resuming runs it again at once.
func TestRunPauseAndResumeJob(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var cause error
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			err := sleepCtx(ctx, time.Hour)
			if err != nil {
				cause = err
			}
			return schedule.Result{}, err
		})
		s, _ := newSched(t, schedule.Config{}, rec)
		j := upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
		stop := start(t, s)
		defer stop()
		time.Sleep(time.Second)
		if _, err := s.SetPaused(t.Context(), j.ID, true); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !errors.Is(cause, schedule.ErrInterrupted) {
			t.Fatalf("runner's context cause %v after Pause, want ErrInterrupted", cause)
		}
		if got := get(t, s, j.ID); got.State != schedule.StatePaused || got.Lease.Owner != "" {
			t.Fatalf("after Pause and the run's end: state %s, lease %+v; want paused, unleased", got.State, got.Lease)
		}
		time.Sleep(10 * time.Minute)
		if n := len(rec.startsOf("s")); n != 1 {
			t.Fatalf("%d runs while paused, want just the interrupted one", n)
		}
		resumed := time.Now()
		if _, err := s.SetPaused(t.Context(), j.ID, false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if starts := rec.startsOf("s"); len(starts) != 2 || !starts[1].Equal(resumed) {
			t.Fatalf("starts %v, want a second run at the resume (%v)", starts, resumed)
		}
	})
}

// TestRunSetProviderPaused: pausing a provider interrupts its running jobs and
// starts none of them until it resumes; other providers carry on.
func TestRunSetProviderPaused(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			return schedule.Result{}, sleepCtx(ctx, 30*time.Second)
		})
		s, _ := newSched(t, schedule.Config{}, rec)
		begin := time.Now()
		for _, st := range []string{"p1", "p2"} {
			upsert(t, s, begin, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: st, Interval: time.Minute})
		}
		upsert(t, s, begin, schedule.Spec{Provider: "q", Kind: schedule.KindIncremental, Stream: "q1", Interval: time.Minute})
		stop := start(t, s)
		defer stop()
		time.Sleep(5 * time.Second)
		s.SetProviderPaused("p", true)
		if !slices.Contains(s.PausedProviders(), "p") {
			t.Fatal("p is not in PausedProviders after SetProviderPaused(p, true)")
		}
		time.Sleep(10 * time.Minute)
		for _, st := range []string{"p1", "p2"} {
			if n := len(rec.startsOf(st)); n != 1 {
				t.Fatalf("%s started %d times while its provider was paused, want only the first run", st, n)
			}
		}
		if n := len(rec.startsOf("q1")); n < 9 {
			t.Fatalf("q1 ran %d times in 10 minutes while another provider was paused, want ≥ 9", n)
		}
		resumed := time.Now()
		s.SetProviderPaused("p", false)
		time.Sleep(time.Second)
		for _, st := range []string{"p1", "p2"} {
			if starts := rec.startsOf(st); len(starts) != 2 || !starts[1].Equal(resumed) {
				t.Fatalf("%s starts %v, want a second run at the resume", st, starts)
			}
		}
	})
}

// TestRunDeleteRunningJob: deleting a running job interrupts its run and
// discards the outcome.
func TestRunDeleteRunningJob(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var cause error
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			cause = sleepCtx(ctx, time.Hour)
			return schedule.Result{}, cause
		})
		s, store := newSched(t, schedule.Config{}, rec)
		j := upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
		stop := start(t, s)
		defer stop()
		time.Sleep(time.Second)
		if err := s.Delete(t.Context(), j.ID); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !errors.Is(cause, schedule.ErrInterrupted) {
			t.Fatalf("runner's cause %v, want ErrInterrupted", cause)
		}
		if count(store) != 0 {
			t.Fatalf("%d jobs stored after Delete, want 0", count(store))
		}
	})
}

// TestRunNowWhileRunningConflicts: RunNow is refused while the job runs
// and runs it at once otherwise.
func TestRunNowWhileRunningConflicts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			return schedule.Result{}, sleepCtx(ctx, 10*time.Second)
		})
		s, _ := newSched(t, schedule.Config{}, rec)
		j := upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s", Interval: time.Hour})
		stop := start(t, s)
		defer stop()
		time.Sleep(time.Second)
		if _, err := s.RunNow(t.Context(), j.ID); !errors.Is(err, schedule.ErrRunning) {
			t.Fatalf("RunNow on a running job: %v, want ErrRunning", err)
		}
		time.Sleep(time.Minute)
		now := time.Now()
		if _, err := s.RunNow(t.Context(), j.ID); err != nil {
			t.Fatalf("RunNow: %v", err)
		}
		time.Sleep(time.Second)
		if starts := rec.startsOf("s"); len(starts) != 2 || !starts[1].Equal(now) {
			t.Fatalf("starts %v, want a second run at RunNow (%v), long before its hourly cycle", starts, now)
		}
	})
}

// TestRunNowOnAnUnrenewedLeaseAgreesWithClaim: the memory store knows no
// session, so its dead holder is one that stopped renewing (a scheduler
// whose runs hang after its Run was told to stop, or whose release failed):
// its lease ends at Until and not before. Each second up to Until, RunNow
// answers ErrRunning and a claim takes nothing; from Until on RunNow
// queues the job, and the claim then takes the lease over from
// the dead holder: the two agree, as they do on pgstore's dead sessions.
func TestRunNowOnAnUnrenewedLeaseAgreesWithClaim(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, store := newSched(t, schedule.Config{}, nil)
		j := upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s", Interval: time.Hour})
		ctx := t.Context()
		if got, err := store.Claim(ctx, time.Now(), "dead", time.Minute, 1, schedule.ClaimFilter{}); err != nil || len(got) != 1 {
			t.Fatalf("the holder's claim: %v, %v; want job %d", got, err, j.ID)
		}
		until := time.Now().Add(time.Minute)
		for step := 0; time.Now().Before(until); step++ {
			if _, err := s.RunNow(ctx, j.ID); !errors.Is(err, schedule.ErrRunning) {
				t.Fatalf("step %d (%v before the lease ends): RunNow %v, want ErrRunning", step, time.Until(until), err)
			}
			if got, err := store.Claim(ctx, time.Now(), "early", time.Minute, 1, schedule.ClaimFilter{}); err != nil || len(got) != 0 {
				t.Fatalf("step %d (%v before the lease ends): claim took %+v, %v; want nothing", step, time.Until(until), got, err)
			}
			time.Sleep(time.Second)
		}
		got, err := s.RunNow(ctx, j.ID)
		if err != nil || got.State != schedule.StateQueued {
			t.Fatalf("RunNow when the unrenewed lease ends: state %s, %v; want queued", got.State, err)
		}
		taken, err := store.Claim(ctx, time.Now(), "rescuer", time.Minute, 1, schedule.ClaimFilter{})
		if err != nil || len(taken) != 1 || taken[0].Lease.TakenFrom != "dead" {
			t.Fatalf("claim after RunNow: %+v, %v; want the job taken over from the dead holder", taken, err)
		}
	})
}
