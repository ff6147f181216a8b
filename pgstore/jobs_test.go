package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/schedule/jobstoretest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// TestJobStore runs the schedule.JobStore contract suite, unchanged.
func TestJobStore(t *testing.T) {
	t.Parallel()
	jobstoretest.Run(t, newJobStore)
}

// jobSchemas holds the store made for each test, so that newJobStore can
// hand a test a store again cheaply (see there).
var jobSchemas sync.Map // *testing.T → *pgstore.Store

// newJobStore returns an empty job store of its own. The first call for a
// test creates and migrates a fresh schema; a later call with the same t
// empties that schema's jobs tables instead. That is safe because the only
// caller that repeats a t is the suite's state machine, which calls
// newStore once per rapid iteration, one iteration after another, and
// never touches a store of an earlier iteration again; a fresh schema per
// iteration would cost a migration each (100 per run).
func newJobStore(t *testing.T) schedule.JobStore {
	t.Helper()
	if v, ok := jobSchemas.Load(t); ok {
		s := v.(*pgstore.Store)
		if _, err := s.Pool().Exec(context.Background(),
			`TRUNCATE "`+s.Schema()+`".jobs, "`+s.Schema()+`".job_providers`); err != nil {
			t.Fatalf("empty the jobs of schema %s: %v", s.Schema(), err)
		}
		return s.Jobs()
	}
	s := newStore(t, nil)
	jobSchemas.Store(t, s)
	t.Cleanup(func() { jobSchemas.Delete(t) })
	return s.Jobs()
}

