package schedule_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   schedule.Config
		field string
	}{
		{schedule.Config{MaxRunning: -1}, "MaxRunning"},
		{schedule.Config{MaxRunning: 1 << 20}, "MaxRunning"},
		{schedule.Config{MaxPerProvider: -1}, "MaxPerProvider"},
		{schedule.Config{MaxRunning: 2, MaxPerProvider: 3}, "MaxPerProvider"},
		{schedule.Config{Aging: -time.Second}, "Aging"},
		{schedule.Config{Aging: 25 * time.Hour}, "Aging"},
		{schedule.Config{Jitter: -0.1}, "Jitter"},
		{schedule.Config{Jitter: 0.6}, "Jitter"},
		{schedule.Config{Jitter: math.NaN()}, "Jitter"},
		{schedule.Config{Jitter: -2}, "Jitter"},
		{schedule.Config{Aging: -2}, "Aging"},
		{schedule.Config{Requeue: -1}, "Requeue"},
		{schedule.Config{PressureWait: -1}, "PressureWait"},
		{schedule.Config{Backoff: -1}, "Backoff"},
		{schedule.Config{MaxBackoff: -1}, "MaxBackoff"},
		{schedule.Config{Backoff: time.Hour, MaxBackoff: time.Minute}, "MaxBackoff"},
		{schedule.Config{LeaseTTL: -1}, "LeaseTTL"},
		{schedule.Config{Poll: -1}, "Poll"},
		{schedule.Config{Poll: time.Minute, LeaseTTL: time.Minute}, "LeaseTTL"},
		{schedule.Config{RunTimeout: -1}, "RunTimeout"},
	} {
		_, err := schedule.New(tc.cfg, schedule.NewMemoryJobStore(), idle)
		if !errors.Is(err, schedule.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config."+tc.field+" ") || !strings.HasPrefix(err.Error(), "schedule: ") {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig naming Config.%s", tc.cfg, err, tc.field)
		}
	}
	for _, cfg := range []schedule.Config{
		{}, {MaxRunning: 1}, {MaxRunning: 3, MaxPerProvider: 3}, {Jitter: 0.5}, {Aging: schedule.MaxAging},
		{Poll: time.Minute}, {LeaseTTL: time.Second},
	} {
		if _, err := schedule.New(cfg, schedule.NewMemoryJobStore(), idle); err != nil {
			t.Errorf("New(%+v) = %v, want valid", cfg, err)
		}
	}
	if _, err := schedule.New(schedule.Config{}, nil, idle); !errors.Is(err, schedule.ErrInvalidConfig) || !strings.Contains(err.Error(), "NewMemoryJobStore") {
		t.Errorf("New with a nil store = %v, want ErrInvalidConfig saying how to fix it", err)
	}
	type store struct{ schedule.JobStore }
	var typedNil *store // compares unequal to nil as a JobStore, and panicked at the first claim
	if _, err := schedule.New(schedule.Config{}, typedNil, idle); !errors.Is(err, schedule.ErrInvalidConfig) {
		t.Errorf("New with a typed nil store = %v, want ErrInvalidConfig", err)
	}
	if err := schedule.AddStream(context.Background(), nil, schedule.Stream[int]{Name: "s", Provider: "p"}); !errors.Is(err, schedule.ErrInvalid) || !strings.Contains(err.Error(), "schedule.New") {
		t.Errorf("AddStream to a nil scheduler = %v, want ErrInvalid saying how to fix it", err)
	}
	// A nil Worker is valid: every job may be a declared stream
	// (TestJobNeitherStreamNorWorkerFails).
	if _, err := schedule.New(schedule.Config{}, schedule.NewMemoryJobStore(), nil); err != nil {
		t.Errorf("New with a nil Worker = %v, want valid", err)
	}
}

