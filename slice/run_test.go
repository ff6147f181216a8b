package slice_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

var (
	catchUp = checkpoint.Key{Stream: stream, Mode: checkpoint.CatchUp}
	steady  = checkpoint.Key{Stream: stream, Mode: checkpoint.SteadyState}
)

// run runs r with an unbounded budget and fails the test on an error.
func run(tb tb, r *slice.Runner[rec]) slice.Report {
	tb.Helper()
	rep, err := r.Run(context.Background(), nil)
	if err != nil {
		tb.Fatalf("Run: %v (report %+v)", err, rep)
	}
	return rep
}

// assertFree fails unless the stream's lease can be taken (it was released).
func assertFree(tb tb, st checkpoint.Store) {
	tb.Helper()
	l, err := st.Acquire(context.Background(), stream, "probe", time.Minute)
	if err != nil {
		tb.Fatalf("lease not released after the run: %v", err)
	}
	if err := st.Release(context.Background(), l); err != nil {
		tb.Fatalf("Release(probe): %v", err)
	}
}

func TestRunCatchesUp(t *testing.T) {
	t.Parallel()
	g := newRig(25, 10)
	rep := run(t, g.runner(t, checkpoint.CatchUp))
	if rep.Slices != 3 || rep.Records != 25 || string(rep.Cursor) != "25" || rep.Reason != "" || rep.Yielded || len(rep.Gaps) != 0 {
		t.Fatalf("report %+v: want 3 slices, 25 records, cursor 25, no reason, no gap", rep)
	}
	if err := g.sink.exactly(25); err != nil {
		t.Fatal(err)
	}
	if cp := g.store.load(t, catchUp); string(cp.Cursor) != "25" || cp.Version != 3 {
		t.Fatalf("checkpoint %+v: want cursor 25 at version 3", cp)
	}
	assertFree(t, g.store)

	// A second run has nothing to do and fetches nothing.
	before := g.src.fetches.Load()
	if rep := run(t, g.runner(t, checkpoint.CatchUp)); rep.Slices != 0 || string(rep.Cursor) != "25" {
		t.Fatalf("second run %+v: want 0 slices at cursor 25", rep)
	}
	if g.src.fetches.Load() != before {
		t.Fatalf("a caught-up run fetched")
	}
}

