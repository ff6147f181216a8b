package slice_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// aheadSource is a memSource that predicts where each slice ends (a
// slice.Predictor), so stream runs fetch ahead. A fetch may take a while,
// end its page short of the prediction, or fail, as scripted or at random;
// each decision is a function of the slice and of how often it was fetched
// before, never of the order concurrent fetches happen to run in.
type aheadSource struct {
	*memSource
	seed  uint64
	short float64 // probability that a page ends short of its window
	fail  float64 // probability that a fetch fails, with a random stop
	// delay, if set, is how long the fetch of the slice after record i
	// takes (a sleep: synctest only); jitter adds up to as much at random.
	delay  func(i int) time.Duration
	jitter time.Duration
	// script, if set, overrides short and fail for the try-th fetch (from
	// 0) of the slice after record i: end > 0 ends its page there; a
	// non-nil stop fails it.
	script func(i, try int) (end int, stop *budget.Error)
	// onFetch, if set, is called as each fetch starts (on its goroutine).
	onFetch func(i int)
	// holes is the probability that the page of the slice after record i
	// says its Covered is unknown (zero) or leaves out its last record's
	// interval (a hole before the next page's): a function of i alone.
	holes float64
	// unknown makes every page's Covered zero, as a source that is not
	// time-based says.
	unknown bool
	// coverFn, if set, overrides holes and unknown: it returns the Covered
	// of the page [i, j) in record positions, zero for unknown.
	coverFn func(i, j int) [2]int

	mu          sync.Mutex
	tries       map[int]int // fetches started, by first record
	inFlight    int
	maxInFlight int
	served      []served // the pages fetched successfully, in no order
}

// served is a page a fetch returned: records [first, next), the end the
// slice was predicted to (its window's), and its Covered in record
// positions (zero: covered unknown).
type served struct {
	first, next, predicted int
	covered                [2]int
}

var _ slice.Predictor = (*aheadSource)(nil)

func newAhead(src *memSource, seed uint64) *aheadSource {
	return &aheadSource{memSource: src, seed: seed, tries: map[int]int{}}
}

// Expect predicts the whole window: the cursor after its last record.
func (a *aheadSource) Expect(s slice.Slice) ([]byte, bool) {
	return cursor(a.index(s.Range.End)), true
}

// enter counts a fetch of the slice after record i in, returning which try
// of that slice it is.
func (a *aheadSource) enter(i int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inFlight++
	a.maxInFlight = max(a.maxInFlight, a.inFlight)
	try := a.tries[i]
	a.tries[i]++
	return try
}

func (a *aheadSource) leave() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inFlight--
}

// flights returns the fetches in flight now and the most seen at once
// since the last reset, and resets that maximum.
func (a *aheadSource) flights() (now, most int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now, most = a.inFlight, a.maxInFlight
	a.maxInFlight = a.inFlight
	return now, most
}

func (a *aheadSource) Fetch(ctx context.Context, s slice.Slice) (slice.Page[rec], forage.Outcome) {
	i, j := max(position(s.After), a.index(s.Range.Start)), a.index(s.Range.End)
	try := a.enter(i)
	defer a.leave()
	a.fetches.Add(1)
	if a.onFetch != nil {
		a.onFetch(i)
	}
	rng := rand.New(rand.NewPCG(a.seed^uint64(i), uint64(try)))
	d := time.Duration(0)
	if a.delay != nil {
		d = a.delay(i)
	}
	if a.jitter > 0 {
		d += time.Duration(rng.Int64N(int64(a.jitter)))
	}
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return slice.Page[rec]{}, forage.Outcome{Err: ctx.Err()}
		}
	}
	end, stop := 0, (*budget.Error)(nil)
	if a.script != nil {
		end, stop = a.script(i, try)
	} else {
		if rng.Float64() < a.fail {
			stop = &budget.Error{Reason: stopReasons[rng.IntN(len(stopReasons))]}
		}
		if j-i > 1 && rng.Float64() < a.short {
			end = i + 1 + rng.IntN(j-i-1)
		}
	}
	if stop != nil {
		return slice.Page[rec]{}, forage.Outcome{Err: stop}
	}
	if end > 0 {
		j = end
	}
	p := slice.Page[rec]{Next: cursor(j)}
	for k := i; k < j; k++ {
		p.Records = append(p.Records, rec{Key: k, Val: val(k)})
	}
	cov := a.cover(i, j)
	if cov != [2]int{} {
		p.Covered = checkpoint.Range{Start: a.at(cov[0]), End: a.at(cov[1])}
	}
	a.mu.Lock()
	a.served = append(a.served, served{first: i, next: j, predicted: a.index(s.Range.End), covered: cov})
	a.mu.Unlock()
	return p, forage.Outcome{Status: 200}
}