func TestUpsertValidatesSpec(t *testing.T) {
	t.Parallel()
	s, store := newSched(t, schedule.Config{}, nil)
	for _, tc := range []struct {
		spec  schedule.Spec
		field string
	}{
		{schedule.Spec{Kind: schedule.KindBackfill, Stream: "s"}, "Spec.Provider"},
		{schedule.Spec{Provider: "p", Kind: schedule.KindBackfill}, "Spec.Stream"},
		{schedule.Spec{Provider: "p", Stream: "s"}, "Spec.Kind"},
		{schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s", Priority: -1}, "Spec.Priority"},
		{schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s"}, "Spec.Interval"},
		{schedule.Spec{Provider: "p", Kind: schedule.KindRefresh, Stream: "s", Interval: -time.Hour}, "Spec.Interval"},
		{schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s", Payload: make([]byte, 2<<20)}, "Spec.Payload"},
	} {
		_, err := s.Upsert(context.Background(), tc.spec)
		if !errors.Is(err, schedule.ErrInvalid) || !strings.Contains(err.Error(), tc.field+" ") {
			t.Errorf("Upsert(%+v) = %v, want ErrInvalid naming %s", tc.spec, err, tc.field)
		}
	}
	if count(store) != 0 {
		t.Fatalf("%d jobs stored after only invalid specs", count(store))
	}
}

// TestClaimOrderHeadFirst pins the picking order of one decision: gap
// fills, then incremental, then refresh work; backfills only for providers
// with no head work due or running.
func TestClaimOrderHeadFirst(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{MaxRunning: 10, MaxPerProvider: 10}, nil)
	for _, sp := range []schedule.Spec{
		{Provider: "a", Kind: schedule.KindBackfill, Stream: "a-back"},
		{Provider: "a", Kind: schedule.KindRefresh, Stream: "a-markets", Interval: 6 * time.Hour},
		{Provider: "a", Kind: schedule.KindIncremental, Stream: "a-1h", Interval: time.Hour},
		{Provider: "b", Kind: schedule.KindBackfill, Stream: "b-back"},
		{Provider: "b", Kind: schedule.KindGapFill, Stream: "b-gap"},
		{Provider: "c", Kind: schedule.KindBackfill, Stream: "c-back"},
	} {
		upsert(t, s, t0, sp)
	}
	got := streams(claim(t, s, t0))
	want := []string{"b-gap", "a-1h", "a-markets", "c-back"}
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v (a and b have head work running: their backfills wait)", got, want)
	}
}

// TestSpareHoldsBackfills: Config.Spare false keeps a provider's backfills
// back even when it is idle; head work is never asked about.
func TestSpareHoldsBackfills(t *testing.T) {
	t.Parallel()
	var asked []string
	spare := map[string]bool{"a": false, "b": true}
	s, _ := newSched(t, schedule.Config{Spare: func(p string) bool { asked = append(asked, p); return spare[p] }}, nil)
	upsert(t, s, t0, schedule.Spec{Provider: "a", Kind: schedule.KindBackfill, Stream: "a-back"})
	upsert(t, s, t0, schedule.Spec{Provider: "b", Kind: schedule.KindBackfill, Stream: "b-back"})
	upsert(t, s, t0, schedule.Spec{Provider: "a", Kind: schedule.KindIncremental, Stream: "a-1h", Interval: time.Hour, NextRun: t0.Add(time.Hour)})
	if got := streams(claim(t, s, t0)); !slices.Equal(got, []string{"b-back"}) {
		t.Fatalf("claimed %v, want only b's backfill", got)
	}
	spare["a"] = true
	if got := streams(claim(t, s, t0.Add(time.Second))); !slices.Equal(got, []string{"a-back"}) {
		t.Fatalf("claimed %v once a has budget to spare, want a's backfill", got)
	}
	for _, p := range asked {
		if p != "a" && p != "b" {
			t.Fatalf("Spare asked about %q", p)
		}
	}
}

// TestDefaultSpareReadsBudget: with a budget.Registry and no Spare hook, a
// provider paused by a Retry-After gets no backfill; a fresh one does.
func TestDefaultSpareReadsBudget(t *testing.T) {
	t.Parallel()
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	err = provider(reg, "hot").Do(context.Background(), nil, func(context.Context) forage.Outcome {
		return forage.Outcome{Status: 429, RetryAfter: time.Hour}
	}, budget.CallOption{NoRetry: true})
	if r, _ := budget.ReasonOf(err); !r.SourcePressure() {
		t.Fatalf("the 429 ended with %v, want source pressure", err)
	}
	provider(reg, "cool")
	s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
	now := time.Now()
	for _, p := range []string{"hot", "cool", "unknown"} {
		upsert(t, s, now, schedule.Spec{Provider: p, Kind: schedule.KindBackfill, Stream: p})
	}
	got := streams(claim(t, s, now))
	if !slices.Equal(got, []string{"cool", "unknown"}) {
		t.Fatalf("claimed %v, want the backfills of the providers not paused", got)
	}
}

// TestDefaultSpareProbesAHalfOpenBreaker: a provider whose breaker opened
// gets no backfill while it is open; once the open period ends (half-open:
// the breaker wants a probe) its backfill is claimed again, so the probe is
// made. (A backfill waited for a closed breaker, which only a call can
// close: a provider with nothing but backfills never ran again.)
func TestDefaultSpareProbesAHalfOpenBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		p := provider(reg, "down")
		for i := 0; p.Snapshot().Breaker != "open"; i++ {
			if i == 100 {
				t.Fatalf("the breaker is %q after 100 failures, want open", p.Snapshot().Breaker)
			}
			p.Do(context.Background(), nil, func(context.Context) forage.Outcome { return forage.Outcome{Status: 500} }, budget.CallOption{NoRetry: true})
			time.Sleep(100 * time.Millisecond)
		}
		s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
		upsert(t, s, time.Now(), schedule.Spec{Provider: "down", Kind: schedule.KindBackfill, Stream: "down"})
		if got := claim(t, s, time.Now()); len(got) != 0 {
			t.Fatalf("claimed %v while the breaker is open, want nothing", streams(got))
		}
		time.Sleep(time.Minute) // past the open period
		if b := p.Snapshot().Breaker; b != "half-open" {
			t.Fatalf("the breaker is %q a minute later, want half-open", b)
		}
		if got := streams(claim(t, s, time.Now())); !slices.Equal(got, []string{"down"}) {
			t.Fatalf("claimed %v with the breaker half-open, want the backfill (the probe)", got)
		}
	})
}

