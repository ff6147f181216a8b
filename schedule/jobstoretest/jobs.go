package jobstoretest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/schedule"
)

var jobTests = []test{
	{"InsertAssignsIncreasingIDs", testInsert},
	{"UpsertIsIdempotentOnIdentity", testUpsertIdempotent},
	{"IdentityIncludesKind", testIdentityKind},
	{"PayloadsAreCopied", testPayloadCopies},
	{"GetUnknown", testGetUnknown},
	{"ListFiltersInIDOrder", testListFilters},
	{"ListPages", testListPages},
	{"UpdateIsCompareAndSwap", testUpdateCAS},
	{"UpdateKeepsIdentity", testUpdateIdentity},
	{"ConcurrentUpdatesOneWins", testConcurrentUpdates},
	{"DeleteFreesIdentity", testDelete},
}

func testInsert(t *testing.T, e *env) {
	a := e.insert(job("binance", schedule.KindIncremental, "BTC-USDT/1h", at(0)))
	b := e.insert(job("binance", schedule.KindBackfill, "BTC-USDT/1h", at(0)))
	c := e.insert(job("kraken", schedule.KindRefresh, "markets", at(5)))
	if !(a.ID < b.ID && b.ID < c.ID) {
		t.Fatalf("IDs %d, %d, %d: want strictly increasing", a.ID, b.ID, c.ID)
	}
}

func testUpsertIdempotent(t *testing.T, e *env) {
	j := job("binance", schedule.KindIncremental, "BTC-USDT/1h", at(0))
	j.Payload = []byte("v1")
	first := e.insert(j)
	// Give it some runtime state, as a scheduler would.
	first.State, first.NextRun = schedule.StateFailed, at(100)
	first.Stats = schedule.Stats{Runs: 3, Failures: 1, Streak: 1, LastError: "boom", LastRun: at(1)}
	first = e.update(first)

	again := job("binance", schedule.KindIncremental, "BTC-USDT/1h", at(50)) // a different NextRun: ignored
	again.Priority, again.Interval, again.Payload, again.Updated = 7, time.Hour, []byte("v2"), at(60)
	again.State, again.Created = schedule.StateIdle, at(60) // runtime fields: ignored
	got, err := e.s.Upsert(e.ctx, again)
	wantErr(t, "second Upsert", err, nil)
	want := first
	want.Priority, want.Interval, want.Payload, want.Updated = 7, time.Hour, []byte("v2"), at(60)
	want.Version = first.Version + 1
	diff(t, "second Upsert result", want, got)
	diff(t, "Get after second Upsert", want, e.get(first.ID))
	all, err := e.s.List(e.ctx, schedule.Query{})
	wantErr(t, "List", err, nil)
	if len(all) != 1 {
		t.Fatalf("List after two upserts of one identity: %d jobs, want 1", len(all))
	}
}

func testIdentityKind(t *testing.T, e *env) {
	a := e.insert(job("binance", schedule.KindIncremental, "s", at(0)))
	b := e.insert(job("binance", schedule.KindBackfill, "s", at(0)))
	c := e.insert(job("kraken", schedule.KindIncremental, "s", at(0)))
	d := e.insert(job("binance", schedule.KindIncremental, "t", at(0)))
	seen := map[int64]bool{}
	for _, j := range []schedule.Job{a, b, c, d} {
		if seen[j.ID] {
			t.Fatalf("job %d reused across identities", j.ID)
		}
		seen[j.ID] = true
	}
}

func testPayloadCopies(t *testing.T, e *env) {
	j := job("p", schedule.KindGapFill, "s", at(0))
	j.Payload = []byte("abc")
	got := e.insert(j)
	j.Payload[0] = 'X'   // the caller's slice
	got.Payload[1] = 'Y' // the returned slice
	if p := e.get(got.ID).Payload; string(p) != "abc" {
		t.Fatalf("stored payload %q after the caller modified its slices, want %q", p, "abc")
	}
	claimed := e.claim(at(0), "o", 1, schedule.ClaimFilter{})
	if len(claimed) != 1 {
		t.Fatalf("Claim took %v, want the one job", claimed)
	}
	g := e.get(got.ID)
	g.Payload[2] = 'Z'
	if p := e.get(got.ID).Payload; string(p) != "abc" {
		t.Fatalf("stored payload %q after modifying a Get result, want %q", p, "abc")
	}
}