// cover returns the Covered of the page [i, j) in record positions: [i,
// j), or, as holes decides for i, zero (unknown) or [i, j-1) (a hole
// before the next page).
func (a *aheadSource) cover(i, j int) [2]int {
	rng := rand.New(rand.NewPCG(a.seed^uint64(i), 0xc0ffee))
	switch {
	case a.coverFn != nil:
		return a.coverFn(i, j)
	case a.unknown:
		return [2]int{}
	case rng.Float64() >= a.holes:
		return [2]int{i, j}
	case rng.IntN(2) == 0:
		return [2]int{}
	case j-i > 1:
		return [2]int{i, j - 1}
	}
	return [2]int{i, j}
}

// takeServed returns the pages served since the last call.
func (a *aheadSource) takeServed() []served {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.served
	a.served = nil
	return out
}

// written is one Sink.Write a run made: the page's first record, its Next,
// its size, its Covered in record positions (zero: unknown), and whether
// the write returned nil.
type written struct {
	first, next, n int
	covered        [2]int
	ok             bool
	// lost is set when the write was part of a TxSink.Commit that
	// returned an error: the run did not count its records.
	lost bool
}

// writeLog is a sink that writes to a memSink, after sleeping delay, and
// logs each write. Only the run's goroutine writes; read the log between
// runs.
type writeLog struct {
	sink  *memSink
	src   *memSource  // tells Covered times as record positions
	store *faultStore // checks that a write never overlaps a commit
	delay time.Duration
	log   []written
}

func (w *writeLog) Write(ctx context.Context, p slice.Page[rec]) error {
	defer w.store.exclusive("write")()
	if w.delay > 0 {
		time.Sleep(w.delay)
	}
	err := w.sink.Write(ctx, p)
	first := -1
	if len(p.Records) > 0 {
		first = p.Records[0].Key
	}
	var cov [2]int
	if !p.Covered.IsZero() {
		cov = [2]int{w.src.index(p.Covered.Start), w.src.index(p.Covered.End)}
	}
	w.log = append(w.log, written{first: first, next: position(p.Next), n: len(p.Records), covered: cov, ok: err == nil})
	return err
}

// firsts returns the first record of each logged write.
func (w *writeLog) firsts() []int {
	var out []int
	for _, x := range w.log {
		out = append(out, x.first)
	}
	return out
}

// commitCursors returns the cursors of the commits logged so far.
func commitCursors(st *faultStore) []int {
	var out []int
	for _, c := range st.commitLog() {
		out = append(out, c.cursor)
	}
	return out
}

// aheadRig returns a rig of n records in pages of page whose source
// predicts (see aheadSource), with its writes logged.
func aheadRig(n, page int) (*rig, *writeLog) {
	g := newRig(n, page)
	g.store = newStore(time.Now)
	g.store.alternate = true
	g.ahead = newAhead(g.src, 1)
	return g, &writeLog{sink: g.sink, src: g.src, store: g.store}
}

func TestRunPrefetchKeepsTheWindowInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefetch, want int
	}{{0, 9}, {3, 4}, {1, 2}, {slice.NoPrefetch, 1}} {
		synctest.Test(t, func(t *testing.T) {
			g, w := aheadRig(100, 5)
			g.ahead.delay = func(int) time.Duration { return 5 * time.Millisecond }
			// One slice per write, so the commits show each slice.
			r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Prefetch, c.Sink, c.MaxBatch = tc.prefetch, w, 1 })
			rep := run(t, r)
			if now, most := g.ahead.flights(); now != 0 || most != tc.want {
				t.Fatalf("prefetch %d: %d fetches at most in flight (%d left after the run), want %d (0 left)", tc.prefetch, most, now, tc.want)
			}
			if rep.Slices != 20 || rep.Records != 100 || rep.Discarded != 0 || string(rep.Cursor) != "100" || g.src.fetches.Load() != 20 {
				t.Fatalf("prefetch %d: report %+v after %d fetches: want 20 slices, 100 records, cursor 100, nothing discarded", tc.prefetch, rep, g.src.fetches.Load())
			}
			if want := []int{5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 95, 100}; !slices.Equal(commitCursors(g.store), want) {
				t.Fatalf("prefetch %d: commits %v, want %v", tc.prefetch, commitCursors(g.store), want)
			}
			if err := g.sink.exactly(100); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRunPrefetchOverlapsFetchesAndWrites pins the gain on the fake clock:
// a 5 ms fetch and a 5 ms write take 10 ms a slice one at a time, and 5 ms a
// slice (the write alone) with fetching ahead, one slice per write.
func TestRunPrefetchOverlapsFetchesAndWrites(t *testing.T) {
	t.Parallel()
	const slices = 20
	for _, tc := range []struct {
		prefetch int
		want     time.Duration
	}{{slice.NoPrefetch, slices * 10 * time.Millisecond}, {1, (slices + 1) * 5 * time.Millisecond}, {0, (slices + 1) * 5 * time.Millisecond}} {
		synctest.Test(t, func(t *testing.T) {
			g, w := aheadRig(slices*10, 10)
			g.ahead.delay = func(int) time.Duration { return 5 * time.Millisecond }
			w.delay = 5 * time.Millisecond
			r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Prefetch, c.Sink, c.MaxBatch = tc.prefetch, w, 1 })
			start := time.Now()
			if rep := run(t, r); rep.Slices != slices {
				t.Fatalf("prefetch %d: %+v, want %d slices", tc.prefetch, rep, slices)
			}
			if took := time.Since(start); took != tc.want {
				t.Fatalf("prefetch %d: %d slices took %v, want %v", tc.prefetch, slices, took, tc.want)
			}
		})
	}
}

