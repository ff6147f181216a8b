package schedule_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// Regression tests, each named after what broke.

// TestPausedRunKeepsSourcePressure: a run the scheduler interrupted (job or
// provider paused) that ends with source pressure is classed as source
// pressure, not as interrupted: the provider cools, the job's stats and
// next run are set, and a paused job stays paused.
func TestPausedRunKeepsSourcePressure(t *testing.T) {
	t.Parallel()
	finish := t0.Add(10 * time.Second)
	ban := &budget.Error{Reason: forage.ReasonBanned, Provider: "p", Until: finish.Add(time.Hour)}
	for _, by := range []string{"job", "provider"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, _ := newSched(t, schedule.Config{Random: noJitter}, nil)
			j := upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "main", Interval: time.Minute})
			upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "sibling", Interval: time.Minute, NextRun: finish})
			got := claim(t, s, t0)
			if len(got) != 1 || got[0].ID != j.ID {
				t.Fatalf("ClaimAt(t0) = %v, want [main]", streams(got))
			}
			want := schedule.StateWaitingRateLimit
			if by == "job" {
				if _, err := s.SetPaused(ctx, j.ID, true); err != nil {
					t.Fatalf("Pause: %v", err)
				}
				want = schedule.StatePaused
			} else {
				s.SetProviderPaused("p", true)
				s.SetProviderPaused("p", false)
			}
			if _, err := s.FinishAt(ctx, finish, got[0], schedule.Result{}, ban); err != nil {
				t.Fatalf("FinishAt: %v", err)
			}
			st := get(t, s, j.ID)
			if st.State != want || !st.NextRun.Equal(ban.Until) || st.Stats.Runs != 1 || st.Stats.LastError == "" {
				t.Fatalf("after a ban in a %s-paused run: state %s, next %v, stats %+v; want %s, next %v, 1 run with its error",
					by, st.State, st.NextRun, st.Stats, want, ban.Until)
			}
			if c := claim(t, s, finish.Add(time.Second)); len(c) != 0 {
				t.Fatalf("ClaimAt during the ban = %v, want nothing (provider cooling)", streams(c))
			}
			if d := snapshot(t, s).Decisions; d.Pressured != 1 || d.Interrupted != 0 {
				t.Fatalf("decisions %+v, want 1 pressured, 0 interrupted", d)
			}
		})
	}
}

// TestPausedRunCancellationIsInterrupted: the counterpart: a paused run
// that returns its context's error is interrupted, stays paused and keeps
// its next run.
func TestPausedRunCancellationIsInterrupted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for i, err := range []error{context.Canceled, schedule.ErrInterrupted, &budget.Error{Reason: forage.ReasonCanceled}} {
		s, _ := newSched(t, schedule.Config{Random: noJitter}, nil)
		j := upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "main", Interval: time.Minute})
		got := claim(t, s, t0)
		if _, err := s.SetPaused(ctx, j.ID, true); err != nil {
			t.Fatalf("case %d: Pause: %v", i, err)
		}
		if _, err := s.FinishAt(ctx, t0.Add(time.Second), got[0], schedule.Result{}, err); err != nil {
			t.Fatalf("case %d: FinishAt: %v", i, err)
		}
		st := get(t, s, j.ID)
		if st.State != schedule.StatePaused || !st.NextRun.Equal(t0) || st.Stats.Failures != 0 {
			t.Fatalf("case %d (%v): state %s, next %v, stats %+v; want paused, next t0, no failure", i, err, st.State, st.NextRun, st.Stats)
		}
		if d := snapshot(t, s).Decisions; d.Interrupted != 1 {
			t.Fatalf("case %d: decisions %+v, want 1 interrupted", i, d)
		}
	}
}

// flakyStore fails every Update while failing is set, like a database that
// stopped answering writes.
type flakyStore struct {
	schedule.JobStore
	mu      sync.Mutex
	failing bool
	getHook func() // run once, after the next Get
}

func (f *flakyStore) setFailing(v bool) {
	f.mu.Lock()
	f.failing = v
	f.mu.Unlock()
}

func (f *flakyStore) Update(ctx context.Context, j schedule.Job) (schedule.Job, error) {
	f.mu.Lock()
	failing := f.failing
	f.mu.Unlock()
	if failing {
		return schedule.Job{}, errors.New("store down")
	}
	return f.JobStore.Update(ctx, j)
}

