// Package checkpointtest is the contract of [checkpoint.Store] as a test
// suite. Every implementation runs it: the memory and file stores in package
// checkpoint, and the PostgreSQL store in the pgstore module.
//
//	func TestStore(t *testing.T) {
//		checkpointtest.Run(t, func(t *testing.T, now func() time.Time) checkpoint.Store {
//			return checkpoint.NewMemoryStore(checkpoint.Config{Now: now})
//		})
//	}
//
// The suite controls time: it hands each store a clock it advances itself,
// so lease expiry and takeover are tested without sleeping.
package checkpointtest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// storeFunc is the type of Run's newStore argument.
type storeFunc = func(t *testing.T, now func() time.Time) checkpoint.Store

// Run runs the whole contract against the stores newStore returns: CAS
// commits that never regress, separate catch-up and steady-state bookmarks,
// lease exclusivity, expiry, takeover and fencing, gap records with paging
// and idempotent resolve, coverage merged on write, argument validation,
// context cancellation, races between goroutines, and a randomized
// state-machine test against a simple model, and the name rule
// ([checkpoint.CheckName]) in every method that takes a name.
//
// newStore returns a new, empty store that reads time only from now. Run
// calls it once per subtest and once per iteration of its property tests,
// always with the top-level t of the subtest, and runs subtests in
// parallel: every store returned must share no state with the others (a
// PostgreSQL store uses a fresh schema or database). Register cleanup with
// t.Cleanup. Report setup failures with t.Fatal.
func Run(t *testing.T, newStore func(t *testing.T, now func() time.Time) checkpoint.Store) {
	t.Helper()
	groups := []struct {
		name  string
		tests []test
	}{
		{"Checkpoints", checkpointTests},
		{"Leases", leaseTests},
		{"Gaps", gapTests},
		{"Coverage", coverageTests},
		{"Contract", contractTests},
		{"Names", nameTests},
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

// epoch is where every suite clock starts: whole seconds, UTC, so times
// survive any store's precision (PostgreSQL keeps microseconds).
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is the fake time the suite hands to stores. Safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time                  { return epoch.Add(time.Duration(c.ns.Load())) }
func (c *clock) Advance(d time.Duration)         { c.ns.Add(int64(d)) }
func (c *clock) After(d time.Duration) time.Time { return c.Now().Add(d) }

// env is one subtest's store, clock and context.
type env struct {
	t     *testing.T
	s     checkpoint.Store
	clock *clock
	ctx   context.Context
}

func newEnv(t *testing.T, newStore storeFunc) *env {
	c := &clock{}
	s := newStore(t, c.Now)
	if s == nil {
		t.Fatal("checkpointtest: newStore returned nil")
	}
	return &env{t: t, s: s, clock: c, ctx: t.Context()}
}

// cmpOpts compares records: nil and empty cursors are the same cursor, and
// times compare with time.Time.Equal (cmp's default for types with Equal).
var cmpOpts = []cmp.Option{cmpopts.EquateEmpty()}

// diff reports a mismatch between want and got, naming what was compared.
func diff(t testing.TB, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, cmpOpts...); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// wantErr fails unless err matches target with errors.Is (nil target: no
// error).
func wantErr(t rapid.TB, what string, err, target error) {
	t.Helper()
	switch {
	case target == nil && err != nil:
		t.Fatalf("%s: unexpected error: %v", what, err)
	case target != nil && !errors.Is(err, target):
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func (e *env) acquire(stream, owner string, ttl time.Duration) checkpoint.Lease {
	e.t.Helper()
	l, err := e.s.Acquire(e.ctx, stream, owner, ttl)
	wantErr(e.t, "Acquire("+stream+", "+owner+")", err, nil)
	want := checkpoint.Lease{Stream: stream, Owner: owner, Token: l.Token, Expires: e.clock.After(ttl)}
	diff(e.t, "Acquire result", want, l)
	if l.Token <= 0 {
		e.t.Fatalf("Acquire(%s): token %d, want > 0", stream, l.Token)
	}
	return l
}

func (e *env) commit(key checkpoint.Key, cursor string, expect int64, l checkpoint.Lease) checkpoint.Checkpoint {
	e.t.Helper()
	cp, err := e.s.Commit(e.ctx, key, []byte(cursor), expect, l)
	wantErr(e.t, "Commit("+key.String()+", "+cursor+")", err, nil)
	want := checkpoint.Checkpoint{Key: key, Cursor: []byte(cursor), Version: expect + 1, UpdatedAt: e.clock.Now()}
	diff(e.t, "Commit result", want, cp)
	return cp
}

func (e *env) load(key checkpoint.Key) checkpoint.Checkpoint {
	e.t.Helper()
	cp, err := e.s.Load(e.ctx, key)
	wantErr(e.t, "Load("+key.String()+")", err, nil)
	return cp
}

func (e *env) coverage(series string) checkpoint.Coverage {
	e.t.Helper()
	c, err := e.s.Coverage(e.ctx, series)
	wantErr(e.t, "Coverage("+series+")", err, nil)
	return c
}

func (e *env) listGaps(q checkpoint.GapQuery) []checkpoint.Gap {
	e.t.Helper()
	gs, err := e.s.ListGaps(e.ctx, q)
	wantErr(e.t, "ListGaps", err, nil)
	return gs
}

// minute returns the suite's epoch plus m minutes, for ranges.
func minute(m int) time.Time { return epoch.Add(time.Duration(m) * time.Minute) }

// span returns the range [minute(a), minute(b)).
func span(a, b int) checkpoint.Range { return checkpoint.Range{Start: minute(a), End: minute(b)} }

// Keys used across tests.
func catchUp(stream string) checkpoint.Key {
	return checkpoint.Key{Stream: stream, Mode: checkpoint.CatchUp}
}

func steady(stream string) checkpoint.Key {
	return checkpoint.Key{Stream: stream, Mode: checkpoint.SteadyState}
}

func cmpDiff(want, got any) string { return cmp.Diff(want, got, cmpOpts...) }
