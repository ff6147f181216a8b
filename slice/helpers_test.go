package slice_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// The test doubles shared by the tests: a deterministic in-memory source of
// numbered records, a sink with upsert semantics, a store and a provider,
// each with optional injected faults.

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// errInjected is the error every injected fault wraps.
var errInjected = errors.New("injected fault")

// t0 is the time of record 0 of every test source.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// rec is the test record: a natural key and a content derived from it.
type rec struct {
	Key int
	Val string
}

func val(k int) string { return "v" + strconv.Itoa(k) }

// cursor encodes "the next record is i" as the source's opaque cursor.
func cursor(i int) []byte { return []byte(strconv.Itoa(i)) }

// position decodes a cursor; the empty cursor is the start.
func position(c []byte) int {
	if len(c) == 0 {
		return 0
	}
	i, err := strconv.Atoi(string(c))
	if err != nil {
		panic(fmt.Sprintf("bad test cursor %q", c))
	}
	return i
}

// chaos decides injected faults: each hit fails with probability p. It is
// safe for concurrent use; a nil *chaos never fails.
type chaos struct {
	mu  sync.Mutex
	rng *rand.Rand
	p   float64
}

func newChaos(seed uint64, p float64) *chaos {
	return &chaos{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), p: p}
}

func (c *chaos) hit() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64() < c.p
}

// pick returns a pseudo-random index in [0, n).
func (c *chaos) pick(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// memSource serves records 0..n-1, record i at t0 + i×interval, page
// records per slice. n may grow (new data for a steady-state stream).
type memSource struct {
	n        atomic.Int64
	page     int
	interval time.Duration
	chaos    atomic.Pointer[chaos] // Next errors, Fetch 503s
	fetches  atomic.Int64
	// outcome, if set, replaces the outcome of a fetch (the page is kept).
	outcome func(s slice.Slice) forage.Outcome
	// badNext, if set, makes every page carry this Next;
	// lastNoProgress makes those pages Last too.
	badNext        []byte
	lastNoProgress bool
	// rewind, if set, makes the page after record i carry the Next of
	// record rewind[i] (a cursor that goes back).
	rewind map[int]int
}

func newSource(n, page int) *memSource {
	s := &memSource{page: page, interval: time.Minute}
	s.n.Store(int64(n))
	return s
}

func (m *memSource) at(i int) time.Time { return t0.Add(time.Duration(i) * m.interval) }

// index returns the first record at or after t.
func (m *memSource) index(t time.Time) int {
	d := t.Sub(t0)
	if d <= 0 {
		return 0
	}
	return int((d + m.interval - 1) / m.interval)
}

func (m *memSource) Next(_ context.Context, c []byte, within checkpoint.Range) (slice.Slice, bool, error) {
	if m.chaos.Load().hit() {
		return slice.Slice{}, false, fmt.Errorf("source next: %w", errInjected)
	}
	lo, hi := 0, int(m.n.Load())
	if !within.IsZero() {
		lo, hi = max(lo, m.index(within.Start)), min(hi, m.index(within.End))
	}
	i := max(position(c), lo)
	if i >= hi {
		return slice.Slice{}, false, nil
	}
	j := min(i+m.page, hi)
	return slice.Slice{Range: checkpoint.Range{Start: m.at(i), End: m.at(j)}}, true, nil
}

func (m *memSource) Fetch(_ context.Context, s slice.Slice) (slice.Page[rec], forage.Outcome) {
	m.fetches.Add(1)
	if m.chaos.Load().hit() {
		return slice.Page[rec]{}, forage.Outcome{Status: 503}
	}
	i, j := max(position(s.After), m.index(s.Range.Start)), m.index(s.Range.End)
	p := slice.Page[rec]{Next: cursor(j), Covered: s.Range}
	for k := i; k < j; k++ {
		p.Records = append(p.Records, rec{Key: k, Val: val(k)})
	}
	if m.badNext != nil {
		p.Next, p.Last = m.badNext, m.lastNoProgress
	}
	if r, ok := m.rewind[i]; ok {
		p.Next = cursor(r)
	}
	if m.outcome != nil {
		return p, m.outcome(s)
	}
	return p, forage.Outcome{Status: 200}
}

// memSink upserts records by key. A fault fails a write either before it
// (nothing stored) or after it (stored, but the caller is told it failed).
type memSink struct {
	mu         sync.Mutex
	data       map[int]string
	deliveries map[int]int
	confirmed  int // the highest page end (exclusive) whose Write returned nil
	writes     int
	chaos      atomic.Pointer[chaos]
	delay      func() time.Duration // slept before each write (synctest only)
	failAt     int                  // fail the failAt-th write (1-based) before storing; 0: never
}

func newSink() *memSink { return &memSink{data: map[int]string{}, deliveries: map[int]int{}} }

func (s *memSink) Write(ctx context.Context, p slice.Page[rec]) error {
	if s.delay != nil {
		time.Sleep(s.delay())
	}
	c := s.chaos.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if s.failAt == s.writes || (c.hit() && c.pick(2) == 0) {
		return fmt.Errorf("sink write: %w", errInjected)
	}
	for _, r := range p.Records {
		if old, ok := s.data[r.Key]; ok && old != r.Val {
			panic(fmt.Sprintf("record %d changed content: %q -> %q", r.Key, old, r.Val))
		}
		s.data[r.Key] = r.Val
		s.deliveries[r.Key]++
	}
	if c.hit() {
		return fmt.Errorf("sink write (stored): %w", errInjected)
	}
	s.confirmed = max(s.confirmed, position(p.Next))
	return nil
}

// holeBelow returns the first key below n missing from the sink, or -1.
func (s *memSink) holeBelow(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range n {
		if _, ok := s.data[k]; !ok {
			return k
		}
	}
	return -1
}

// exactly checks that the sink holds keys 0..n-1 exactly, each with its
// content, and every key delivered at least once.
func (s *memSink) exactly(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.data) != n {
		return fmt.Errorf("sink holds %d keys, want %d", len(s.data), n)
	}
	for k := range n {
		if s.data[k] != val(k) || s.deliveries[k] < 1 {
			return fmt.Errorf("key %d: content %q delivered %d times", k, s.data[k], s.deliveries[k])
		}
	}
	return nil
}

