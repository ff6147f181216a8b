package schedule_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/schedule"
)

// t0 is where the explicit-time tests start.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// noJitter pins Config.Random to the middle of the jitter range.
func noJitter() float64 { return 0.5 }

// idle is a runner that must not be called (explicit-time tests).
var idle = schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) {
	return schedule.Result{}, errors.New("not called")
})

// newSched returns a scheduler over a fresh memory store.
func newSched(t tb, cfg schedule.Config, r schedule.Worker) (*schedule.Scheduler, schedule.JobStore) {
	t.Helper()
	store := schedule.NewMemoryJobStore()
	if r == nil {
		r = idle
	}
	s, err := schedule.New(cfg, store, r)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s, store
}

// upsert adds spec, due at now unless spec.NextRun says otherwise.
func upsert(t tb, s *schedule.Scheduler, now time.Time, spec schedule.Spec) schedule.Job {
	t.Helper()
	if spec.NextRun.IsZero() {
		spec.NextRun = now
	}
	j, err := s.Upsert(context.Background(), spec)
	if err != nil {
		t.Fatalf("Upsert(%+v): %v", spec, err)
	}
	return j
}

// claim calls ClaimAt and returns the streams claimed, in order.
func claim(t tb, s *schedule.Scheduler, now time.Time) []schedule.Job {
	t.Helper()
	jobs, err := s.ClaimAt(context.Background(), now)
	if err != nil {
		t.Fatalf("ClaimAt(%v): %v", now, err)
	}
	return jobs
}

func streams(jobs []schedule.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Stream
	}
	return out
}

// get reads job id.
func get(t tb, s *schedule.Scheduler, id int64) schedule.Job {
	t.Helper()
	j, err := s.Store().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Job(%d): %v", id, err)
	}
	return j
}

// recorder is a runner for synctest tests: it records every start and
// delegates the outcome to fn (nil: instant success).
type recorder struct {
	mu     sync.Mutex
	starts map[string][]time.Time // by stream
	order  []string
	fn     func(ctx context.Context, j schedule.Job) (schedule.Result, error)
}

func newRecorder(fn func(ctx context.Context, j schedule.Job) (schedule.Result, error)) *recorder {
	return &recorder{starts: map[string][]time.Time{}, fn: fn}
}

func (r *recorder) Run(ctx context.Context, j schedule.Job) (schedule.Result, error) {
	r.mu.Lock()
	r.starts[j.Stream] = append(r.starts[j.Stream], time.Now())
	r.order = append(r.order, j.Stream)
	r.mu.Unlock()
	if r.fn == nil {
		return schedule.Result{}, nil
	}
	return r.fn(ctx, j)
}

func (r *recorder) startsOf(stream string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.starts[stream]...)
}

func (r *recorder) orderSoFar() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...)
}

// runFor runs s in the bubble for d of fake time, then stops it and waits
// for Run to return, failing if it returns anything but context.Canceled.
func runFor(t *testing.T, s *schedule.Scheduler, d time.Duration) {
	t.Helper()
	stop := start(t, s)
	time.Sleep(d)
	stop()
}

// start runs s in the background; the returned func stops it and waits.
func start(t *testing.T, s *schedule.Scheduler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	}
}

// sleepCtx sleeps d or until ctx ends, returning ctx's error then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// count returns how many jobs the memory store holds, through the Count
// method NewMemoryJobStore documents.
func count(store schedule.JobStore) int {
	n, _ := store.(interface {
		Count(context.Context) (int, error)
	}).Count(context.Background())
	return n
}

// due reports whether j may be claimed at now, as JobStore.Claim's
// contract says: its state is active (not paused, not success), NextRun
// has come, and no live lease holds it.
func due(j *schedule.Job, now time.Time) bool {
	return j.State != schedule.StatePaused && j.State != schedule.StateSuccess &&
		!j.NextRun.After(now) && (j.Lease.Owner == "" || !now.Before(j.Lease.Until))
}
