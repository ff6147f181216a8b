package slice_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// stopReasons are the stops a provider may return besides success.
var stopReasons = []forage.Reason{
	forage.ReasonRequestCap, forage.ReasonDeadline,
	forage.ReasonThrottled, forage.ReasonUnavailable, forage.ReasonCircuitOpen, forage.ReasonBanned,
	forage.ReasonPermanent,
}

// chaosStops returns a provider stop hook that stops a call with a random
// reason whenever c hits.
func chaosStops(c *chaos) func() *budget.Error {
	return func() *budget.Error {
		if !c.hit() {
			return nil
		}
		return &budget.Error{Reason: stopReasons[c.pick(len(stopReasons))]}
	}
}

// TestPropCheckpointNeverPassesTheSink runs a stream again and again under
// random failures of the Source (plan errors, 503s), the provider (every
// stop reason), the Sink (before or after storing) and the Store (before or
// after applying), while new records keep arriving. At every commit the
// cursor must not pass the last page the sink confirmed, nor any record
// missing from the sink; after the faults stop, re-running yields every
// record exactly once in the sink (at-least-once delivery, exactly-once
// effect) and leaves no gap pending.
//
// It runs with a Sink and with a TxSink (the same sink and store, made one
// transaction, faults rolling the write back): with a TxSink, every record
// is also delivered exactly once, replays included.
func TestPropCheckpointNeverPassesTheSink(t *testing.T) {
	forEachSink(t, propCheckpointNeverPassesTheSink)
}

func propCheckpointNeverPassesTheSink(t *testing.T, tx bool) {
	rapid.Check(t, func(t *rapid.T) {
		g := newRig(rapid.IntRange(0, 40).Draw(t, "records"), rapid.IntRange(1, 8).Draw(t, "page size"))
		g.tx = tx
		now := t0
		clock := func() time.Time { return now }
		g.store = newStore(clock)
		g.store.check = checkSinkGate(g.sink)
		seed := rapid.Uint64().Draw(t, "seed")
		chaoses := []*chaos{
			newChaos(seed, rapid.Float64Range(0, 0.3).Draw(t, "source faults")),
			newChaos(seed+1, rapid.Float64Range(0, 0.3).Draw(t, "provider faults")),
			newChaos(seed+2, rapid.Float64Range(0, 0.3).Draw(t, "sink faults")),
			newChaos(seed+3, rapid.Float64Range(0, 0.2).Draw(t, "store faults")),
		}
		g.src.chaos.Store(chaoses[0])
		g.prov.stop = chaosStops(chaoses[1])
		g.sink.chaos.Store(chaoses[2])
		g.store.chaos.Store(chaoses[3])
		mode := rapid.SampledFrom([]checkpoint.Mode{checkpoint.CatchUp, checkpoint.SteadyState}).Draw(t, "mode")
		key := checkpoint.Key{Stream: stream, Mode: mode}
		r := g.runner(t, mode, func(c *slice.Config[rec]) { c.Now, c.Series, c.GapBatch = clock, "s", 2 })

		step := 0
		t.Repeat(map[string]func(*rapid.T){
			"run": func(t *rapid.T) {
				step++
				rep, err := r.Run(context.Background(), nil)
				t.Logf("step %d: run: %+v, %v", step, rep, err)
			},
			"new records": func(t *rapid.T) {
				step++
				g.src.n.Add(int64(rapid.IntRange(1, 10).Draw(t, "new")))
			},
			"time passes": func(t *rapid.T) { // lets leases left by failed releases expire
				step++
				now = now.Add(time.Duration(rapid.IntRange(1, 120).Draw(t, "seconds")) * time.Second)
			},
			"": func(t *rapid.T) {
				if v := g.store.violationList(); len(v) > 0 {
					t.Fatalf("after step %d: %v", step, v)
				}
				cp := g.store.load(t, key)
				if k := g.sink.holeBelow(position(cp.Cursor)); k >= 0 {
					t.Fatalf("after step %d: checkpoint %q but record %d is not in the sink", step, cp.Cursor, k)
				}
			},
		})

		for _, c := range chaoses {
			c.p = 0 // no more faults (the chaos is only used from this goroutine)
		}
		now = now.Add(time.Hour) // any stale lease has expired
		n := int(g.src.n.Load())
		rep, err := r.Run(context.Background(), nil)
		if err != nil || rep.Reason != "" || rep.Yielded || string(rep.Cursor) != string(cursor(n)) && n > 0 {
			t.Fatalf("final run = %+v, %v: want it caught up at %d", rep, err, n)
		}
		if err := g.sink.exactly(n); err != nil {
			t.Fatalf("after the final run: %v", err)
		}
		if err := g.sink.once(); tx && err != nil {
			t.Fatalf("after the final run, with a TxSink: %v", err)
		}
		if left := pending(t, g.store, key); len(left) != 0 {
			t.Fatalf("gaps pending after a run that caught up: %+v", left)
		}
	})
}

