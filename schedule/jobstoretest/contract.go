package jobstoretest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
)

var contractTests = []test{
	{"UpsertValidates", testUpsertValidates},
	{"NameRule", testNameRule},
	{"ClaimValidates", testClaimValidates},
	{"DoneContextChangesNothing", testDoneContext},
}

func testUpsertValidates(t *testing.T, e *env) {
	for i, change := range []func(*schedule.Job){
		func(j *schedule.Job) { j.Provider = "" },
		func(j *schedule.Job) { j.Stream = "" },
		func(j *schedule.Job) { j.Kind = "" },
		func(j *schedule.Job) { j.Kind = "sideways" },
		func(j *schedule.Job) { j.State = "" },
		func(j *schedule.Job) { j.State = "asleep" },
		func(j *schedule.Job) { j.Priority = -1 },
		func(j *schedule.Job) { j.Priority = 1001 },
		func(j *schedule.Job) { j.Interval = -time.Second },
		func(j *schedule.Job) { j.Lease = schedule.JobLease{Owner: "o"} },
	} {
		j := job("p", schedule.KindIncremental, "s", at(0))
		change(&j)
		_, err := e.s.Upsert(e.ctx, j)
		wantErr(t, fmt.Sprintf("case %d: Upsert(%+v)", i, j), err, schedule.ErrInvalid)
	}
	all, err := e.s.List(e.ctx, schedule.Query{})
	wantErr(t, "List", err, nil)
	if len(all) != 0 {
		t.Fatalf("%d jobs stored after only invalid upserts, want 0", len(all))
	}
	// The bounds themselves are valid.
	j := job("p", schedule.KindIncremental, "s", at(0))
	j.Priority = 1000 // the largest valid priority
	e.insert(j)
	j = job("p", schedule.KindIncremental, "t", at(0))
	j.Priority, j.Interval = 0, 0
	e.insert(j)
}

func testClaimValidates(t *testing.T, e *env) {
	e.insert(job("p", schedule.KindIncremental, "s", at(0)))
	for _, tc := range []struct {
		owner string
		ttl   time.Duration
		limit int
		f     schedule.ClaimFilter
	}{
		{"", time.Minute, 1, schedule.ClaimFilter{}},
		{"o", 0, 1, schedule.ClaimFilter{}},
		{"o", -time.Second, 1, schedule.ClaimFilter{}},
		{"o", time.Minute, 0, schedule.ClaimFilter{}},
		{"o", time.Minute, 1, schedule.ClaimFilter{PerProvider: -1}},
		{"o", time.Minute, 1, schedule.ClaimFilter{Aging: -time.Second}},
		{"o", time.Minute, 1, schedule.ClaimFilter{Aging: schedule.MaxAging + 1}},
	} {
		_, err := e.s.Claim(e.ctx, at(10), tc.owner, tc.ttl, tc.limit, tc.f)
		wantErr(t, fmt.Sprintf("Claim(owner %q, ttl %v, limit %d, %+v)", tc.owner, tc.ttl, tc.limit, tc.f), err, schedule.ErrInvalid)
	}
	if got := e.claim(at(10), "o", 1, schedule.ClaimFilter{}); len(got) != 1 {
		t.Fatalf("valid Claim after the invalid ones took %v, want the job (nothing was leased)", got)
	}
}

func testDoneContext(t *testing.T, e *env) {
	j := e.insert(job("p", schedule.KindIncremental, "s", at(0)))
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a done context: %v, want an error wrapping context.Canceled", op, err)
		}
	}
	_, err := e.s.Upsert(ctx, job("p", schedule.KindIncremental, "t", at(0)))
	check("Upsert", err)
	_, err = e.s.Get(ctx, j.ID)
	check("Get", err)
	_, err = e.s.List(ctx, schedule.Query{})
	check("List", err)
	u := j
	u.State = schedule.StatePaused
	_, err = e.s.Update(ctx, u)
	check("Update", err)
	check("Delete", e.s.Delete(ctx, j.ID))
	_, err = e.s.Claim(ctx, at(10), "o", time.Minute, 1, schedule.ClaimFilter{})
	check("Claim", err)
	diff(t, "job after calls with a done context", j, e.get(j.ID))
	all, err := e.s.List(e.ctx, schedule.Query{})
	wantErr(t, "List", err, nil)
	if len(all) != 1 {
		t.Fatalf("%d jobs after a cancelled Upsert, want 1", len(all))
	}
}

// badNames break the name rule of every forage store
// ([checkpoint.CheckName]): invalid UTF-8, NUL, an escape sequence, a
// newline, a C1 control, and one byte over [checkpoint.MaxNameLen].
var badNames = []string{
	"binance/BTC\xff", "p\x00", "a\x1b[31mred", "two\nlines", "c1\u0085", strings.Repeat("n", checkpoint.MaxNameLen+1),
}

// testNameRule: Upsert and Update refuse a provider, stream or lease owner
// that breaks the name rule with ErrInvalid (every store the same, so a
// job one store holds any other can), and keep what the rule allows.
func testNameRule(t *testing.T, e *env) {
	for i, bad := range badNames {
		for _, change := range []func(*schedule.Job){
			func(j *schedule.Job) { j.Provider = bad },
			func(j *schedule.Job) { j.Stream = bad },
			func(j *schedule.Job) { j.Lease = schedule.JobLease{Owner: bad, Until: at(60)} },
		} {
			j := job("p", schedule.KindIncremental, "s", at(0))
			change(&j)
			_, err := e.s.Upsert(e.ctx, j)
			wantErr(t, fmt.Sprintf("name %d: Upsert(%q, %q, owner %q)", i, j.Provider, j.Stream, j.Lease.Owner), err, schedule.ErrInvalid)
		}
	}
	all, err := e.s.List(e.ctx, schedule.Query{})
	wantErr(t, "List", err, nil)
	if len(all) != 0 {
		t.Fatalf("%d jobs stored after only invalid upserts, want 0", len(all))
	}
	j := e.insert(job("p", schedule.KindIncremental, "s", at(0)))
	for i, bad := range badNames {
		c := j
		c.Lease = schedule.JobLease{Owner: bad, Until: at(60)}
		_, err := e.s.Update(e.ctx, c)
		wantErr(t, fmt.Sprintf("name %d: Update(owner %q)", i, bad), err, schedule.ErrInvalid)
	}
	diff(t, "Get after the rejected Updates", j, e.get(j.ID))
	for _, good := range []string{"börse/BTC €", "a b", "\uFFFD", strings.Repeat("n", checkpoint.MaxNameLen)} {
		g := job(good, schedule.KindIncremental, good, at(0))
		g.Lease = schedule.JobLease{Owner: good, Until: at(60)}
		got := e.insert(g)
		if got.Provider != good || got.Stream != good || got.Lease.Owner != good {
			t.Fatalf("Upsert(%q) stored %q, %q, owner %q", good, got.Provider, got.Stream, got.Lease.Owner)
		}
	}
}
