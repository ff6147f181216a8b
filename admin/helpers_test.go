package admin_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/schedule"
)

// t0 is where the explicit-time tests start.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

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
		t.Fatalf("schedule.New(%+v): %v", cfg, err)
	}
	return s, store
}

// handler returns the handler of s with the zero Config.
func handler(t tb, s *schedule.Scheduler) *admin.Handler {
	t.Helper()
	h, err := admin.New(s, admin.Config{})
	if err != nil {
		t.Fatalf("New(zero Config): %v", err)
	}
	return h
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

// claim leases the jobs due at now in s's store, as a scheduler running
// them would (a minute's lease), and returns them in order.
func claim(t tb, s *schedule.Scheduler, now time.Time) []schedule.Job {
	t.Helper()
	jobs, err := s.Store().Claim(context.Background(), now, "test-claim", time.Minute, 100, schedule.ClaimFilter{})
	if err != nil {
		t.Fatalf("Claim(%v): %v", now, err)
	}
	return jobs
}

// streams returns the streams of jobs, in order.
func streams(jobs []schedule.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Stream
	}
	return out
}

// localRequest is httptest.NewRequest for the operator's own machine: its
// Host is localhost, which a handler with no Authorize serves (see
// TestHandlerRefusesReboundHosts).
func localRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Host = "localhost:8080"
	return r
}

// isPaused reports whether provider is paused in s.
func isPaused(s *schedule.Scheduler, provider string) bool {
	return slices.Contains(s.PausedProviders(), provider)
}
