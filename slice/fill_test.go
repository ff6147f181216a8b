package slice_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// span returns the time range of records [i, j).
func (g *rig) span(i, j int) checkpoint.Range {
	return checkpoint.Range{Start: g.src.at(i), End: g.src.at(j)}
}

// hasKeys reports the first key in [i, j) missing from the sink, or -1.
func (s *memSink) missingIn(i, j int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := i; k < j; k++ {
		if _, ok := s.data[k]; !ok {
			return k
		}
	}
	return -1
}

func TestFillFetchesRangesWithoutMovingTheCheckpoint(t *testing.T) {
	t.Parallel()
	g := newRig(100, 10)
	r := g.runner(t, checkpoint.CatchUp)
	rep, err := r.Fill(context.Background(), nil, []checkpoint.Range{g.span(70, 95), {}, g.span(5, 12)})
	if err != nil || rep.Reason != "" || rep.Records != 32 || rep.Slices != 4 {
		t.Fatalf("Fill = %+v, %v: want 32 records in 4 slices", rep, err)
	}
	if k := g.sink.missingIn(70, 95); k >= 0 {
		t.Fatalf("record %d of the first range not filled", k)
	}
	if k := g.sink.missingIn(5, 12); k >= 0 {
		t.Fatalf("record %d of the second range not filled", k)
	}
	if len(g.sink.data) != 32 || g.store.load(t, catchUp).Version != 0 {
		t.Fatalf("fill wrote %d records (want 32) or moved the checkpoint", len(g.sink.data))
	}
	assertFree(t, g.store)
}

func TestFillSkipsWhatIsCovered(t *testing.T) {
	t.Parallel()
	g := newRig(100, 10)
	r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Series = "s" })
	if err := g.store.AddCoverage(context.Background(), "s", g.span(20, 40)); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Fill(context.Background(), nil, []checkpoint.Range{g.span(10, 50)})
	if err != nil || rep.Records != 20 {
		t.Fatalf("Fill = %+v, %v: want only the 20 uncovered records", rep, err)
	}
	if k := g.sink.missingIn(20, 40); k != 20 {
		t.Fatalf("the covered part was fetched (first missing %d, want 20)", k)
	}
	cov, _ := g.store.Coverage(context.Background(), "s")
	if !cov.Covers(g.span(10, 50)) {
		t.Fatalf("coverage %v after the fill, want it to cover %v", cov, g.span(10, 50))
	}
}

func TestFillStopLeavesRangeGapsThatDrainFinishes(t *testing.T) {
	t.Parallel()
	g := newRig(100, 10)
	g.prov.stop = stopAfter(2, forage.ReasonRequestCap, time.Time{})
	r := g.runner(t, checkpoint.CatchUp)
	rep, err := r.Fill(context.Background(), nil, []checkpoint.Range{g.span(0, 30), g.span(50, 60), g.span(80, 85)})
	if err != nil || rep.Reason != forage.ReasonRequestCap || rep.Slices != 2 || len(rep.Gaps) != 3 {
		t.Fatalf("Fill = %+v, %v: want request_cap after 2 slices and 3 range gaps", rep, err)
	}
	if g0 := rep.Gaps[0]; g0.Range != g.span(0, 30) || string(g0.Cursor) != "20" || g0.Reason != "request_cap" {
		t.Fatalf("first gap %+v: want the range [0, 30) resumed after cursor 20", g0)
	}
	if g1 := rep.Gaps[1]; g1.Range != g.span(50, 60) || len(g1.Cursor) != 0 {
		t.Fatalf("second gap %+v: want the untouched range [50, 60)", g1)
	}

	g.prov.stop = nil
	fetches := g.src.fetches.Load()
	drep, err := r.Drain(context.Background(), nil)
	if err != nil || drep.Reason != "" || drep.Resolved != 3 || len(pending(t, g.store, catchUp)) != 0 {
		t.Fatalf("Drain = %+v, %v: want every gap resolved", drep, err)
	}
	if got := g.src.fetches.Load() - fetches; got != 3 {
		t.Fatalf("drain made %d fetches, want 3: it resumes after the gap's cursor", got)
	}
	for _, s := range [][2]int{{0, 30}, {50, 60}, {80, 85}} {
		if k := g.sink.missingIn(s[0], s[1]); k >= 0 {
			t.Fatalf("record %d of [%d, %d) missing after the drain", k, s[0], s[1])
		}
	}
	if drep.Cursor != nil || g.store.load(t, catchUp).Version != 0 {
		t.Fatalf("a drain of range gaps only ran the stream")
	}
}