func testGetUnknown(t *testing.T, e *env) {
	_, err := e.s.Get(e.ctx, 12345)
	wantErr(t, "Get(unknown)", err, schedule.ErrNotFound)
	for _, id := range []int64{0, -1} {
		_, err := e.s.Get(e.ctx, id)
		wantErr(t, fmt.Sprintf("Get(%d)", id), err, schedule.ErrInvalid)
	}
}

func testListFilters(t *testing.T, e *env) {
	a := e.insert(job("binance", schedule.KindIncremental, "x", at(0)))
	b := e.insert(job("kraken", schedule.KindIncremental, "x", at(0)))
	c := e.insert(job("binance", schedule.KindBackfill, "y", at(0)))
	c.State = schedule.StatePaused
	c = e.update(c)
	for _, tc := range []struct {
		q    schedule.Query
		want []schedule.Job
	}{
		{schedule.Query{}, []schedule.Job{a, b, c}},
		{schedule.Query{Provider: "binance"}, []schedule.Job{a, c}},
		{schedule.Query{Kind: schedule.KindIncremental}, []schedule.Job{a, b}},
		{schedule.Query{State: schedule.StatePaused}, []schedule.Job{c}},
		{schedule.Query{Stream: "x"}, []schedule.Job{a, b}},
		{schedule.Query{Provider: "binance", Stream: "x"}, []schedule.Job{a}},
		{schedule.Query{Provider: "nobody"}, nil},
		{schedule.Query{After: a.ID}, []schedule.Job{b, c}},
		{schedule.Query{Limit: 2}, []schedule.Job{a, b}},
	} {
		got, err := e.s.List(e.ctx, tc.q)
		wantErr(t, fmt.Sprintf("List(%+v)", tc.q), err, nil)
		diff(t, fmt.Sprintf("List(%+v)", tc.q), tc.want, got)
	}
	for _, q := range []schedule.Query{{Kind: "bogus"}, {State: "bogus"}, {After: -1}, {Limit: -1}} {
		_, err := e.s.List(e.ctx, q)
		wantErr(t, fmt.Sprintf("List(%+v)", q), err, schedule.ErrInvalid)
	}
}

func testListPages(t *testing.T, e *env) {
	var want []int64
	for i := range 25 {
		j := e.insert(job("p", schedule.KindIncremental, fmt.Sprintf("s%02d", i), at(0)))
		want = append(want, j.ID)
	}
	// Delete a few so that pages straddle holes.
	for _, i := range []int{3, 4, 10, 24} {
		wantErr(t, "Delete", e.s.Delete(e.ctx, want[i]), nil)
	}
	want = append(append(want[:3:3], want[5:10]...), want[11:24]...)
	var got []int64
	q := schedule.Query{Limit: 4}
	for page := 0; ; page++ {
		js, err := e.s.List(e.ctx, q)
		wantErr(t, fmt.Sprintf("List page %d", page), err, nil)
		if len(js) == 0 {
			break
		}
		if len(js) > 4 {
			t.Fatalf("page %d has %d jobs, Limit 4", page, len(js))
		}
		got = append(got, ids(js...)...)
		q.After = js[len(js)-1].ID
	}
	diff(t, "IDs drained page by page", want, got)
}