// TestRunDiscardsWhatWasPlannedFromAWrongPrediction: the page after 10 ends
// at 15, not 20: the slices fetched after it (planned from 20) are
// discarded unwritten, and the stream goes on from 15. All five slices
// 0..40 are in when the first lands: one at a time, each is written and
// committed on its own; batched, the page ending at 15 ends the first batch
// and the four slices planned from 15 make the second.
func TestRunDiscardsWhatWasPlannedFromAWrongPrediction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxBatch        int
		writes, commits []int
	}{
		{1, []int{0, 10, 15, 25, 35, 45}, []int{10, 15, 25, 35, 45, 50}},
		{0, []int{0, 15}, []int{15, 50}},
	} {
		synctest.Test(t, func(t *testing.T) {
			g, w := aheadRig(50, 10)
			// The first slice of each batch lands last, so that the ones
			// after it are in when it does.
			g.ahead.delay = func(i int) time.Duration { return time.Duration(1+b2i(i == 0 || i == 15)) * time.Millisecond }
			g.ahead.script = func(i, try int) (int, *budget.Error) {
				if i == 10 && try == 0 {
					return 15, nil
				}
				return 0, nil
			}
			rep := run(t, g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Prefetch, c.Sink, c.MaxBatch = 4, w, tc.maxBatch }))
			if !slices.Equal(w.firsts(), tc.writes) {
				t.Fatalf("max batch %d: writes began at %v, want %v", tc.maxBatch, w.firsts(), tc.writes)
			}
			if !slices.Equal(commitCursors(g.store), tc.commits) {
				t.Fatalf("max batch %d: commits %v, want %v", tc.maxBatch, commitCursors(g.store), tc.commits)
			}
			// 20, 30 and 40 are discarded.
			if rep.Slices != 6 || rep.Commits != len(tc.commits) || rep.Records != 50 || rep.Discarded != 3 || g.src.fetches.Load() != 9 {
				t.Fatalf("max batch %d: report %+v after %d fetches: want 6 slices in %d commits, 50 records, 3 discarded, 9 fetches",
					tc.maxBatch, rep, g.src.fetches.Load(), len(tc.commits))
			}
			if err := g.sink.exactly(50); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRunGroupCommit pins the gain of batching on the fake clock: fetches
// take 5 ms (the first 6 ms, so that the window is in when it lands),
// writes and commits 20 ms each, as a sync to disk may. One slice at a
// time, each costs its write and its commit, 40 ms. Batched, the 9 slices
// in flight (the default window) land while the batch before them is made
// durable, and all 9 cost one write and one commit.
func TestRunGroupCommit(t *testing.T) {
	t.Parallel()
	const n = 100 // slices
	for _, tc := range []struct {
		maxBatch, commits int
		want              time.Duration
	}{
		{1, n, 6*time.Millisecond + n*40*time.Millisecond},
		{0, 12, 6*time.Millisecond + 12*40*time.Millisecond}, // 11 batches of 9, then 1
		{4, 25, 6*time.Millisecond + 25*40*time.Millisecond},
	} {
		synctest.Test(t, func(t *testing.T) {
			g, w := aheadRig(n*10, 10)
			g.ahead.delay = func(i int) time.Duration { return time.Duration(5+b2i(i == 0)) * time.Millisecond }
			w.delay, g.store.commitDelay = 20*time.Millisecond, 20*time.Millisecond
			r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink, c.MaxBatch = w, tc.maxBatch })
			start := time.Now()
			rep := run(t, r)
			if took := time.Since(start); took != tc.want {
				t.Fatalf("max batch %d: %d slices took %v, want %v", tc.maxBatch, n, took, tc.want)
			}
			if rep.Slices != n || rep.Commits != tc.commits || rep.Records != n*10 || rep.Discarded != 0 || len(w.log) != tc.commits {
				t.Fatalf("max batch %d: report %+v in %d writes: want %d slices in %d writes and commits, nothing discarded",
					tc.maxBatch, rep, len(w.log), n, tc.commits)
			}
			for i, c := range commitCursors(g.store) {
				if c != w.log[i].next {
					t.Fatalf("max batch %d: commit %d at %d, but write %d ended at %d", tc.maxBatch, i, c, i, w.log[i].next)
				}
			}
			if err := g.sink.exactly(n * 10); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRunBatchIsOneCoveredRange: pages merged into one write have one
// Covered range, their union, and the coverage series gets it after the
// commit. A page whose Covered leaves a hole after the one before it, or
// is unknown after a known one (or the reverse), starts a new batch.
func TestRunBatchIsOneCoveredRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cover   func(i, j int) [2]int
		commits []int
		covered []checkpoint.Range
	}{
		{"contiguous", nil, []int{50}, []checkpoint.Range{{Start: t0, End: t0.Add(50 * time.Minute)}}},
		{"hole before 20", func(i, j int) [2]int {
			if i == 10 {
				return [2]int{10, 19}
			}
			return [2]int{i, j}
		}, []int{20, 50}, []checkpoint.Range{{Start: t0, End: t0.Add(19 * time.Minute)}, {Start: t0.Add(20 * time.Minute), End: t0.Add(50 * time.Minute)}}},
		{"unknown after 30", func(i, j int) [2]int {
			if i == 30 {
				return [2]int{}
			}
			return [2]int{i, j}
		}, []int{30, 40, 50}, []checkpoint.Range{{Start: t0, End: t0.Add(30 * time.Minute)}, {Start: t0.Add(40 * time.Minute), End: t0.Add(50 * time.Minute)}}},
	} {
		synctest.Test(t, func(t *testing.T) {
			g, w := aheadRig(50, 10)
			g.ahead.delay = func(i int) time.Duration { return time.Duration(1+b2i(i == 0)) * time.Millisecond }
			g.ahead.coverFn = tc.cover
			rep := run(t, g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink, c.Series = w, "s" }))
			if !slices.Equal(commitCursors(g.store), tc.commits) || rep.Slices != 5 || rep.Commits != len(tc.commits) {
				t.Fatalf("%s: commits %v, report %+v: want commits %v of 5 slices", tc.name, commitCursors(g.store), rep, tc.commits)
			}
			cov, err := g.store.Coverage(context.Background(), "s")
			if err != nil || !slices.Equal(cov.Ranges(), tc.covered) {
				t.Fatalf("%s: coverage %v, %v: want %v", tc.name, cov.Ranges(), err, tc.covered)
			}
		})
	}
}