func TestDrainPagesPastTheBatchSize(t *testing.T) {
	t.Parallel()
	g := newRig(100, 10)
	for i := range 7 {
		if _, err := g.store.AddGap(context.Background(), checkpoint.Gap{Key: catchUp, Range: g.span(i*10, i*10+5), Reason: "detail"}); err != nil {
			t.Fatal(err)
		}
	}
	// A gap of the other mode is not this runner's to drain.
	if _, err := g.store.AddGap(context.Background(), checkpoint.Gap{Key: steady, Range: g.span(90, 95), Reason: "detail"}); err != nil {
		t.Fatal(err)
	}
	r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.GapBatch = 2 })
	rep, err := r.Drain(context.Background(), nil)
	if err != nil || rep.Resolved != 7 || rep.Records != 35 || len(pending(t, g.store, catchUp)) != 0 {
		t.Fatalf("Drain with batch 2 = %+v, %v: want all 7 gaps drained (35 records)", rep, err)
	}
	if len(pending(t, g.store, steady)) != 1 {
		t.Fatalf("the steady-state gap was touched")
	}
}

func TestDrainStopsOnSourcePressure(t *testing.T) {
	t.Parallel()
	g := newRig(100, 10)
	for i := range 5 {
		if _, err := g.store.AddGap(context.Background(), checkpoint.Gap{Key: catchUp, Range: g.span(i*10, i*10+10), Reason: "detail"}); err != nil {
			t.Fatal(err)
		}
	}
	until := t0.Add(time.Minute)
	g.prov.stop = stopAfter(2, forage.ReasonCircuitOpen, until)
	r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.GapBatch = 1 })
	rep, err := r.Drain(context.Background(), nil)
	if err != nil || rep.Reason != forage.ReasonCircuitOpen || !rep.Until.Equal(until) || rep.Resolved != 3 {
		t.Fatalf("Drain = %+v, %v: want circuit_open until %v after 2 gaps filled (and the third superseded)", rep, err, until)
	}
	// Left: the third gap's remainder (re-recorded) and the two untouched.
	if left := pending(t, g.store, catchUp); len(left) != 3 || left[2].Range != g.span(20, 30) || left[2].Reason != "circuit_open" {
		t.Fatalf("pending after the stop: %+v", left)
	}
}

func TestDrainRunsTheStreamForCursorGaps(t *testing.T) {
	t.Parallel()
	g := newRig(40, 10)
	g.prov.stop = stopAfter(1, forage.ReasonDeadline, time.Time{})
	r := g.runner(t, checkpoint.SteadyState)
	if rep := run(t, r); len(rep.Gaps) != 1 {
		t.Fatalf("first run %+v: want a deadline gap", rep)
	}
	g.prov.stop = nil
	rep, err := r.Drain(context.Background(), nil)
	if err != nil || string(rep.Cursor) != "40" || rep.Resolved != 1 || len(pending(t, g.store, steady)) != 0 {
		t.Fatalf("Drain = %+v, %v: want the stream run to 40 and its gap resolved", rep, err)
	}
	if err := g.sink.exactly(40); err != nil {
		t.Fatal(err)
	}
	// Nothing pending: Drain does nothing at all.
	fetches := g.src.fetches.Load()
	if rep, err := r.Drain(context.Background(), nil); err != nil || rep.Slices != 0 || g.src.fetches.Load() != fetches {
		t.Fatalf("Drain with nothing pending = %+v, %v, and fetched", rep, err)
	}
}