func TestRunYieldsWhenLeased(t *testing.T) {
	t.Parallel()
	g := newRig(10, 5)
	if _, err := g.store.Acquire(context.Background(), stream, "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	rep, err := g.runner(t, checkpoint.CatchUp).Run(context.Background(), nil)
	if err != nil || !rep.Yielded || rep.Slices != 0 {
		t.Fatalf("Run on a leased stream = %+v, %v: want a yield and no error", rep, err)
	}
	if g.prov.calls.Load() != 0 || g.store.load(t, catchUp).Version != 0 {
		t.Fatalf("a yielded run called the provider or committed")
	}
}

func TestRunDefersOnBudgetExhaustion(t *testing.T) {
	t.Parallel()
	for _, reason := range []forage.Reason{forage.ReasonRequestCap, forage.ReasonDeadline} {
		g := newRig(50, 10)
		g.prov.stop = stopAfter(2, reason, time.Time{})
		rep, err := g.runner(t, checkpoint.CatchUp).Run(context.Background(), nil)
		if err != nil {
			t.Fatalf("%s: Run error %v: budget exhaustion is not an error", reason, err)
		}
		if rep.Reason != reason || rep.Slices != 2 || string(rep.Cursor) != "20" || !rep.Until.IsZero() {
			t.Fatalf("%s: report %+v: want reason %s after 2 slices at cursor 20", reason, rep, reason)
		}
		gaps := pending(t, g.store, catchUp)
		if len(gaps) != 1 || len(rep.Gaps) != 1 || gaps[0].ID != rep.Gaps[0].ID {
			t.Fatalf("%s: pending gaps %+v, report gaps %+v: want the one gap", reason, gaps, rep.Gaps)
		}
		if g0 := gaps[0]; g0.Key != catchUp || string(g0.Cursor) != "20" || g0.Reason != string(reason) || !g0.Range.IsZero() {
			t.Fatalf("%s: gap %+v: want key %v, the last committed cursor 20, the reason, no range", reason, g0, catchUp)
		}
		assertFree(t, g.store)
	}
}

func TestRunChecksTheBudgetAtSliceBoundaries(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	now := t0
	b, err := budget.NewRun(budget.Envelope{Deadline: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	// Each slice takes 25s on the runner's clock: the third boundary is past
	// the deadline. The slice in flight at the deadline is not torn.
	g.sink.delay = func() time.Duration { now = now.Add(25 * time.Second); return 0 }
	r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Now = func() time.Time { return now } })
	rep, err := r.Run(context.Background(), b)
	if err != nil || rep.Reason != forage.ReasonDeadline || rep.Slices != 3 || string(rep.Cursor) != "30" {
		t.Fatalf("Run = %+v, %v: want a deadline stop after 3 whole slices at cursor 30", rep, err)
	}
}

func TestRunDefersOnSourcePressure(t *testing.T) {
	t.Parallel()
	until := t0.Add(time.Hour)
	for _, reason := range []forage.Reason{forage.ReasonThrottled, forage.ReasonUnavailable, forage.ReasonCircuitOpen, forage.ReasonBanned} {
		g := newRig(50, 10)
		g.prov.stop = stopAfter(1, reason, until)
		rep, err := g.runner(t, checkpoint.SteadyState).Run(context.Background(), nil)
		if err != nil {
			t.Fatalf("%s: Run error %v: source pressure is not an error", reason, err)
		}
		if rep.Reason != reason || !rep.Until.Equal(until) || rep.Slices != 1 || len(rep.Gaps) != 1 {
			t.Fatalf("%s: report %+v: want reason %s until %v after 1 slice, one gap", reason, rep, reason, until)
		}
		if g0 := rep.Gaps[0]; g0.Key != steady || string(g0.Cursor) != "10" || g0.Reason != string(reason) {
			t.Fatalf("%s: gap %+v: want %v at cursor 10", reason, g0, steady)
		}
	}
}

// TestRunReportsWhatTheProviderSaid: a run stopped by the provider keeps
// its stop whole in the report, with the last answer's status and error:
// the scheduler's job error said "unavailable" and nothing of the 503 or
// of what came with it.
func TestRunReportsWhatTheProviderSaid(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	said := errors.New("HTTP 503: down for maintenance")
	stop := &budget.Error{Reason: forage.ReasonUnavailable, Status: 503, Err: said, Until: t0.Add(time.Minute)}
	calls := 0
	g.prov.stop = func() *budget.Error {
		if calls++; calls > 1 {
			return stop
		}
		return nil
	}
	rep, err := g.runner(t, checkpoint.SteadyState).Run(context.Background(), nil)
	if err != nil || rep.Stop == nil || rep.Stop.Status != 503 || !errors.Is(rep.Stop, said) || rep.Reason != forage.ReasonUnavailable {
		t.Fatalf("Run = %+v, %v: want a source-pressure stop whose Stop says 503 and what came with it", rep, err)
	}
	g.prov.stop = nil
	if rep, err := g.runner(t, checkpoint.SteadyState).Run(context.Background(), nil); err != nil || rep.Stop != nil {
		t.Fatalf("Run = %+v, %v: want no Stop for a run that finished", rep, err)
	}
}

// TestRunPermanentErrorIsAnError: a permanent provider error ends the run
// with the error, keeps the checkpoint at the last commit, and records a
// gap there whose reason names the error, so the hole after it never
// passes for the end of the data; the next run that passes the cursor
// resolves it.
func TestRunPermanentErrorIsAnError(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	g.prov.stop = stopAfter(1, forage.ReasonPermanent, time.Time{})
	rep, err := g.runner(t, checkpoint.CatchUp).Run(context.Background(), nil)
	if !errors.Is(err, budget.ErrStopped) || rep.Reason != forage.ReasonPermanent {
		t.Fatalf("Run = %+v, %v: want an error wrapping budget.ErrStopped and reason permanent", rep, err)
	}
	gaps := pending(t, g.store, catchUp)
	if len(gaps) != 1 || string(gaps[0].Cursor) != "10" || !strings.HasPrefix(gaps[0].Reason, "permanent: ") ||
		len(rep.Gaps) != 1 || string(g.store.load(t, catchUp).Cursor) != "10" {
		t.Fatalf("gaps %+v, report %+v: want one permanent gap at the last commit (10), the checkpoint kept", gaps, rep)
	}
	assertFree(t, g.store)
	g.prov.stop = nil
	if _, err := g.runner(t, checkpoint.CatchUp).Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if gaps := pending(t, g.store, catchUp); len(gaps) != 0 {
		t.Fatalf("gaps %+v after a run that passed the cursor: want none", gaps)
	}
}

// TestGapReasonIsSafe: a provider's message with control characters, a
// secret in a URL and any length becomes a gap reason every store takes.
func TestGapReasonIsSafe(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		msg := rapid.String().Draw(rt, "msg") + " https://x.example/api?apikey=SECRET&sig=1 " + rapid.StringN(0, 2000, -1).Draw(rt, "tail")
		r := slice.GapReasonForTest(forage.ReasonPermanent, errors.New(msg))
		if err := checkpoint.CheckName("Gap.Reason", r); err != nil {
			rt.Fatalf("reason %q: %v", r, err)
		}
		if strings.Contains(r, "SECRET") {
			rt.Fatalf("reason %q holds the secret", r)
		}
		if !strings.HasPrefix(r, "permanent: ") {
			rt.Fatalf("reason %q does not start with the stop's reason", r)
		}
	})
}