// TestRunPrefetchStopLandsInOrder: the fetch after 30 fails while the slice
// after 0 is still in flight. The pages before it are written and
// committed first, in order (one write each, or batched into one); then the
// run stops as without prefetch (a gap at the last committed cursor, or an
// error for a permanent failure), and nothing after it is written.
func TestRunPrefetchStopLandsInOrder(t *testing.T) {
	t.Parallel()
	until := t0.Add(time.Hour)
	for _, tc := range []struct {
		maxBatch        int
		writes, commits []int
	}{{1, []int{0, 10, 20}, []int{10, 20, 30}}, {0, []int{0}, []int{30}}} {
		for _, reason := range stopReasons {
			synctest.Test(t, func(t *testing.T) {
				g, w := aheadRig(100, 10)
				g.ahead.delay = func(i int) time.Duration {
					if i == 0 {
						return 50 * time.Millisecond
					}
					return time.Millisecond
				}
				g.ahead.script = func(i, _ int) (int, *budget.Error) {
					if i == 30 {
						return 0, &budget.Error{Reason: reason, Until: until}
					}
					return 0, nil
				}
				rep, err := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Prefetch, c.Sink, c.MaxBatch = 4, w, tc.maxBatch }).Run(context.Background(), nil)
				if !slices.Equal(w.firsts(), tc.writes) {
					t.Fatalf("%s, max batch %d: writes began at %v, want %v", reason, tc.maxBatch, w.firsts(), tc.writes)
				}
				if !slices.Equal(commitCursors(g.store), tc.commits) {
					t.Fatalf("%s, max batch %d: commits %v, want %v", reason, tc.maxBatch, commitCursors(g.store), tc.commits)
				}
				if rep.Slices != 3 || rep.Commits != len(tc.commits) || string(rep.Cursor) != "30" || rep.Reason != reason || rep.Discarded != 4 {
					t.Fatalf("%s, max batch %d: report %+v: want 3 slices at cursor 30, the reason, the 4 slices in flight after it (40..70) discarded", reason, tc.maxBatch, rep)
				}
				gaps := pending(t, g.store, catchUp)
				if reason == forage.ReasonPermanent {
					if !errors.Is(err, budget.ErrStopped) || len(gaps) != 1 || string(gaps[0].Cursor) != "30" || !strings.HasPrefix(gaps[0].Reason, "permanent: ") {
						t.Fatalf("%s: Run error %v with gaps %+v: want the error and a gap naming it at cursor 30", reason, err, gaps)
					}
					return
				}
				if err != nil || len(gaps) != 1 || string(gaps[0].Cursor) != "30" || gaps[0].Reason != string(reason) {
					t.Fatalf("%s: Run error %v with gaps %+v: want one gap at the last committed cursor 30", reason, err, gaps)
				}
				if now, _ := g.ahead.flights(); now != 0 {
					t.Fatalf("%s: %d fetches still in flight after the run", reason, now)
				}
				assertFree(t, g.store)
			})
		}
	}
}