// TestJobClaimSkipsProviderBeingClaimed: while one claim (skipping b) is
// inside its transaction, holding provider a (its Tail hook is asked about
// a's backfill and waits), a second claim at the same now neither waits for
// it nor takes a's job: it takes b's and returns. The first claim then
// takes a's backfill. Without the provider's lock the second claim would
// take a's backfill, and the first would come back empty.
func TestJobClaimSkipsProviderBeingClaimed(t *testing.T) {
	t.Parallel()
	js := newStore(t, nil).Jobs()
	ctx := t.Context()
	now := jobEpoch
	var want [2]int64
	for i, p := range []string{"a", "b"} {
		k := []schedule.Kind{schedule.KindBackfill, schedule.KindIncremental}[i]
		j, err := js.Upsert(ctx, schedule.Job{Provider: p, Kind: k, Stream: "s", Priority: k.DefaultPriority(),
			State: schedule.StateIdle, NextRun: now, Created: now, Updated: now})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = j.ID
	}
	inside, proceed := make(chan struct{}), make(chan struct{})
	type result struct {
		jobs []schedule.Job
		err  error
	}
	first := make(chan result, 1)
	go func() {
		f := schedule.ClaimFilter{Skip: []string{"b"}, Tail: func(string) bool {
			close(inside)
			<-proceed
			return true
		}}
		jobs, err := js.Claim(ctx, now, "first", time.Minute, 1, f)
		first <- result{jobs, err}
	}()
	select {
	case <-inside:
	case r := <-first:
		t.Fatalf("first claim returned %v, %v without asking Tail about a's backfill", ids(r.jobs), r.err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	got, err := js.Claim(wait, now, "second", time.Minute, 2, schedule.ClaimFilter{})
	cancel()
	close(proceed)
	if err != nil || len(got) != 1 || got[0].ID != want[1] {
		t.Fatalf("second claim while the first holds a: %v, %v; want b's job %d alone, at once", ids(got), err, want[1])
	}
	r := <-first
	if r.err != nil || len(r.jobs) != 1 || r.jobs[0].ID != want[0] {
		t.Fatalf("first claim: %v, %v; want a's backfill %d", ids(r.jobs), r.err, want[0])
	}
}

// TestJobRoundTrip: any job Upsert accepts comes back from Get exactly as
// given, but for what PostgreSQL keeps: times to the microsecond and
// LastError as valid UTF-8 without NUL. Upsert rejects with ErrInvalid,
// storing nothing, exactly the jobs whose Provider, Stream or Lease.Owner
// is not a valid name (checkpoint.CheckName, the rule of every store) or
// whose times fall outside timestamptz's range; List
// by a provider that is not such text finds nothing rather than failing.
func TestJobRoundTrip(t *testing.T) {
	t.Parallel()
	js := newStore(t, nil).Jobs()
	ctx := t.Context()
	text := rapid.OneOf(rapid.StringMatching(`[a-z]{1,8}`), rapid.String(),
		rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(t, "bytes")) }))
	stamp := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) time.Time { return time.Unix(0, rapid.Int64().Draw(t, "ns")) }),
		rapid.Custom(func(t *rapid.T) time.Time {
			return time.Date(rapid.IntRange(-5000, 300000).Draw(t, "year"), 1, 1, 0, 0, 0, rapid.IntRange(0, 999999999).Draw(t, "nsec"), time.UTC)
		}),
		rapid.Just(time.Time{}))
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		j := schedule.Job{
			Provider: text.Draw(rt, "provider"), Kind: schedule.KindRefresh, Stream: fmt.Sprint(n, text.Draw(rt, "stream")),
			Priority: rapid.IntRange(0, 1000).Draw(rt, "priority"), Interval: time.Duration(rapid.Int64Min(0).Draw(rt, "interval")),
			Payload: rapid.SliceOf(rapid.Byte()).Draw(rt, "payload"), State: schedule.StateFailed, NextRun: stamp.Draw(rt, "next"),
			Stats: schedule.Stats{Runs: rapid.Int64().Draw(rt, "runs"), Streak: rapid.Int().Draw(rt, "streak"),
				LastError: text.Draw(rt, "last error"), LastRun: stamp.Draw(rt, "last run")},
			Created: stamp.Draw(rt, "created"), Updated: stamp.Draw(rt, "updated"),
		}
		if rapid.Bool().Draw(rt, "leased") {
			j.Lease = schedule.JobLease{Owner: text.Draw(rt, "owner"), Until: stamp.Draw(rt, "until")}
		}
		if j.Lease.Owner == "" || j.Lease.Until.IsZero() {
			j.Lease = schedule.JobLease{}
		}
		fits := func(t time.Time) bool { y := t.UTC().Year(); return y >= -4712 && y <= 294275 }
		isName := func(s string) bool { return checkpoint.CheckName("name", s) == nil }
		valid := isName(j.Provider) && isName(j.Stream) && (j.Lease.Owner == "" || isName(j.Lease.Owner)) &&
			fits(j.NextRun) && fits(j.Stats.LastRun) && fits(j.Lease.Until) && fits(j.Created) && fits(j.Updated)
		got, err := js.Upsert(ctx, j)
		if !valid {
			if !errors.Is(err, schedule.ErrInvalid) {
				rt.Fatalf("Upsert(%+v): %v, want ErrInvalid", j, err)
			}
			if list, err := js.List(ctx, schedule.Query{Provider: j.Provider}); !storable(j.Provider) && (err != nil || len(list) != 0) {
				rt.Fatalf("List by provider %q after a rejected Upsert: %d jobs, %v; want none", j.Provider, len(list), err)
			}
			return
		}
		if err != nil {
			rt.Fatalf("Upsert(%+v): %v", j, err)
		}
		want := j
		want.ID, want.Version = got.ID, 1
		for _, p := range []*time.Time{&want.NextRun, &want.Stats.LastRun, &want.Lease.Until, &want.Created, &want.Updated} {
			*p = p.Truncate(time.Microsecond)
		}
		want.Stats.LastError = strings.ReplaceAll(strings.ToValidUTF8(j.Stats.LastError, "\uFFFD"), "\x00", "")
		for what, g := range map[string]func() (schedule.Job, error){
			"Upsert": func() (schedule.Job, error) { return got, nil },
			"Get":    func() (schedule.Job, error) { return js.Get(ctx, got.ID) },
		} {
			g, err := g()
			if err != nil {
				rt.Fatalf("%s: %v", what, err)
			}
			if d := cmp.Diff(want, g, cmpopts.EquateEmpty()); d != "" {
				rt.Fatalf("%s returned (-want +got):\n%s", what, d)
			}
		}
	})
}

// storable is what PostgreSQL stores as text: valid UTF-8 without NUL.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// TestJobStoreNotMigrated: a job store whose schema was never migrated
// fails every method with ErrNotMigrated.
func TestJobStoreNotMigrated(t *testing.T) {
	t.Parallel()
	s, err := pgstore.New(testPool(t), pgstore.Config{Schema: freshSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	js, ctx := s.Jobs(), t.Context()
	j := schedule.Job{Provider: "p", Kind: schedule.KindRefresh, Stream: "s", State: schedule.StateIdle}
	_, errUpsert := js.Upsert(ctx, j)
	_, errGet := js.Get(ctx, 1)
	_, errList := js.List(ctx, schedule.Query{})
	j.ID, j.Version = 1, 1
	_, errUpdate := js.Update(ctx, j)
	errDelete := js.Delete(ctx, 1)
	_, errClaim := js.Claim(ctx, jobEpoch, "o", time.Minute, 1, schedule.ClaimFilter{})
	for i, err := range []error{errUpsert, errGet, errList, errUpdate, errDelete, errClaim} {
		if !errors.Is(err, pgstore.ErrNotMigrated) {
			t.Errorf("method %d on an unmigrated schema: %v, want ErrNotMigrated", i, err)
		}
	}
}