func testUpdateCAS(t *testing.T, e *env) {
	j := e.insert(job("p", schedule.KindIncremental, "s", at(0)))
	stale := j
	j.State, j.NextRun, j.Priority, j.Interval = schedule.StateFailed, at(30), 5, time.Hour
	j.Stats = schedule.Stats{Runs: 1, Failures: 1, Streak: 1, LastError: "e", LastRun: at(1)}
	j.Lease, j.Updated, j.Payload = schedule.JobLease{Owner: "o", Until: at(90)}, at(2), []byte("p")
	j = e.update(j)
	stale.State = schedule.StatePaused
	_, err := e.s.Update(e.ctx, stale)
	wantErr(t, "Update from a stale version", err, schedule.ErrConflict)
	diff(t, "Get after the lost Update", j, e.get(j.ID))

	_, err = e.s.Update(e.ctx, schedule.Job{ID: 999999, Provider: "p", Kind: schedule.KindIncremental, Stream: "s", State: schedule.StateIdle})
	wantErr(t, "Update(unknown)", err, schedule.ErrNotFound)
	bad := j
	bad.State = "bogus"
	_, err = e.s.Update(e.ctx, bad)
	wantErr(t, "Update with an invalid state", err, schedule.ErrInvalid)
	bad = j
	bad.ID = 0
	_, err = e.s.Update(e.ctx, bad)
	wantErr(t, "Update with ID 0", err, schedule.ErrInvalid)
	diff(t, "Get after the rejected Updates", j, e.get(j.ID))
}

func testUpdateIdentity(t *testing.T, e *env) {
	j := e.insert(job("p", schedule.KindIncremental, "s", at(0)))
	for _, change := range []func(*schedule.Job){
		func(j *schedule.Job) { j.Provider = "q" },
		func(j *schedule.Job) { j.Kind = schedule.KindBackfill },
		func(j *schedule.Job) { j.Stream = "t" },
	} {
		c := j
		change(&c)
		_, err := e.s.Update(e.ctx, c)
		wantErr(t, "Update changing identity", err, schedule.ErrInvalid)
	}
	c := j
	c.Created = at(500) // never changes
	got, err := e.s.Update(e.ctx, c)
	wantErr(t, "Update with another Created", err, nil)
	if !got.Created.Equal(j.Created) || !e.get(j.ID).Created.Equal(j.Created) {
		t.Fatalf("Update changed Created to %v, want %v", got.Created, j.Created)
	}
}

func testConcurrentUpdates(t *testing.T, e *env) {
	j := e.insert(job("p", schedule.KindIncremental, "s", at(0)))
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			c := j
			c.Stats.Runs = int64(i + 1)
			_, errs[i] = e.s.Update(e.ctx, c)
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !isConflict(err):
			t.Fatalf("goroutine %d: Update: %v, want nil or ErrConflict", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent Updates from one version won, want exactly 1", won, n)
	}
	if got := e.get(j.ID); got.Version != 2 {
		t.Fatalf("Version %d after one winning Update, want 2", got.Version)
	}
}

func testDelete(t *testing.T, e *env) {
	j := e.insert(job("p", schedule.KindGapFill, "s", at(0)))
	wantErr(t, "Delete", e.s.Delete(e.ctx, j.ID), nil)
	_, err := e.s.Get(e.ctx, j.ID)
	wantErr(t, "Get after Delete", err, schedule.ErrNotFound)
	wantErr(t, "second Delete", e.s.Delete(e.ctx, j.ID), schedule.ErrNotFound)
	wantErr(t, "Delete(0)", e.s.Delete(e.ctx, 0), schedule.ErrInvalid)
	_, err = e.s.Update(e.ctx, j)
	wantErr(t, "Update after Delete", err, schedule.ErrNotFound)
	if got := e.claim(at(10), "o", 10, schedule.ClaimFilter{}); len(got) != 0 {
		t.Fatalf("Claim after Delete took %v, want nothing", got)
	}
	k := e.insert(job("p", schedule.KindGapFill, "s", at(0)))
	if k.ID <= j.ID {
		t.Fatalf("re-inserted job got ID %d, want > %d (IDs are never reused)", k.ID, j.ID)
	}
}