// TestPropDrainRecoversEveryRange fills random ranges under random provider
// stops, then drains the gaps left behind, again under random stops and
// store failures. At every step each requested record is either in the
// sink or inside a pending range gap (gap bookkeeping never loses work);
// in the end every gap is resolved, every requested record is in the sink,
// nothing outside the ranges was fetched, and the checkpoint never moved.
func TestPropDrainRecoversEveryRange(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		g := newRig(200, rapid.IntRange(1, 10).Draw(t, "page size"))
		now := t0
		g.store = newStore(func() time.Time { return now })
		var want []checkpoint.Range
		wanted := map[int]bool{}
		for range rapid.IntRange(1, 5).Draw(t, "ranges") {
			a := rapid.IntRange(0, 190).Draw(t, "from")
			b := rapid.IntRange(a+1, min(a+40, 200)).Draw(t, "to")
			want = append(want, g.span(a, b))
			for k := a; k < b; k++ {
				wanted[k] = true
			}
		}
		seed := rapid.Uint64().Draw(t, "seed")
		stops := newChaos(seed, rapid.Float64Range(0, 0.4).Draw(t, "stops"))
		g.prov.stop = func() *budget.Error {
			if !stops.hit() {
				return nil
			}
			return &budget.Error{Reason: stopReasons[stops.pick(6)]} // exhaustion or pressure
		}
		r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) {
			c.GapBatch, c.Now = rapid.IntRange(1, 4).Draw(t, "batch"), func() time.Time { return now }
		})
		nothingLost := func(step int) {
			g.sink.mu.Lock()
			defer g.sink.mu.Unlock()
			gaps := pending(t, g.store.Store, catchUp)
			for k := range wanted {
				if _, ok := g.sink.data[k]; ok {
					continue
				}
				if !slices.ContainsFunc(gaps, func(gp checkpoint.Gap) bool {
					at := g.src.at(k)
					return !at.Before(gp.Range.Start) && at.Before(gp.Range.End)
				}) {
					t.Fatalf("step %d: record %d is neither in the sink nor in a pending gap %+v", step, k, gaps)
				}
			}
		}
		if _, err := r.Fill(context.Background(), nil, want); err != nil {
			t.Fatalf("Fill: %v", err)
		}
		nothingLost(0)
		g.store.chaos.Store(newChaos(seed+1, rapid.Float64Range(0, 0.2).Draw(t, "store faults")))
		for step := 1; len(pending(t, g.store.Store, catchUp)) > 0; step++ {
			if step > 500 {
				t.Fatalf("gaps still pending after %d drains: %+v", step, pending(t, g.store.Store, catchUp))
			}
			if step > 100 { // the faults must end for the drain to finish
				stops.p, g.store.chaos.Load().p = 0, 0
			}
			now = now.Add(2 * time.Minute) // a lease left by a failed release expires
			rep, err := r.Drain(context.Background(), nil)
			t.Logf("drain %d: %+v, %v", step, rep, err)
			nothingLost(step)
		}
		for k := range 200 {
			if _, ok := g.sink.data[k]; ok != wanted[k] {
				t.Fatalf("record %d: in the sink %v, requested %v", k, ok, wanted[k])
			}
		}
		if g.store.load(t, catchUp).Version != 0 {
			t.Fatalf("a fill moved the checkpoint")
		}
	})
}

// TestGapOfAStopWithoutAnswerNamesTheCause: a stop after attempts that got
// no answer at all (a refused connection, an unknown host) records a gap
// whose reason names the cause, with the URL's query values masked: the
// reason alone ("unavailable") does not say the provider was unreachable.
// A stop after an answer keeps the reason alone.
func TestGapOfAStopWithoutAnswerNamesTheCause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stop *budget.Error
		want string
	}{
		{&budget.Error{Reason: forage.ReasonUnavailable, Err: errors.New(`Get "http://h/k?apikey=S3CRET": dial tcp 127.0.0.1:1: connect: connection refused`)},
			`unavailable: Get "http://h/k?apikey=REDACTED": dial tcp 127.0.0.1:1: connect: connection refused`},
		{&budget.Error{Reason: forage.ReasonThrottled, Status: 429, Err: errors.New("S3CRET body")}, "throttled"},
		// A run's spent clock: the pacer's "next slot after the deadline"
		// is no cause, and a gap reason that carried it could not be
		// grouped by reason.
		{&budget.Error{Reason: forage.ReasonDeadline, Err: fmt.Errorf("gcra: wait would exceed the context deadline (wait 770ms): %w", context.DeadlineExceeded)}, "deadline"},
		{&budget.Error{Reason: forage.ReasonRequestCap, Err: errors.New("cap")}, "request_cap"},
	} {
		g := newRig(40, 10)
		var calls atomic.Int64
		g.prov.stop = func() *budget.Error {
			if calls.Add(1) > 1 {
				return tc.stop
			}
			return nil
		}
		r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Prefetch = slice.NoPrefetch })
		if rep := run(t, r); len(rep.Gaps) != 1 || rep.Gaps[0].Reason != tc.want {
			t.Fatalf("report %+v: want one gap, reason %q", rep, tc.want)
		}
	}
}

// TestFillStopsAtACursorThatGoesBack: a fill (what a gap-fill job runs)
// over a Source whose page after record 30 says Next is record 10's
// cursor stops with ErrInvalidPage. Before, only a stream run caught it:
// a fill went round the cycle until its budget ran out, each turn a
// success under the scheduler (5.9 million fetches in ten minutes; found
// by a review).
func TestFillStopsAtACursorThatGoesBack(t *testing.T) {
	t.Parallel()
	g := newRig(100, 10)
	g.src.rewind = map[int]int{30: 10}
	g.src.outcome = func(slice.Slice) forage.Outcome {
		if g.src.fetches.Load() > 100 {
			return forage.Outcome{Status: 400} // a bound for a fill that goes round the cycle
		}
		return forage.Outcome{Status: 200}
	}
	rep, err := g.runner(t, checkpoint.CatchUp).Fill(context.Background(), nil, []checkpoint.Range{g.span(0, 60)})
	if !errors.Is(err, slice.ErrInvalidPage) || g.src.fetches.Load() > 5 {
		t.Fatalf("Fill = %+v, %v after %d fetches; want ErrInvalidPage within 5", rep, err, g.src.fetches.Load())
	}
}