// TestRunTwiceFails: a second concurrent Run is refused.
func TestRunTwiceFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSched(t, schedule.Config{}, nil)
		stop := start(t, s)
		time.Sleep(time.Second)
		if err := s.Run(t.Context()); err == nil || !strings.HasPrefix(err.Error(), "schedule: ") {
			t.Fatalf("second Run = %v, want an error", err)
		}
		stop()
	})
}

// TestFinishAtRejectsForeignJobs: FinishAt takes only jobs this scheduler
// claimed and has not finished.
func TestFinishAtRejectsForeignJobs(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	j := upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
	if _, err := s.FinishAt(context.Background(), t0, j, schedule.Result{}, nil); !errors.Is(err, schedule.ErrInvalid) {
		t.Fatalf("FinishAt of an unclaimed job = %v, want ErrInvalid", err)
	}
	jobs := claim(t, s, t0)
	if _, err := s.FinishAt(context.Background(), t0, jobs[0], schedule.Result{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishAt(context.Background(), t0, jobs[0], schedule.Result{}, nil); !errors.Is(err, schedule.ErrInvalid) {
		t.Fatalf("second FinishAt = %v, want ErrInvalid", err)
	}
}

// TestPauseWhileClaimedKeepsPaused: a job paused during a run stays paused
// after the run's outcome is written (explicit time, no Run).
func TestPauseWhileClaimedKeepsPaused(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{Random: noJitter}, nil)
	ctx := context.Background()
	j := upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s", Interval: time.Minute})
	jobs := claim(t, s, t0)
	if _, err := s.SetPaused(ctx, j.ID, true); err != nil {
		t.Fatal(err)
	}
	got, err := s.FinishAt(ctx, t0.Add(time.Second), jobs[0], schedule.Result{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != schedule.StatePaused || got.Stats.Successes != 1 || !got.NextRun.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the run: %+v, want paused, the success counted, the next cycle set", got)
	}
	if jobs := claim(t, s, t0.Add(time.Hour)); len(jobs) != 0 {
		t.Fatalf("claimed %v while paused", streams(jobs))
	}
	if _, err := s.SetPaused(ctx, j.ID, false); err != nil {
		t.Fatal(err)
	}
	if jobs := claim(t, s, t0.Add(time.Hour)); len(jobs) != 1 {
		t.Fatalf("claimed %v after resume, want the job (overdue)", streams(jobs))
	}
	pause := func(ctx context.Context, id int64) (schedule.Job, error) { return s.SetPaused(ctx, id, true) }
	resume := func(ctx context.Context, id int64) (schedule.Job, error) { return s.SetPaused(ctx, id, false) }
	for _, op := range []func(context.Context, int64) (schedule.Job, error){pause, resume, s.RunNow} {
		if _, err := op(ctx, 9999); !errors.Is(err, schedule.ErrNotFound) {
			t.Fatalf("control of an unknown job = %v, want ErrNotFound", err)
		}
	}
	if err := s.Delete(ctx, 9999); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("Delete of an unknown job = %v, want ErrNotFound", err)
	}
}

// TestRunOnAZeroSchedulerIsAnError: a Scheduler not made by New says so;
// it spun, polling nothing, a core busy until its context ended.
func TestRunOnAZeroSchedulerIsAnError(t *testing.T) {
	t.Parallel()
	var s schedule.Scheduler
	if err := s.Run(context.Background()); err == nil {
		t.Fatal("Run on a zero Scheduler returned nil")
	}
}