// TestPropRunnersNeverBothAdvance runs two runners with different owners on
// one stream at random offsets, with random slow and stalling sink writes,
// slow fetches, one at a time or ahead, and a random lease TTL, so that some runs yield and some leases expire
// mid-slice and are taken over. Only the latest lease grant ever commits (a
// stale holder is fenced: it cannot commit after a takeover), every failure
// is a lost lease, and afterwards the sink holds every record once. With a
// TxSink, a fenced holder's records are rolled back with its commit: every
// record is delivered exactly once.
func TestPropRunnersNeverBothAdvance(t *testing.T) {
	forEachSink(t, propRunnersNeverBothAdvance)
}

func propRunnersNeverBothAdvance(t *testing.T, tx bool) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(t, "records")
		page := rapid.IntRange(1, 8).Draw(t, "page size")
		ttl := time.Duration(rapid.IntRange(2, 20).Draw(t, "ttl seconds")) * time.Second
		delays := func(label string) []time.Duration {
			return rapid.SliceOfN(rapid.Map(rapid.IntRange(0, 30), func(s int) time.Duration { return time.Duration(s) * time.Second }), 0, 8).Draw(t, label)
		}
		delaysA, delaysB := delays("a's write delays"), delays("b's write delays")
		offset := time.Duration(rapid.IntRange(0, 40).Draw(t, "b starts after seconds")) * time.Second
		ahead := rapid.Bool().Draw(t, "fetch ahead")
		latency := time.Duration(rapid.IntRange(0, 10).Draw(t, "fetch latency seconds")) * time.Second

		rapid.SyncTest(t, func(t *rapid.T) {
			g := newRig(n, page)
			g.store = newStore(time.Now)
			g.tx = tx
			if ahead {
				g.ahead = newAhead(g.src, uint64(n))
				g.ahead.jitter = latency
			}
			g.store.check = checkSinkGate(g.sink)
			mk := func(owner string, d []time.Duration) *slice.Runner[rec] {
				return g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) {
					c.Owner, c.LeaseTTL, c.Sink = owner, ttl, delayed(g.sink, d...)
				})
			}
			a, b := mk("a", delaysA), mk("b", delaysB)
			type result struct {
				rep slice.Report
				err error
			}
			results := make(chan result, 2)
			go func() {
				rep, err := a.Run(context.Background(), nil)
				results <- result{rep, err}
			}()
			go func() {
				time.Sleep(offset)
				rep, err := b.Run(context.Background(), nil)
				results <- result{rep, err}
			}()
			for range 2 {
				res := <-results
				if res.err != nil && !errors.Is(res.err, checkpoint.ErrLeaseLost) {
					t.Fatalf("run failed with %v; only a lost lease may end a run here", res.err)
				}
			}
			if v := g.store.violationList(); len(v) > 0 {
				t.Fatalf("%v\ncommits: %+v", v, g.store.commitLog())
			}
			log := g.store.commitLog()
			for i := 1; i < len(log); i++ {
				if log[i].lease.Token < log[i-1].lease.Token || log[i].cursor <= log[i-1].cursor {
					t.Fatalf("commit %d %+v after %+v: the stream went back or to an older lease", i, log[i], log[i-1])
				}
			}
			time.Sleep(time.Hour) // every lease has expired
			if _, err := mk("c", nil).Run(context.Background(), nil); err != nil {
				t.Fatalf("final run: %v", err)
			}
			if err := g.sink.exactly(n); err != nil {
				t.Fatal(err)
			}
			if err := g.sink.once(); tx && err != nil {
				t.Fatalf("with a TxSink: %v", err)
			}
		})
	})
}