func TestRunSinkFailureKeepsCheckpoint(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	g.sink.failAt = 3
	rep, err := g.runner(t, checkpoint.CatchUp).Run(context.Background(), nil)
	if !errors.Is(err, errInjected) || rep.Slices != 2 {
		t.Fatalf("Run = %+v, %v: want the sink error after 2 slices", rep, err)
	}
	if cp := g.store.load(t, catchUp); string(cp.Cursor) != "20" {
		t.Fatalf("checkpoint %q after a failed write of slice 3: want 20", cp.Cursor)
	}
	if len(pending(t, g.store, catchUp)) != 0 {
		t.Fatalf("a sink failure wrote a gap")
	}
	assertFree(t, g.store)
	if rep := run(t, g.runner(t, checkpoint.CatchUp)); string(rep.Cursor) != "50" {
		t.Fatalf("rerun %+v: want it to finish at 50", rep)
	}
	if err := g.sink.exactly(50); err != nil {
		t.Fatal(err)
	}
}

func TestRunRejectsInvalidPage(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	g.src.badNext = []byte{}
	_, err := g.runner(t, checkpoint.CatchUp).Run(context.Background(), nil)
	if !errors.Is(err, slice.ErrInvalidPage) {
		t.Fatalf("Run with an empty Page.Next = %v, want ErrInvalidPage", err)
	}
	if g.sink.writes != 0 || g.store.load(t, catchUp).Version != 0 {
		t.Fatalf("an invalid page was written or committed")
	}
}

// onePage is a dataset of one page whose provider gives no next cursor.
type onePage struct{}

func (onePage) Next(_ context.Context, c []byte, _ checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{After: c}, true, nil
}

func (onePage) Fetch(context.Context, slice.Slice) (slice.Page[rec], forage.Outcome) {
	return slice.Page[rec]{Records: []rec{{Key: 1}}, Last: true}, forage.Outcome{Status: 200}
}

// TestALastPageWithoutNextSaysWhatToSet: a one-page dataset (next: null,
// has_more: false) read into a Page with no Next but Last is rejected, and
// the error tells the host what Next must be on a last page. Before, it
// said only that Next must not be empty, and a host had to guess.
func TestALastPageWithoutNextSaysWhatToSet(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	r := g.runner(t, checkpoint.SteadyState, func(c *slice.Config[rec]) { c.Source = onePage{} })
	_, err := r.Run(context.Background(), nil)
	if !errors.Is(err, slice.ErrInvalidPage) || !strings.Contains(err.Error(), "last page") {
		t.Fatalf("Run = %v; want ErrInvalidPage saying what a last page's Next must be", err)
	}
}