// TestRunPrefetchStartsNoFetchPastTheBudget: the deadline is checked when
// a fetch starts. Past it, no fetch starts; every fetch started before it
// is written and committed; the gap is at the last committed cursor.
func TestRunPrefetchStartsNoFetchPastTheBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g, w := aheadRig(1000, 10)
		deadline := time.Now().Add(25 * time.Millisecond)
		var late []int
		g.ahead.onFetch = func(i int) {
			if !time.Now().Before(deadline) {
				late = append(late, i) // only read after the run
			}
		}
		g.ahead.delay = func(int) time.Duration { return 10 * time.Millisecond }
		b, err := budget.NewRun(budget.Envelope{Deadline: deadline})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Prefetch, c.Sink = 1, w }).Run(context.Background(), b)
		if err != nil || rep.Reason != forage.ReasonDeadline || len(late) != 0 {
			t.Fatalf("Run = %+v, %v with fetches started past the deadline after %v: want a deadline stop, none late", rep, err, late)
		}
		// Two fetches start at 0, 10 and 20 ms each; the six land.
		if rep.Slices != 6 || rep.Discarded != 0 || g.src.fetches.Load() != 6 || string(rep.Cursor) != "60" {
			t.Fatalf("report %+v after %d fetches: want the 6 slices started before the deadline committed", rep, g.src.fetches.Load())
		}
		if gaps := pending(t, g.store, catchUp); len(gaps) != 1 || string(gaps[0].Cursor) != "60" {
			t.Fatalf("gaps %+v: want one at the last committed cursor 60", gaps)
		}
	})
}

// TestRunPrefetchCancelledWaitsForItsFetches: a cancelled run returns only
// once every fetch it started has returned, and releases its lease.
func TestRunPrefetchCancelledWaitsForItsFetches(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g, w := aheadRig(1000, 10)
		ctx, cancel := context.WithCancel(context.Background())
		g.ahead.delay = func(i int) time.Duration {
			if i == 200 {
				cancel()
			}
			return time.Duration(1+i%7) * time.Millisecond
		}
		_, err := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink = w }).Run(ctx, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after cancel = %v, want context.Canceled", err)
		}
		if now, _ := g.ahead.flights(); now != 0 {
			t.Fatalf("%d fetches still in flight after the run returned", now)
		}
		if cp := g.store.load(t, catchUp); position(cp.Cursor) > 200 || g.sink.holeBelow(position(cp.Cursor)) >= 0 {
			t.Fatalf("checkpoint %q after a cancel at the slice after 200", cp.Cursor)
		}
		assertFree(t, g.store)
	})
}

// TestRunPrefetchCarriesAFetchPanicOver: a Source that panics in a fetch
// running ahead panics the run's goroutine, as it would without prefetch,
// and the stream's lease is given back on the way (it was held until it
// ended, so the scheduler's retry of the failed job yielded to its own
// dead run; found by a review).
func TestRunPrefetchCarriesAFetchPanicOver(t *testing.T) {
	t.Parallel()
	g, w := aheadRig(100, 10)
	g.ahead.script = func(i, _ int) (int, *budget.Error) {
		if i == 30 {
			panic("source bug")
		}
		return 0, nil
	}
	r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink = w })
	defer func() {
		if v := recover(); v != "source bug" {
			t.Fatalf("recovered %v, want the source's panic", v)
		}
		if cp := g.store.load(t, catchUp); string(cp.Cursor) != "30" {
			t.Fatalf("checkpoint %q, want the pages before the panic committed at 30", cp.Cursor)
		}
		assertFree(t, g.store)
	}()
	_, _ = r.Run(context.Background(), nil)
	t.Fatal("Run returned after its source panicked")
}

// BenchmarkRunPrefetch measures one stream against a source whose fetches
// take 5 ms and a sink whose writes take 5 ms, on the wall clock: slices
// per second one at a time, and fetching ahead.
func BenchmarkRunPrefetch(b *testing.B) {
	for _, bc := range []struct {
		name     string
		prefetch int
	}{{"off", slice.NoPrefetch}, {"prefetch=1", 1}, {"prefetch=8", 8}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			const slices = 50
			total := 0
			for b.Loop() {
				g, w := aheadRig(slices*10, 10)
				g.ahead.delay = func(int) time.Duration { return 5 * time.Millisecond }
				w.delay = 5 * time.Millisecond
				total += run(b, g.runner(b, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Prefetch, c.Sink = bc.prefetch, w })).Slices
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "slices/s")
		})
	}
}

