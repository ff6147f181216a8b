// Package jobstoretest is the contract of [schedule.JobStore] as a test
// suite. Every implementation runs it: the memory store in package
// schedule, and the PostgreSQL store in the pgstore module.
//
//	func TestJobStore(t *testing.T) {
//		jobstoretest.Run(t, func(t *testing.T) schedule.JobStore {
//			return schedule.NewMemoryJobStore()
//		})
//	}
//
// The suite controls time: every time-dependent method takes now, and the
// suite passes times of its choosing (whole seconds from 2030-01-01 UTC, so
// they survive PostgreSQL's microseconds), moving forward only.
package jobstoretest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/forage-go/forage/schedule"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// storeFunc is the type of Run's newStore argument.
type storeFunc = func(t *testing.T) schedule.JobStore

// Run runs the whole contract against the stores newStore returns:
// idempotent upserts on (provider, kind, stream), compare-and-swap updates,
// listing and paging, deletion, and claims — due jobs only, leased
// atomically, ranked by priority, next run and aging, within per-provider
// caps, head first, with expired leases rescued — argument validation,
// context cancellation, races between goroutines, and a randomized
// state-machine test against a simple model.
//
// newStore returns a new, empty store. Run calls it once per subtest and
// once per iteration of its property tests, always with the top-level t of
// the subtest, and runs subtests in parallel: every store returned must
// share no state with the others (a PostgreSQL store uses a fresh schema or
// database). Register cleanup with t.Cleanup. Report setup failures with
// t.Fatal.
func Run(t *testing.T, newStore func(t *testing.T) schedule.JobStore) {
	t.Helper()
	groups := []struct {
		name  string
		tests []test
	}{
		{"Jobs", jobTests},
		{"Claim", claimTests},
		{"Contract", contractTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, newEnv(t, newStore))
				})
			}
		})
	}
	t.Run("StateMachine", func(t *testing.T) {
		t.Parallel()
		runStateMachine(t, newStore)
	})
}

// test is one named subtest.
type test struct {
	name string
	run  func(t *testing.T, e *env)
}

// epoch is where every suite time starts: whole seconds, UTC.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns epoch plus sec seconds.
func at(sec int) time.Time { return epoch.Add(time.Duration(sec) * time.Second) }

// env is one subtest's store and context.
type env struct {
	t   *testing.T
	s   schedule.JobStore
	ctx context.Context
}

func newEnv(t *testing.T, newStore storeFunc) *env {
	s := newStore(t)
	if s == nil {
		t.Fatal("jobstoretest: newStore returned nil")
	}
	return &env{t: t, s: s, ctx: t.Context()}
}

// cmpOpts compares jobs: nil and empty payloads are the same, and times
// compare with time.Time.Equal (cmp's default for types with Equal).
var cmpOpts = []cmp.Option{cmpopts.EquateEmpty()}

func cmpDiff(want, got any) string { return cmp.Diff(want, got, cmpOpts...) }

// diff reports a mismatch between want and got, naming what was compared.
func diff(t testing.TB, what string, want, got any) {
	t.Helper()
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// wantErr fails unless err matches target with errors.Is (nil target: no
// error).
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	switch {
	case target == nil && err != nil:
		t.Fatalf("%s: unexpected error: %v", what, err)
	case target != nil && !errors.Is(err, target):
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

// job returns a new idle job of kind k with its default priority, due at
// next, as a scheduler would insert it.
func job(provider string, k schedule.Kind, stream string, next time.Time) schedule.Job {
	return schedule.Job{
		Provider: provider, Kind: k, Stream: stream, Priority: k.DefaultPriority(),
		Interval: time.Minute, State: schedule.StateIdle, NextRun: next,
		Created: epoch, Updated: epoch,
	}
}

// insert upserts j, which must be new, and returns it as stored.
func (e *env) insert(j schedule.Job) schedule.Job {
	e.t.Helper()
	got, err := e.s.Upsert(e.ctx, j)
	wantErr(e.t, fmt.Sprintf("Upsert(%s/%s/%s)", j.Provider, j.Kind, j.Stream), err, nil)
	if got.ID <= 0 || got.Version != 1 {
		e.t.Fatalf("Upsert(%s/%s/%s) = ID %d, Version %d; want ID > 0, Version 1", j.Provider, j.Kind, j.Stream, got.ID, got.Version)
	}
	j.ID, j.Version = got.ID, 1
	diff(e.t, "Upsert result", j, got)
	return got
}

// get returns job id.
func (e *env) get(id int64) schedule.Job {
	e.t.Helper()
	j, err := e.s.Get(e.ctx, id)
	wantErr(e.t, fmt.Sprintf("Get(%d)", id), err, nil)
	return j
}

// update writes j and returns it as stored.
func (e *env) update(j schedule.Job) schedule.Job {
	e.t.Helper()
	got, err := e.s.Update(e.ctx, j)
	wantErr(e.t, fmt.Sprintf("Update(%d)", j.ID), err, nil)
	j.Version++
	diff(e.t, "Update result", j, got)
	return got
}

// claim claims at now with f and returns the IDs taken, in order, checking
// that each job came back leased as the contract says.
func (e *env) claim(now time.Time, owner string, limit int, f schedule.ClaimFilter) []int64 {
	e.t.Helper()
	jobs, err := e.s.Claim(e.ctx, now, owner, time.Minute, limit, f)
	wantErr(e.t, "Claim", err, nil)
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
		if j.State != schedule.StateRunning || j.Lease.Owner != owner || !j.Lease.Until.Equal(now.Add(time.Minute)) || !j.Updated.Equal(now) {
			e.t.Fatalf("Claim: job %d came back with state %s, lease %+v, updated %v; want running, {%s %v}, %v",
				j.ID, j.State, j.Lease, j.Updated, owner, now.Add(time.Minute), now)
		}
		j.Lease.TakenFrom = "" // a Claim's result only
		diff(e.t, fmt.Sprintf("Get(%d) after Claim", j.ID), j, e.get(j.ID))
	}
	return ids
}

// release ends the lease on job id as a scheduler would after a run: idle,
// due at next.
func (e *env) release(id int64, next time.Time) schedule.Job {
	e.t.Helper()
	j := e.get(id)
	j.Lease, j.State, j.NextRun = schedule.JobLease{}, schedule.StateIdle, next
	return e.update(j)
}

// ids formats a list of IDs for messages.
func ids(js ...schedule.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func isConflict(err error) bool { return errors.Is(err, schedule.ErrConflict) }