// emptyStart is a stream with nothing yet: every fetch answers no records
// and the cursor it was asked after, empty at the very start.
type emptyStart struct{}

func (emptyStart) Next(_ context.Context, cursor []byte, _ checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{After: cursor}, true, nil
}

func (emptyStart) Fetch(_ context.Context, sl slice.Slice) (slice.Page[rec], forage.Outcome) {
	return slice.Page[rec]{Next: sl.After}, forage.Outcome{Status: 200}
}

// TestAnEmptyStreamAtItsStartIsCaughtUp: a stream whose provider has
// nothing yet answers its first slice with no records and the empty cursor
// it began at. That is no progress, so the run is caught up, with nothing
// committed; it was an ErrInvalidPage failure (and under the scheduler a
// failed job, backed off for up to an hour), because an empty Next was
// refused even where it is the slice's own After.
func TestAnEmptyStreamAtItsStartIsCaughtUp(t *testing.T) {
	t.Parallel()
	store := newStore(nil)
	r, err := slice.New(slice.Config[rec]{Stream: stream, Mode: checkpoint.SteadyState, Store: store,
		Provider: &fakeProvider{}, Source: emptyStart{}, Sink: newSink()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		rep, err := r.Run(context.Background(), nil)
		if err != nil || rep.Slices != 0 || rep.Reason != "" || len(rep.Gaps) != 0 {
			t.Fatalf("run %d of an empty stream: %+v, %v; want caught up: no error, no slice, no stop", i+1, rep, err)
		}
	}
	if cp := store.load(t, steady); cp.Version != 0 {
		t.Fatalf("an empty stream committed %+v", cp)
	}
}

// TestRunStopsAtACursorThatGoesBack: a Source whose page after record 30
// says Next is record 10's cursor (an old token handed back) is a broken
// source: the run stops with ErrInvalidPage, that page unwritten, the
// checkpoint at 30. Before, each such cycle was committed and the run went
// round it until its budget ran out (574,000 fetches in a minute, a
// record written 191,000 times, the report naming only the deadline), and
// under the scheduler every run counted as a success.
func TestRunStopsAtACursorThatGoesBack(t *testing.T) {
	t.Parallel()
	for name, rewind := range map[string]map[int]int{"to an earlier cursor": {30: 10}, "to the one it started at": {30: 0}} {
		t.Run(name, func(t *testing.T) {
			g := newRig(50, 10)
			g.src.rewind = rewind
			g.src.outcome = func(slice.Slice) forage.Outcome {
				if g.src.fetches.Load() > 100 {
					return forage.Outcome{Status: 400} // a bound for a run that goes round the cycle
				}
				return forage.Outcome{Status: 200}
			}
			if _, err := g.store.Commit(context.Background(), catchUp, cursor(0), 0, checkpoint.Lease{}); err != nil {
				t.Fatal(err)
			}
			rep, err := g.runner(t, checkpoint.CatchUp).Run(context.Background(), nil)
			if !errors.Is(err, slice.ErrInvalidPage) || string(rep.Cursor) != "30" || g.src.fetches.Load() != 4 {
				t.Fatalf("Run = %+v, %v after %d fetches; want ErrInvalidPage at cursor 30 after 4", rep, err, g.src.fetches.Load())
			}
			if cp := g.store.load(t, catchUp); string(cp.Cursor) != "30" {
				t.Fatalf("checkpoint %q, want 30", cp.Cursor)
			}
			for k, n := range g.sink.deliveries {
				if n != 1 {
					t.Fatalf("record %d written %d times, want once", k, n)
				}
			}
		})
	}
}

// TestRunWritesNothingOnceStopped: a run whose context ends while a fetch
// is under way (a job paused, a provider paused, the scheduler stopping)
// stops at that slice boundary: the page the fetch returned is not written
// (the next run fetches it again). Before, it was written with the ended
// context and its commit then refused: durable but not committed.
func TestRunWritesNothingOnceStopped(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.src.outcome = func(s slice.Slice) forage.Outcome {
		if position(s.After) == 20 {
			cancel() // stopped while the page was on its way
		}
		return forage.Outcome{Status: 200}
	}
	rep, err := g.runner(t, checkpoint.CatchUp).Run(ctx, nil)
	if !errors.Is(err, context.Canceled) || string(rep.Cursor) != "20" {
		t.Fatalf("Run = %+v, %v; want context.Canceled at cursor 20", rep, err)
	}
	if _, ok := g.sink.data[20]; ok || len(g.sink.data) != 20 {
		t.Fatalf("the sink holds %d records (record 20: %v); want the 20 committed, not the page fetched as the run stopped", len(g.sink.data), ok)
	}
}

// TestRunStopsWhenSourceMakesNoProgress: a page with records whose Next is
// the cursor it was fetched after is a broken Source (ErrInvalidPage),
// nothing of it written: it ended the run as caught up, its records
// written, so that every later run wrote them again and counted them as
// collected.
func TestRunStopsWhenSourceMakesNoProgress(t *testing.T) {
	t.Parallel()
	for _, last := range []bool{false, true} {
		g := newRig(50, 10)
		g.src.badNext = []byte("0") // every page says: at record 0
		g.src.lastNoProgress = last
		// The first page moves the cursor from the start to "0"; the second
		// one (of this run, or, when each page is the last, of the next)
		// does not move it.
		rep, err := g.runner(t, checkpoint.SteadyState).Run(context.Background(), nil)
		slices := 1
		if last {
			if err != nil || rep.Slices != 1 {
				t.Fatalf("first run: %+v, %v: want the first page, committed", rep, err)
			}
			rep, err = g.runner(t, checkpoint.SteadyState).Run(context.Background(), nil)
			slices = 0
		}
		if !errors.Is(err, slice.ErrInvalidPage) || rep.Slices != slices || string(rep.Cursor) != "0" || g.store.load(t, steady).Version != 1 || g.src.fetches.Load() != 2 {
			t.Fatalf("last %v: report %+v, %v after %d fetches: want 1 committed slice, then ErrInvalidPage", last, rep, err, g.src.fetches.Load())
		}
		if len(g.sink.data) != 10 {
			t.Fatalf("last %v: the sink holds %d records; want the first page's 10 alone", last, len(g.sink.data))
		}
	}
}

func TestRunResolvesCursorGapsItPasses(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	g.prov.stop = stopAfter(1, forage.ReasonRequestCap, time.Time{})
	first := run(t, g.runner(t, checkpoint.CatchUp))
	g.prov.stop = stopAfter(1, forage.ReasonThrottled, time.Time{})
	second := run(t, g.runner(t, checkpoint.CatchUp))
	gaps := pending(t, g.store, catchUp)
	if len(gaps) != 1 || gaps[0].ID != second.Gaps[0].ID || second.Resolved != 1 {
		t.Fatalf("after two stopped runs: pending %+v, report %+v: the newer gap supersedes the older", gaps, second)
	}
	if first.Gaps[0].ID == second.Gaps[0].ID {
		t.Fatalf("the two runs reported the same gap")
	}
	g.prov.stop = nil
	third := run(t, g.runner(t, checkpoint.CatchUp))
	if third.Resolved != 1 || len(pending(t, g.store, catchUp)) != 0 {
		t.Fatalf("a run that caught up left gaps pending: %+v", third)
	}
}

func TestRunRecordsCoverage(t *testing.T) {
	t.Parallel()
	g := newRig(25, 10)
	run(t, g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Series = "s" }))
	cov, err := g.store.Coverage(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	want := checkpoint.Range{Start: t0, End: g.src.at(25)}
	if len(cov.Ranges()) != 1 || !cov.Covers(want) {
		t.Fatalf("coverage %v, want %v", cov, want)
	}
}