// BenchmarkRunGroupCommit measures one stream on the wall clock against a
// source whose fetches take 5 ms, a sink whose writes take 20 ms and a
// store whose commits take 20 ms (a sync to a slow disk each), fetching
// ahead by the default Prefetch: slices per second with one write and one
// commit per slice, and with the slices that landed meanwhile made durable
// together (the default MaxBatch).
func BenchmarkRunGroupCommit(b *testing.B) {
	for _, bc := range []struct {
		name     string
		maxBatch int
	}{{"batch=off", 1}, {"batch=default", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			const n = 40 // slices
			slices, commits := 0, 0
			for b.Loop() {
				g, w := aheadRig(n*10, 10)
				g.ahead.delay = func(int) time.Duration { return 5 * time.Millisecond }
				w.delay, g.store.commitDelay = 20*time.Millisecond, 20*time.Millisecond
				rep := run(b, g.runner(b, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink, c.MaxBatch = w, bc.maxBatch }))
				slices, commits = slices+rep.Slices, commits+rep.Commits
			}
			b.ReportMetric(float64(slices)/b.Elapsed().Seconds(), "slices/s")
			b.ReportMetric(float64(slices)/float64(commits), "slices/commit")
		})
	}
}

// TestRunPrefetchRenewsLeaseAsPagesLand: all six slices are fetched at
// once, so no fetch starts while their slow writes (one slice each) drain
// for 18s, past the
// 10s TTL: the lease is renewed as the pages land, and a second runner at
// 14s yields.
func TestRunPrefetchRenewsLeaseAsPagesLand(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g, w := aheadRig(60, 10)
		w.delay = 3 * time.Second
		a := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.LeaseTTL, c.Sink, c.MaxBatch = 10*time.Second, w, 1 })
		done := make(chan slice.Report)
		go func() { done <- run(t, a) }()

		time.Sleep(14 * time.Second)
		if rep := run(t, g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Owner = "b" })); !rep.Yielded {
			t.Fatalf("a second runner at 14s ran (%+v); the first one's lease must have been renewed", rep)
		}
		if rep := <-done; rep.Slices != 6 || g.src.fetches.Load() != 6 {
			t.Fatalf("first run %+v after %d fetches: want 6 slices, all fetched ahead", rep, g.src.fetches.Load())
		}
	})
}