func (f *flakyStore) Get(ctx context.Context, id int64) (schedule.Job, error) {
	j, err := f.JobStore.Get(ctx, id)
	f.mu.Lock()
	h := f.getHook
	f.getHook = nil
	f.mu.Unlock()
	if h != nil {
		h()
	}
	return j, err
}

// TestRenewFailureDoesNotRunJobTwice: when lease renewals fail for longer
// than the lease, the scheduler must not claim its own expired job again
// while the first run (which ignores its context) still runs, and that
// stubborn run keeps its slot: no job runs twice, MaxRunning holds.
func TestRenewFailureDoesNotRunJobTwice(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{JobStore: schedule.NewMemoryJobStore()}
		var mu sync.Mutex
		running := map[int64]int{}
		total, peakJob, peakTotal := 0, 0, 0
		r := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			mu.Lock()
			running[j.ID]++
			total++
			peakJob, peakTotal = max(peakJob, running[j.ID]), max(peakTotal, total)
			mu.Unlock()
			time.Sleep(20 * time.Second) // does not watch ctx
			mu.Lock()
			running[j.ID]--
			total--
			mu.Unlock()
			return schedule.Result{}, nil
		})
		cfg := schedule.Config{MaxRunning: 2, MaxPerProvider: 2, LeaseTTL: 3 * time.Second, Poll: time.Second}
		s, err := schedule.New(cfg, store, r)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "a"})
		upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "b", NextRun: now.Add(8 * time.Second)})
		stop := start(t, s)
		time.Sleep(500 * time.Millisecond)
		store.setFailing(true) // renewals fail from here for 10s > LeaseTTL
		time.Sleep(10 * time.Second)
		store.setFailing(false)
		time.Sleep(30 * time.Second)
		stop()
		mu.Lock()
		defer mu.Unlock()
		if peakJob != 1 || peakTotal > cfg.MaxRunning {
			t.Fatalf("peak runs of one job = %d, peak runs in all = %d; want 1 and <= MaxRunning %d", peakJob, peakTotal, cfg.MaxRunning)
		}
	})
}

// TestRenewFinishRaceIsNotALostLease: a renewal that loses the race
// against its run's own finish is not counted as a lost lease.
func TestRenewFinishRaceIsNotALostLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &flakyStore{JobStore: schedule.NewMemoryJobStore()}
	s, err := schedule.New(schedule.Config{LeaseTTL: 3 * time.Second, Poll: time.Second}, store, idle)
	if err != nil {
		t.Fatal(err)
	}
	upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "main", Interval: time.Minute})
	got := claim(t, s, t0)
	now := t0.Add(2 * time.Second) // past a third of the lease: renewal due
	var finishErr error
	store.getHook = func() { _, finishErr = s.FinishAt(ctx, now, got[0], schedule.Result{}, nil) }
	if err := s.RenewAt(ctx, now); err != nil {
		t.Fatalf("RenewAt: %v", err)
	}
	if finishErr != nil {
		t.Fatalf("FinishAt: %v", finishErr)
	}
	if d := snapshot(t, s).Decisions; d.LeasesLost != 0 {
		t.Fatalf("decisions %+v, want no lost lease", d)
	}
}

// TestDoneGapFillKeepsNewWork: a gap fill re-upserted with new work while
// it ran is not deleted when the run reports Done.
func TestDoneGapFillKeepsNewWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newSched(t, schedule.Config{Requeue: time.Second}, nil)
	spec := schedule.Spec{Provider: "p", Kind: schedule.KindGapFill, Stream: "s", Payload: []byte("gap 1")}
	j := upsert(t, s, t0, spec)
	got := claim(t, s, t0)
	spec.Payload = []byte("gap 2")
	upsert(t, s, t0.Add(time.Second), spec)
	if _, err := s.FinishAt(ctx, t0.Add(2*time.Second), got[0], schedule.Result{Done: true}, nil); err != nil {
		t.Fatalf("FinishAt: %v", err)
	}
	st, err := s.Store().Get(ctx, j.ID)
	if err != nil {
		t.Fatalf("Job after Done with new work: %v, want the job kept", err)
	}
	if string(st.Payload) != "gap 2" || st.State != schedule.StateQueued || !st.NextRun.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("kept gap fill: payload %q, state %s, next %v; want \"gap 2\", queued, t0+3s", st.Payload, st.State, st.NextRun)
	}
}