func TestRunCatchUpLeavesSteadyStateAlone(t *testing.T) {
	t.Parallel()
	g := newRig(30, 10)
	run(t, g.runner(t, checkpoint.CatchUp))
	if cp := g.store.load(t, steady); cp.Version != 0 {
		t.Fatalf("a catch-up run moved the steady-state bookmark: %+v", cp)
	}
	for _, c := range g.store.commitLog() {
		if c.key != catchUp {
			t.Fatalf("a catch-up run committed %v", c.key)
		}
	}
}

func TestRunReleasesLeaseWhenCancelled(t *testing.T) {
	t.Parallel()
	g := newRig(50, 10)
	ctx, cancel := context.WithCancel(context.Background())
	g.src.outcome = func(s slice.Slice) forage.Outcome {
		if bytes.Equal(s.After, cursor(20)) {
			cancel()
		}
		return forage.Outcome{Status: 200}
	}
	_, err := g.runner(t, checkpoint.CatchUp).Run(ctx, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel = %v, want context.Canceled", err)
	}
	assertFree(t, g.store)
	if len(pending(t, g.store, catchUp)) != 0 {
		t.Fatalf("a cancelled run wrote a gap")
	}
}

// feed is a "list events since a token" Source: pages of up to page
// events after a token (the count so far, as the rig's checks read it), the last one flagged Last when last is
// set (has_more false), as cursor APIs say it.
type feed struct {
	events, page int
	last         bool
	fetches      atomic.Int64
}