// fakeProvider is a budget.Provider that makes exactly one attempt per call
// (no pacing, no retries), so tests run fast. stop, if set, is consulted
// before the attempt: a non-nil error is returned without attempting. An
// attempt whose outcome's Err is a *budget.Error ends the call with it.
type fakeProvider struct {
	stop  func() *budget.Error
	calls atomic.Int64
	// rate is the pacing rate Snapshot reports (0: none), with no
	// request in flight: an automatic fetch-ahead window widens by it.
	rate float64
}

var _ budget.Provider = (*fakeProvider)(nil)

func (p *fakeProvider) Do(ctx context.Context, _ *budget.Run, attempt func(context.Context) forage.Outcome, _ ...budget.CallOption) error {
	if err := ctx.Err(); err != nil {
		return &budget.Error{Reason: forage.ReasonCanceled, Err: err}
	}
	if p.stop != nil {
		if e := p.stop(); e != nil {
			return e
		}
	}
	p.calls.Add(1)
	actx, cancel := context.WithCancel(ctx)
	out := attempt(actx)
	cancel()
	var be *budget.Error
	switch {
	case errors.As(out.Err, &be): // a source scripting the provider's verdict
		return be
	case out.Err == nil && (out.Status == 0 || out.Status/100 == 2):
		return nil
	case out.Status == 429:
		return &budget.Error{Reason: forage.ReasonThrottled, Status: 429, Until: time.Now().Add(out.RetryAfter)}
	case out.Status == 418:
		return &budget.Error{Reason: forage.ReasonBanned, Status: 418, Until: time.Now().Add(out.RetryAfter)}
	case out.Status >= 500 || out.Err != nil:
		return &budget.Error{Reason: forage.ReasonUnavailable, Status: out.Status, Err: out.Err}
	}
	return &budget.Error{Reason: forage.ReasonPermanent, Status: out.Status, Err: out.Err}
}

func (p *fakeProvider) Snapshot() budget.Snapshot {
	return budget.Snapshot{Key: "fake", Rate: p.rate, Share: 1, Phase: "probe"}
}

// stopAfter returns a stop hook that lets n calls through and then stops
// every call with reason (and until).
func stopAfter(n int, reason forage.Reason, until time.Time) func() *budget.Error {
	var calls atomic.Int64
	return func() *budget.Error {
		if calls.Add(1) > int64(n) {
			return &budget.Error{Reason: reason, Until: until}
		}
		return nil
	}
}

// rig is a stream wired to test doubles.
type rig struct {
	store *faultStore
	src   *memSource
	sink  *memSink
	prov  *fakeProvider
	// ahead, if set, is the runners' source instead of src (which it
	// wraps): a Predictor, so stream runs fetch ahead.
	ahead *aheadSource
	// tx makes the runners' sink a TxSink (see txSink): the Sink a runner
	// is configured with writes inside a transaction with the store's
	// commit. lastTx is the last one made; all share txLock.
	tx     bool
	txLock chan struct{}
	lastTx *txSink
	// now, if set, is the runners' clock.
	now func() time.Time
}

// newRig returns a rig of n records served page by page. Call it inside
// the synctest bubble the runs use, if any.
func newRig(n, page int) *rig {
	return &rig{store: newStore(nil), src: newSource(n, page), sink: newSink(), prov: &fakeProvider{}, txLock: make(chan struct{}, 1)}
}

const stream = "test/stream"

// runner returns a Runner over the rig in mode, after applying opts.
func (g *rig) runner(tb tb, mode checkpoint.Mode, opts ...func(*slice.Config[rec])) *slice.Runner[rec] {
	tb.Helper()
	cfg := slice.Config[rec]{
		Stream: stream, Mode: mode, Store: g.store, Provider: g.prov, Source: g.src, Sink: g.sink,
	}
	if g.ahead != nil {
		cfg.Source = g.ahead
	}
	if g.now != nil {
		cfg.Now = g.now
	}
	for _, o := range opts {
		o(&cfg)
	}
	if g.tx {
		x := &txSink{write: cfg.Sink, mem: g.sink, store: g.store, lock: g.txLock}
		x.log, _ = cfg.Sink.(*writeLog)
		cfg.Sink, cfg.TxSink, g.lastTx = nil, x, x
	}
	r, err := slice.New(cfg)
	if err != nil {
		tb.Fatalf("slice.New: %v", err)
	}
	return r
}

// checkSinkGate returns a commit check: the cursor never passes the last
// page the sink confirmed, and no record below it is missing.
func checkSinkGate(sink *memSink) func(checkpoint.Key, []byte) error {
	return func(key checkpoint.Key, c []byte) error {
		at := position(c)
		sink.mu.Lock()
		confirmed := sink.confirmed
		sink.mu.Unlock()
		if at > confirmed {
			return fmt.Errorf("commit of %v at %d passes the sink's confirmed %d", key, at, confirmed)
		}
		if k := sink.holeBelow(at); k >= 0 {
			return fmt.Errorf("commit of %v at %d while record %d is not in the sink", key, at, k)
		}
		return nil
	}
}