// TestDoneGapFillRescuedElsewhereIsKept: a scheduler whose lease expired
// and was taken over does not delete the gap fill when its run ends Done.
func TestDoneGapFillRescuedElsewhereIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := schedule.NewMemoryJobStore()
	cfg := schedule.Config{LeaseTTL: 3 * time.Second, Poll: time.Second}
	s1, err := schedule.New(cfg, store, idle)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := schedule.New(cfg, store, idle)
	if err != nil {
		t.Fatal(err)
	}
	j := upsert(t, s1, t0, schedule.Spec{Provider: "p", Kind: schedule.KindGapFill, Stream: "s"})
	old := claim(t, s1, t0)
	if got := claim(t, s2, t0.Add(time.Minute)); len(got) != 1 {
		t.Fatalf("rescue ClaimAt = %v, want [s]", streams(got))
	}
	if _, err := s1.FinishAt(ctx, t0.Add(time.Minute), old[0], schedule.Result{Done: true}, nil); err != nil {
		t.Fatalf("FinishAt: %v", err)
	}
	st, err := s2.Store().Get(ctx, j.ID)
	if err != nil || st.State != schedule.StateRunning {
		t.Fatalf("rescued gap fill after the old run's Done: %+v, %v; want it kept, running", st, err)
	}
}

// TestRunTimeoutKeepsRunnerVerdict: a runner that returns after its
// RunTimeout with its own verdict (source pressure, a failure) keeps it.
func TestRunTimeoutKeepsRunnerVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  func() error
		want schedule.State
	}{
		{"pressure", func() error {
			return &budget.Error{Reason: forage.ReasonThrottled, Until: time.Now().Add(time.Hour)}
		}, schedule.StateWaitingRateLimit},
		{"failure", func() error { return errors.New("parse: bad page") }, schedule.StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := schedule.WorkerFunc(func(ctx context.Context, _ schedule.Job) (schedule.Result, error) {
					<-ctx.Done()
					return schedule.Result{}, tc.err()
				})
				s, _ := newSched(t, schedule.Config{RunTimeout: time.Second, Backoff: time.Hour}, r)
				j := upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
				runFor(t, s, 2*time.Second)
				if st := get(t, s, j.ID); st.State != tc.want {
					t.Fatalf("after RunTimeout and %s: state %s, stats %+v; want %s", tc.name, st.State, st.Stats, tc.want)
				}
			})
		})
	}
}

// TestExhaustionKeepsFailureStreak: budget exhaustion between two
// failures does not reset the streak, so the backoff keeps doubling.
func TestExhaustionKeepsFailureStreak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newSched(t, schedule.Config{Random: noJitter, Backoff: 5 * time.Second, Requeue: time.Second}, nil)
	j := upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
	now := t0
	for i, err := range []error{errors.New("boom"), &budget.Error{Reason: forage.ReasonRequestCap}, errors.New("boom")} {
		got := claim(t, s, now)
		if len(got) != 1 {
			t.Fatalf("step %d: ClaimAt(%v) = %v, want [s]", i, now, streams(got))
		}
		after, ferr := s.FinishAt(ctx, now, got[0], schedule.Result{}, err)
		if ferr != nil {
			t.Fatalf("step %d: FinishAt: %v", i, ferr)
		}
		now = after.NextRun
	}
	st := get(t, s, j.ID)
	if st.Stats.Streak != 2 || st.Stats.Failures != 2 {
		t.Fatalf("stats %+v, want streak 2 after fail, exhaustion, fail", st.Stats)
	}
	if d := st.NextRun.Sub(st.Stats.LastRun); d != 10*time.Second {
		t.Fatalf("backoff after the second failure = %v, want 10s", d)
	}
}

// cutOff is a JobStore that fails every call while down: a process cut
// off from the database while others reach it.
type cutOff struct {
	schedule.JobStore
	down atomic.Bool
}

var errCutOff = errors.New("job store unreachable")

func (d *cutOff) Get(ctx context.Context, id int64) (schedule.Job, error) {
	if d.down.Load() {
		return schedule.Job{}, errCutOff
	}
	return d.JobStore.Get(ctx, id)
}

func (d *cutOff) Update(ctx context.Context, j schedule.Job) (schedule.Job, error) {
	if d.down.Load() {
		return schedule.Job{}, errCutOff
	}
	return d.JobStore.Update(ctx, j)
}

func (d *cutOff) List(ctx context.Context, q schedule.Query) ([]schedule.Job, error) {
	if d.down.Load() {
		return nil, errCutOff
	}
	return d.JobStore.List(ctx, q)
}