// TestRunPrefetchKeepsAFarProviderBusy: one stream against a provider that
// allows 200 requests a second and answers in 100 ms needs about 20
// fetches in flight. The default window widens to keep it busy (without
// it, 9 in flight: 90 slices a second); an explicit Prefetch stays fixed.
func TestRunPrefetchKeepsAFarProviderBusy(t *testing.T) {
	t.Parallel()
	const n, rate = 600, 200.0
	for _, tc := range []struct {
		prefetch       int
		least, most    time.Duration // how long the run may take
		mostInFlight   int
		fewestInFlight int
	}{
		{0, 0, 3600 * time.Millisecond, 1 + 64, 20},                 // n/rate = 3 s
		{8, 6500 * time.Millisecond, 7500 * time.Millisecond, 9, 9}, // n/90 = 6.7 s
	} {
		synctest.Test(t, func(t *testing.T) {
			g, w := aheadRig(n*5, 5)
			g.ahead.delay = func(int) time.Duration { return 100 * time.Millisecond }
			p, err := budget.NewLocal("far", budget.Config{Adaptive: aimd.Config{Initial: rate, Max: rate}})
			if err != nil {
				t.Fatal(err)
			}
			g.prov = nil
			r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Prefetch, c.Sink, c.Provider = tc.prefetch, w, p })
			start := time.Now()
			if rep := run(t, r); rep.Slices != n || rep.Discarded != 0 {
				t.Fatalf("prefetch %d: %+v, want %d slices, none discarded", tc.prefetch, rep, n)
			}
			took := time.Since(start)
			_, most := g.ahead.flights()
			t.Logf("prefetch %d: %d slices in %v (%.0f/s), %d in flight at most", tc.prefetch, n, took, n/took.Seconds(), most)
			if took < tc.least || took > tc.most {
				t.Errorf("prefetch %d: %d slices took %v, want %v to %v", tc.prefetch, n, took, tc.least, tc.most)
			}
			if most > tc.mostInFlight || most < tc.fewestInFlight {
				t.Errorf("prefetch %d: %d fetches in flight at most, want %d to %d", tc.prefetch, most, tc.fewestInFlight, tc.mostInFlight)
			}
			if err := g.sink.exactly(n * 5); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRequestCapIsSpentInSliceOrder: a run capped at n requests, fetching
// ahead, spends them on its first n slices, in order, and lands them all:
// a slice fetched ahead never takes an attempt the slice before it needed.
// (A fetch ahead could be admitted first; the earlier slice then stopped
// on request_cap, and the run threw away the later pages, or cancelled
// the one request it had sent: runs capped at 1 request made none.)
func TestRequestCapIsSpentInSliceOrder(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 5} {
		for seed := range 20 {
			synctest.Test(t, func(t *testing.T) {
				g, w := aheadRig(100, 5)
				g.ahead = newAhead(g.src, uint64(seed))
				g.ahead.delay = func(int) time.Duration { return time.Duration(1+seed%3) * time.Millisecond }
				p, err := budget.NewLocal("capped", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}, Burst: 100})
				if err != nil {
					t.Fatal(err)
				}
				g.prov = nil
				r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink, c.Provider = w, p })
				run, err := budget.NewRun(budget.Envelope{MaxRequests: n})
				if err != nil {
					t.Fatal(err)
				}
				rep, err := r.Run(context.Background(), run)
				if err != nil || rep.Reason != forage.ReasonRequestCap || rep.Slices != n || string(rep.Cursor) != strconv.Itoa(5*n) {
					t.Fatalf("cap %d, seed %d: Run = %+v, %v; want request_cap after %d slices, cursor %d", n, seed, rep, err, n, 5*n)
				}
				if err := g.sink.exactly(5 * n); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestRunPrefetchWidensWhileTheStreamHoldsSlowStartBack: one stream 100 ms
// from a provider whose limit it does not meet in the run, its rate in
// slow start all along (paced for the round trip: about 8/s per second at
// 100 ms), writes taking 50 ms. Slow start climbs only while the caller
// uses the rate (up to twice what it sends), and the window did not widen
// while slow start's rate changed: the default window, part of it waiting
// on writes, kept 6-9 fetches in flight, and the stream fell behind the
// rate (over real HTTP, one stream 100 ms from a 200/s provider sent 54/s
// for a whole 30 s run, its rate 142/s). The window widens while the
// stream, well under the rate's need, holds the sends back: the run takes
// what the climb alone takes (24.3 s with no writes to wait on), not 31 s.
func TestRunPrefetchWidensWhileTheStreamHoldsSlowStartBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const n = 2000
		g, w := aheadRig(n*5, 5)
		g.ahead.delay = func(int) time.Duration { return 100 * time.Millisecond }
		w.delay = 50 * time.Millisecond
		p, err := budget.NewLocal("far", budget.Config{})
		if err != nil {
			t.Fatal(err)
		}
		g.prov = nil
		r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink, c.Provider = w, p })
		start := time.Now()
		if rep := run(t, r); rep.Slices != n || rep.Discarded != 0 {
			t.Fatalf("%+v, want %d slices, none discarded", rep, n)
		}
		took := time.Since(start)
		_, most := g.ahead.flights()
		t.Logf("%d slices in %v (%.0f/s), %d in flight at most, rate %.0f/s (%s)", n, took, n/took.Seconds(), most, p.Snapshot().Rate, p.Snapshot().Phase)
		if took > 26*time.Second || most < 16 {
			t.Errorf("%d slices took %v with %d fetches in flight at most; want 26 s at most, 16 or more in flight", n, took, most)
		}
		if err := g.sink.exactly(n * 5); err != nil {
			t.Fatal(err)
		}
	})
}