func (f *feed) Next(_ context.Context, c []byte, _ checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{After: c}, true, nil
}

func (f *feed) Fetch(_ context.Context, s slice.Slice) (slice.Page[rec], forage.Outcome) {
	f.fetches.Add(1)
	from := 0
	if len(s.After) > 0 {
		from, _ = strconv.Atoi(string(s.After))
	}
	to := min(from+f.page, f.events)
	p := slice.Page[rec]{Next: []byte(strconv.Itoa(to)), Last: f.last && to == f.events}
	for k := from; k < to; k++ {
		p.Records = append(p.Records, rec{Key: k, Val: val(k)})
	}
	if to == from && len(s.After) > 0 {
		p.Next = s.After // nothing new
	}
	return p, forage.Outcome{Status: 200}
}

// TestALastPageEndsTheRun: a page the provider says is the last for now
// (Page.Last) is committed and the run is caught up, with no request after
// it; the next run asks once, from its Next. Without it, each run asks once
// more after the last page, and a followed feed is polled all through a
// turn.
func TestALastPageEndsTheRun(t *testing.T) {
	t.Parallel()
	for _, last := range []bool{false, true} {
		g := newRig(0, 10)
		src := &feed{events: 25, page: 10, last: last}
		r := func() *slice.Runner[rec] {
			return g.runner(t, checkpoint.SteadyState, func(c *slice.Config[rec]) { c.Source = src })
		}
		rep := run(t, r())
		want := int64(4) // three pages, and the one that finds nothing new
		if last {
			want = 3
		}
		if rep.Records != 25 || string(rep.Cursor) != "25" || src.fetches.Load() != want {
			t.Fatalf("last %v: report %+v after %d requests; want 25 records, cursor 25, %d requests", last, rep, src.fetches.Load(), want)
		}
		if err := g.sink.exactly(25); err != nil {
			t.Fatal(err)
		}
		src.events = 30 // five more
		rep = run(t, r())
		want += 1 // the five, in one page flagged last
		if !last {
			want++ // and the one after
		}
		if rep.Records != 5 || string(rep.Cursor) != "30" || src.fetches.Load() != want {
			t.Fatalf("last %v: second run %+v after %d requests in all; want 5 records, cursor 30, %d requests", last, rep, src.fetches.Load(), want)
		}
	}
}

// aheadFeed is feed with a Predictor: each page is predicted to end page
// events on, so a run fetches ahead.
type aheadFeed struct {
	feed
	after   atomic.Int64 // fetches after the last event
	planned atomic.Int64 // the furthest cursor a slice was planned after
}