func (d *cutOff) Claim(ctx context.Context, now time.Time, owner string, ttl time.Duration, limit int, f schedule.ClaimFilter) ([]schedule.Job, error) {
	if d.down.Load() {
		return nil, errCutOff
	}
	return d.JobStore.Claim(ctx, now, owner, ttl, limit, f)
}

// TestACutOffSchedulerStopsBeforeItsLeaseEnds: scheduler A runs a job and
// loses its job store (B, which reaches it, rescues the job once A's lease
// ends). A's run is stopped before its lease ends, so the job never runs
// twice at once. Before, A ran it for a minute and a half alongside B's run
// (found by a review).
func TestACutOffSchedulerStopsBeforeItsLeaseEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := schedule.NewMemoryJobStore()
		viewA := &cutOff{JobStore: mem}
		neverTwiceAtOnce(t, mem, viewA, func() { viewA.down.Store(true) }, func() { viewA.down.Store(false) })
	})
}

// TestABusyHeadJobHidesNoBackfill: a provider's due head job whose stream
// another job runs cannot be claimed, so it does not hold back the
// provider's backfill of another stream, which ranks first (due 30 s
// before another provider's head job) and is claimed first, as the job
// store contract ranks them. The memory store let the busy head job rank
// its provider (and, head first, hide the backfill), and claimed the other
// provider's later job instead.
func TestABusyHeadJobHidesNoBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	store := schedule.NewMemoryJobStore()
	add := func(provider string, kind schedule.Kind, stream string, due time.Time) schedule.Job {
		t.Helper()
		j, err := store.Upsert(ctx, schedule.Job{Provider: provider, Kind: kind, Stream: stream, Interval: time.Hour,
			State: schedule.StateIdle, NextRun: due})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	add("a", schedule.KindBackfill, "y", now.Add(-2*time.Minute)) // runs: stream y of a is busy
	f := schedule.ClaimFilter{Aging: 30 * time.Second}
	if got, err := store.Claim(ctx, now, "o1", time.Minute, 1, f); err != nil || len(got) != 1 {
		t.Fatalf("first claim: %v, %v", got, err)
	}
	want := add("a", schedule.KindBackfill, "x", now.Add(-time.Minute))
	add("a", schedule.KindIncremental, "y", now) // due, but its stream runs
	add("c", schedule.KindIncremental, "z", now.Add(-30*time.Second))
	got, err := store.Claim(ctx, now, "o1", time.Minute, 1, f)
	if err != nil || len(got) != 1 || got[0].ID != want.ID {
		t.Fatalf("claim = %+v, %v; want a's backfill of x (due first; a's head job is held by its busy stream)", got, err)
	}
}

// neverTwiceAtOnce runs one long backfill job with scheduler A, whose job
// store is viewA (a view of mem), then, 2 s in, calls lose (A's store
// fails or hangs) and starts scheduler B on mem itself, which rescues the
// job once A's lease ends; after 90 s it calls restore. It fails the test
// unless B's rescue came (two runs in all) and the job never ran twice at
// once.
func neverTwiceAtOnce(t *testing.T, mem, viewA schedule.JobStore, lose, restore func()) {
	t.Helper()
	var mu sync.Mutex
	running, peak, runs := 0, 0, 0
	worker := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
		mu.Lock()
		running, runs = running+1, runs+1
		peak = max(peak, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-time.After(2 * time.Minute): // a long run that honours its context
			return schedule.Result{}, nil
		case <-ctx.Done():
			return schedule.Result{}, context.Cause(ctx)
		}
	})
	cfg := schedule.Config{LeaseTTL: 30 * time.Second, Poll: time.Second, Owner: "A"}
	a, err := schedule.New(cfg, viewA, worker)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Owner = "B"
	b, err := schedule.New(cfg, mem, worker)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Upsert(t.Context(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"}); err != nil {
		t.Fatal(err)
	}
	stopA := start(t, a)
	time.Sleep(2 * time.Second)
	lose()
	stopB := start(t, b)
	time.Sleep(90 * time.Second)
	mu.Lock()
	gotPeak, gotRuns := peak, runs
	mu.Unlock()
	restore()
	stopB()
	stopA()
	if gotPeak != 1 || gotRuns < 2 {
		t.Fatalf("%d runs, at most %d at once; want B's rescue (2 runs in all) and never two at once", gotRuns, gotPeak)
	}
}