// TestPropCatchUpNeverTouchesSteadyState interleaves catch-up and
// steady-state runs of one stream, with random provider stops: a run of
// one mode never changes the other mode's bookmark nor its gap records.
func TestPropCatchUpNeverTouchesSteadyState(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		g := newRig(rapid.IntRange(0, 60).Draw(t, "records"), rapid.IntRange(1, 10).Draw(t, "page size"))
		g.prov.stop = chaosStops(newChaos(rapid.Uint64().Draw(t, "seed"), rapid.Float64Range(0, 0.5).Draw(t, "stops")))
		runners := map[checkpoint.Mode]*slice.Runner[rec]{
			checkpoint.CatchUp:     g.runner(t, checkpoint.CatchUp),
			checkpoint.SteadyState: g.runner(t, checkpoint.SteadyState),
		}
		other := map[checkpoint.Mode]checkpoint.Key{checkpoint.CatchUp: steady, checkpoint.SteadyState: catchUp}
		for step := range rapid.IntRange(1, 12).Draw(t, "runs") {
			mode := rapid.SampledFrom([]checkpoint.Mode{checkpoint.CatchUp, checkpoint.SteadyState}).Draw(t, "mode")
			before, gapsBefore := g.store.load(t, other[mode]), pending(t, g.store, other[mode])
			commits := len(g.store.commitLog())
			_, _ = runners[mode].Run(context.Background(), nil)
			after, gapsAfter := g.store.load(t, other[mode]), pending(t, g.store, other[mode])
			if after.Version != before.Version || string(after.Cursor) != string(before.Cursor) {
				t.Fatalf("step %d: a %v run moved the %v bookmark from %+v to %+v", step, mode, other[mode].Mode, before, after)
			}
			if !slices.EqualFunc(gapsBefore, gapsAfter, func(x, y checkpoint.Gap) bool { return x.ID == y.ID }) {
				t.Fatalf("step %d: a %v run changed the %v gaps from %+v to %+v", step, mode, other[mode].Mode, gapsBefore, gapsAfter)
			}
			for _, c := range g.store.commitLog()[commits:] {
				if c.key.Mode != mode {
					t.Fatalf("step %d: a %v run committed %v", step, mode, c.key)
				}
			}
		}
	})
}

// TestPropPrefetchLandsPagesInOrder runs a stream that fetches ahead again
// and again, on the fake clock, with random fetch, write and commit
// latencies (so pages land in random batches), windows (Prefetch from off
// to 6) and batch bounds (MaxBatch from the default to 6), pages that
// randomly end short of their prediction or cover a range with a hole or
// say nothing of it (or every page says nothing), fetches that randomly fail with every stop reason,
// and random faults of the Source's planning, the Sink and the Store,
// while new records keep arriving. In every run:
//   - writes and commits alternate, a write first;
//   - the pages written chain: each starts where the one before it ended,
//     the first where the checkpoint was, so no page is written twice or
//     out of order;
//   - each page written is a batch: exactly a run of consecutive pages the
//     Source served in that run, each but the last ending where it was
//     predicted to (so nothing planned from a wrong prediction is written
//     with or after it), with one Covered range, their union, and at most
//     MaxBatch of them, and at most the window;
//   - the commits are exactly the Next of the batches written, in order,
//     each after its write succeeded (at most the last write is
//     uncommitted);
//   - a stop's gap is at the last committed cursor;
//   - Slices, Commits and Records count what was committed and written; at
//     most 1+Prefetch fetches were in flight, and none is left when Run
//     returns.
//
// After the faults stop, a final run leaves every record in the sink once.
//
// With a TxSink, the same holds of the writes and commits inside each
// TxSink.Commit, and every record is delivered exactly once.
func TestPropPrefetchLandsPagesInOrder(t *testing.T) {
	forEachSink(t, propPrefetchLandsPagesInOrder)
}