func (f *aheadFeed) Next(ctx context.Context, c []byte, w checkpoint.Range) (slice.Slice, bool, error) {
	if n, _ := strconv.Atoi(string(c)); int64(n) > f.planned.Load() {
		f.planned.Store(int64(n))
	}
	return f.feed.Next(ctx, c, w)
}

func (f *aheadFeed) Expect(s slice.Slice) ([]byte, bool) {
	from, _ := strconv.Atoi(string(s.After))
	return []byte(strconv.Itoa(from + f.page)), true
}

func (f *aheadFeed) Fetch(ctx context.Context, s slice.Slice) (slice.Page[rec], forage.Outcome) {
	if from, _ := strconv.Atoi(string(s.After)); len(s.After) > 0 && from >= f.events {
		f.after.Add(1)
	}
	return f.feed.Fetch(ctx, s)
}

// TestALastPageStopsTheFetchAhead: a run that fetches ahead plans no slice
// after a page flagged Last once it has it (it planned one more, a request
// more, abandoned when the run ended); the slices it had planned ahead
// before the page came may have been sent.
func TestALastPageStopsTheFetchAhead(t *testing.T) {
	t.Parallel()
	g := newRig(0, 10)
	src := &aheadFeed{feed: feed{events: 30, page: 10, last: true}}
	rep := run(t, g.runner(t, checkpoint.SteadyState, func(c *slice.Config[rec]) { c.Source = src; c.Prefetch = 4; c.MaxBatch = 1 }))
	// The four slices after cursor 20 were planned before the page
	// after it (Last) came; planning stops there: nothing after 60.
	if rep.Records != 30 || src.planned.Load() > 60 || src.after.Load() > 4 {
		t.Fatalf("report %+v, a slice planned after cursor %d, %d requests after the page flagged Last; want 30 records, nothing planned past 60, at most the 4 fetched ahead before it",
			rep, src.planned.Load(), src.after.Load())
	}
}

// nilTx is a TxSink whose Commit dereferences its receiver.
type nilTx struct{ n int }

func (x *nilTx) Write(context.Context, slice.Page[rec]) error { return nil }

func (x *nilTx) Commit(context.Context, checkpoint.Key, slice.Page[rec], int64, checkpoint.Lease) (checkpoint.Checkpoint, error) {
	x.n++
	return checkpoint.Checkpoint{}, nil
}

// TestATypedNilTxSinkBesideASinkIsNone: a nil *T as the TxSink beside a
// Sink is no TxSink (New took it for none, and the first commit called it:
// a nil dereference).
func TestATypedNilTxSinkBesideASinkIsNone(t *testing.T) {
	t.Parallel()
	g := newRig(25, 10)
	rep := run(t, g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.TxSink = (*nilTx)(nil) }))
	if rep.Records != 25 {
		t.Fatalf("report %+v: want the 25 records through the Sink", rep)
	}
}

// TestAStoppedRunIsNoFailureInTheLog: a run the host stops (a shutdown, a
// scheduler's turn that ended) logs at Info, not as a failure: every clean
// shutdown logged "slice: run failed ... context canceled" at ERROR, while
// the scheduler counted the same run as interrupted. A run that truly
// failed still logs at ERROR.
func TestAStoppedRunIsNoFailureInTheLog(t *testing.T) {
	t.Parallel()
	for _, stop := range []bool{true, false} {
		g := newRig(50, 10)
		ctx, cancel := context.WithCancel(context.Background())
		g.src.outcome = func(s slice.Slice) forage.Outcome {
			if position(s.After) == 20 {
				if stop {
					cancel()
					return forage.Outcome{Status: 200}
				}
				return forage.Outcome{Status: 401}
			}
			return forage.Outcome{Status: 200}
		}
		var logs bytes.Buffer
		_, err := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) {
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		}).Run(ctx, nil)
		cancel()
		if err == nil {
			t.Fatalf("stop %v: Run returned nil; want an error", stop)
		}
		if failed := strings.Contains(logs.String(), "level=ERROR"); failed == stop {
			t.Errorf("stop %v: ERROR in the log = %v; want %v:\n%s", stop, failed, !stop, logs.String())
		}
	}
}