func propPrefetchLandsPagesInOrder(t *testing.T, tx bool) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 60).Draw(t, "records")
		page := rapid.IntRange(1, 8).Draw(t, "page size")
		prefetch := rapid.IntRange(slice.NoPrefetch, 6).Draw(t, "prefetch")
		maxBatch := rapid.IntRange(0, 6).Draw(t, "max batch")
		seed := rapid.Uint64().Draw(t, "seed")
		short := rapid.Float64Range(0, 0.5).Draw(t, "short pages")
		holes := rapid.Float64Range(0, 0.3).Draw(t, "coverage holes")
		unknown := rapid.Bool().Draw(t, "coverage unknown")
		fail := rapid.Float64Range(0, 0.2).Draw(t, "fetch failures")
		jitter := time.Duration(rapid.IntRange(0, 20).Draw(t, "fetch latency ms")) * time.Millisecond
		writeDelay := time.Duration(rapid.IntRange(0, 10).Draw(t, "write latency ms")) * time.Millisecond
		commitDelay := time.Duration(rapid.IntRange(0, 10).Draw(t, "commit latency ms")) * time.Millisecond
		faults := []float64{
			rapid.Float64Range(0, 0.1).Draw(t, "planning faults"),
			rapid.Float64Range(0, 0.2).Draw(t, "sink faults"),
			rapid.Float64Range(0, 0.1).Draw(t, "store faults"),
		}
		mode := rapid.SampledFrom([]checkpoint.Mode{checkpoint.CatchUp, checkpoint.SteadyState}).Draw(t, "mode")
		// The provider's pacing rate: with the default Prefetch the window
		// widens by it (at 2000/s and a few ms a fetch, past 9).
		rate := rapid.SampledFrom([]float64{0, 200, 2000}).Draw(t, "provider rate")
		base := time.Duration(rapid.IntRange(0, 20).Draw(t, "fetch round trip ms")) * time.Millisecond
		window := map[int]int{slice.NoPrefetch: 1, 0: 9}[prefetch] // off, the default 8
		if prefetch == 0 && rate > 0 {
			window = 1 + 64 // the most it widens to
		}
		if prefetch > 0 {
			window = 1 + prefetch
		}
		most := min(window, maxBatch)
		if maxBatch == 0 {
			most = window // the default, 64, is above every window here
		}
		rapid.SyncTest(t, func(t *rapid.T) {
			g, w := aheadRig(n, page)
			g.tx = tx
			g.prov.rate = rate
			g.ahead.delay = func(int) time.Duration { return base }
			g.ahead.seed, g.ahead.short, g.ahead.fail, g.ahead.jitter, g.ahead.holes = seed, short, fail, jitter, holes
			g.ahead.unknown = unknown
			w.delay, g.store.commitDelay = writeDelay, commitDelay
			g.store.check = checkSinkGate(g.sink)
			chaoses := []*chaos{newChaos(seed+1, faults[0]), newChaos(seed+2, faults[1]), newChaos(seed+3, faults[2])}
			g.src.chaos.Store(chaoses[0])
			g.sink.chaos.Store(chaoses[1])
			g.store.chaos.Store(chaoses[2])
			key := checkpoint.Key{Stream: stream, Mode: mode}
			r := g.runner(t, mode, func(c *slice.Config[rec]) {
				c.Prefetch, c.MaxBatch, c.Sink, c.Series, c.GapBatch = prefetch, maxBatch, w, "s", 2
			})

			step := 0
			t.Repeat(map[string]func(*rapid.T){
				"run": func(t *rapid.T) {
					step++
					at := position(g.store.load(t, key).Cursor)
					writes, commits, ops := len(w.log), len(g.store.commitLog()), len(g.store.opLog())
					rep, err := r.Run(context.Background(), nil)
					t.Logf("step %d: run from %d: %+v, %v", step, at, rep, err)
					checkAlternate(t, step, g.store.opLog()[ops:])
					got := landed{writes: w.log[writes:], commits: g.store.commitLog()[commits:], served: g.ahead.takeServed()}
					got.check(t, step, at, most, rep)
					last := g.store.load(t, key).Cursor
					if err == nil && (rep.Reason.Exhausted() || rep.Reason.SourcePressure()) &&
						(len(rep.Gaps) != 1 || string(rep.Gaps[0].Cursor) != string(last) || string(rep.Cursor) != string(last)) {
						t.Fatalf("step %d: stopped for %s with gaps %+v and report cursor %q: want one gap at the last committed cursor %q",
							step, rep.Reason, rep.Gaps, rep.Cursor, last)
					}
					if now, most := g.ahead.flights(); now != 0 || most > window {
						t.Fatalf("step %d: %d fetches in flight at once (window %d), %d left after Run returned", step, most, window, now)
					}
					if prefetch == slice.NoPrefetch && (rep.Discarded != 0 || rep.Slices != rep.Commits) {
						t.Fatalf("step %d: report %+v without prefetch: want nothing discarded, one slice a commit", step, rep)
					}
				},
				"new records": func(t *rapid.T) {
					step++
					g.src.n.Add(int64(rapid.IntRange(1, 10).Draw(t, "new")))
				},
				"time passes": func(t *rapid.T) { // lets leases left by failed releases expire
					step++
					time.Sleep(time.Duration(rapid.IntRange(1, 120).Draw(t, "seconds")) * time.Second)
				},
				"": func(t *rapid.T) {
					if v := g.store.violationList(); len(v) > 0 {
						t.Fatalf("after step %d: %v", step, v)
					}
					cp := g.store.load(t, key)
					if k := g.sink.holeBelow(position(cp.Cursor)); k >= 0 {
						t.Fatalf("after step %d: checkpoint %q but record %d is not in the sink", step, cp.Cursor, k)
					}
				},
			})

			for _, c := range chaoses {
				c.p = 0 // no more faults (read by the runs only, none of which is running)
			}
			g.ahead.fail = 0
			time.Sleep(time.Hour) // any stale lease has expired
			n := int(g.src.n.Load())
			rep, err := r.Run(context.Background(), nil)
			if err != nil || rep.Reason != "" || rep.Yielded || string(rep.Cursor) != string(cursor(n)) && n > 0 {
				t.Fatalf("final run = %+v, %v: want it caught up at %d", rep, err, n)
			}
			if err := g.sink.exactly(n); err != nil {
				t.Fatalf("after the final run: %v", err)
			}
			if err := g.sink.once(); tx && err != nil {
				t.Fatalf("after the final run, with a TxSink: %v", err)
			}
			if left := pending(t, g.store, key); len(left) != 0 {
				t.Fatalf("gaps pending after a run that caught up: %+v", left)
			}
		})
	})
}

// checkAlternate checks that the writes and commits one run started
// alternate, a write first.
func checkAlternate(t *rapid.T, step int, ops []string) {
	t.Helper()
	for i, op := range ops {
		if want := []string{"write", "commit"}[i%2]; op != want {
			t.Fatalf("step %d: op %d is a %s, want a %s: writes and commits must alternate\nops %v", step, i, op, want, ops)
		}
	}
}

// landed is what one stream run of TestPropPrefetchLandsPagesInOrder did:
// its writes, its commits, and the pages its fetches returned.
type landed struct {
	writes  []written
	commits []commitRec
	served  []served
}

// check checks the run that started at checkpoint position at, whose
// batches hold most slices at most: see TestPropPrefetchLandsPagesInOrder.
func (l landed) check(t *rapid.T, step, at, most int, rep slice.Report) {
	t.Helper()
	pos, records, slices := at, 0, []int{}
	for i, w := range l.writes {
		if w.first != pos || w.next <= w.first || w.next-w.first != w.n {
			t.Fatalf("step %d: write %d holds [%d, %d) in %d records, but the stream was at %d: out of order, twice, or from a discarded slice\nwrites %+v",
				step, i, w.first, w.next, w.n, pos, l.writes)
		}
		ps := chain(l.served, w.first, w.next)
		if ps == nil || len(ps) > most {
			t.Fatalf("step %d: write %d of [%d, %d) is not a run of at most %d pages served in order, each but the last as predicted: %+v\nserved %+v",
				step, i, w.first, w.next, most, ps, l.served)
		}
		if cov, ok := unionOf(ps); !ok || cov != w.covered {
			t.Fatalf("step %d: write %d of pages %+v covers %v, want their union (one range: %v)", step, i, ps, w.covered, ok)
		}
		if w.ok && !w.lost {
			records += w.n
		}
		pos, slices = w.next, append(slices, len(ps))
	}
	c := l.commits
	if len(c) > len(l.writes) || len(c) < len(l.writes)-1 {
		t.Fatalf("step %d: %d commits for %d writes\nwrites %+v\ncommits %+v", step, len(c), len(l.writes), l.writes, c)
	}
	for i := range c {
		if c[i].cursor != l.writes[i].next || !l.writes[i].ok {
			t.Fatalf("step %d: commit %d at %d, but write %d is %+v", step, i, c[i].cursor, i, l.writes[i])
		}
	}
	// The last commit may have been applied and reported failed.
	if rep.Records != records || rep.Commits > len(c) || rep.Commits < len(c)-1 || rep.Slices != sum(slices[:rep.Commits]) {
		t.Fatalf("step %d: report %+v for %d records written in %d commits of %v slices", step, rep, records, len(c), slices)
	}
}

// chain returns the pages served that make up the write [a, b): a run of
// pages, each starting where the one before it ended and each but the last
// ending where it was predicted to; nil if there is none.
func chain(all []served, a, b int) []served {
	for _, p := range all {
		switch {
		case p.first != a || p.next > b:
		case p.next == b:
			return []served{p}
		case p.next == p.predicted:
			if rest := chain(all, p.next, b); rest != nil {
				return append([]served{p}, rest...)
			}
		}
	}
	return nil
}

// unionOf returns the union of the pages' Covered ranges and whether it is
// one range a batch may have: all unknown, or all known without a hole.
func unionOf(ps []served) ([2]int, bool) {
	u := ps[0].covered
	for _, p := range ps[1:] {
		switch {
		case u == [2]int{} && p.covered == [2]int{}:
		case u == [2]int{} || p.covered == [2]int{} || p.covered[0] > u[1]:
			return u, false
		default:
			u[1] = max(u[1], p.covered[1])
		}
	}
	return u, true
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
