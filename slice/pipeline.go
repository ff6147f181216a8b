package slice

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// A stream run is a pipeline: slices are planned from the cursor the slice
// before them is predicted to end at ([Predictor]) and fetched
// concurrently, while their pages land strictly in order. Whenever the sink
// is free, the oldest page is waited for, and the pages after it that are
// already in and continue it are merged with it (group commit): one write,
// one commit of the last cursor. A page that ends elsewhere than predicted
// ends its batch and discards, unwritten, every slice planned after it, and
// planning starts again from where it actually ended.

// stream is the body of Run: from the checkpoint to caught up or a stop.
func (s *session[R]) stream(ctx context.Context) error {
	r := s.r
	cp, err := r.cfg.Store.Load(ctx, r.key)
	if err != nil {
		return fmt.Errorf("slice: %v: load checkpoint: %w", r.key, err)
	}
	s.rep.Cursor = cp.Cursor
	if err := s.listPending(ctx); err != nil {
		return err
	}
	p := s.pipeline(cp.Cursor)
	defer p.abandon()
	var passed passedCursors
	passed.add(cp.Cursor)
	for {
		p.plan(ctx)
		if len(p.q) == 0 {
			return s.halted(ctx, cp.Cursor, p.halt)
		}
		full := len(p.q) >= p.window
		f := p.pop()
		res := f.wait()
		p.adapt(f, full)
		page, stop, err := s.land(f.sl, res)
		if err != nil {
			if s.rep.Reason == forage.ReasonPermanent {
				p.abandon()
				return s.refused(ctx, cp.Cursor, err)
			}
			return err
		}
		if stop != nil {
			p.abandon() // stop calling the provider before recording the gap
			return s.deferStream(ctx, cp.Cursor, stop)
		}
		b := p.gather(f, page)
		if err := checkPassed(&passed, cp.Cursor, b); err != nil {
			p.abandon()
			return fmt.Errorf("slice: %v: %w", r.key, err)
		}
		if err := ctx.Err(); err != nil {
			// Stopped while the fetch was under way: the run stops at this
			// slice boundary, the page unwritten (the next run fetches it
			// again), rather than written and then left uncommitted.
			p.abandon()
			return fmt.Errorf("slice: %v: stopped before writing the slice after cursor %q: %w", r.key, cursorText(b.first.sl.After), err)
		}
		if err := p.keepLease(ctx); err != nil {
			return err
		}
		last := slices.ContainsFunc(b.pages, func(pg Page[R]) bool { return pg.Last })
		if b.held() && !last {
			p.plan(ctx) // keep the window fetching while b is made durable
		}
		if bytes.Equal(b.page.Next, cp.Cursor) {
			// The source made no progress (a poll that found nothing new):
			// caught up, with nothing to commit. Such a page ends where
			// its slice began, never where predicted, so b holds it alone.
			if err := s.written(ctx, b); err != nil {
				return err
			}
			p.abandon()
			if err := s.cover(ctx, b.page.Covered); err != nil {
				return err
			}
			if stop := s.behind(b.page); stop != nil {
				return s.deferStream(ctx, cp.Cursor, stop) // due, not published yet: not caught up
			}
			return s.caughtUp(ctx)
		}
		if cp, err = s.commit(ctx, cp, b); err != nil {
			return err
		}
		for _, pg := range b.pages {
			passed.add(pg.Next)
		}
		if last {
			// The provider said nothing comes after it for now.
			p.abandon()
			return s.caughtUp(ctx)
		}
		p.landed(ctx, b.last, b.page.Next)
	}
}

// passedCursors remembers the last maxPassed cursors a stream run passed
// (the one it started at and each page's Next it committed), so a Source
// whose cursor goes back to one of them is caught: committed, its pages
// would be fetched and written again and again, each run a success, until
// a budget ran out (a page after cursor 30 that said Next 10 was fetched
// 574,000 times in a minute).
type passedCursors struct {
	set  map[string]struct{}
	ring []string
	next int
}

// maxPassed bounds the cursors passedCursors keeps: a cycle longer than
// that many slices goes unseen.
const maxPassed = 1024

// add records cursor as passed.
func (c *passedCursors) add(cursor []byte) {
	if c.set == nil {
		c.set = make(map[string]struct{})
	}
	k := string(cursor)
	if _, ok := c.set[k]; ok {
		return
	}
	if len(c.ring) < maxPassed {
		c.ring = append(c.ring, k)
	} else {
		delete(c.set, c.ring[c.next])
		c.ring[c.next], c.next = k, (c.next+1)%maxPassed
	}
	c.set[k] = struct{}{}
}

// checkPassed returns an error wrapping [ErrInvalidPage] when a page of b ends
// at a cursor the run passed: at the cursor committed last only for the
// first page, whose slice began there (no progress: caught up).
func checkPassed[R any](c *passedCursors, cursor []byte, b batch[R]) error {
	for i, pg := range b.pages {
		_, back := c.set[string(pg.Next)]
		twice := slices.ContainsFunc(b.pages[:i], func(q Page[R]) bool { return bytes.Equal(q.Next, pg.Next) })
		if (back || twice) && !(i == 0 && bytes.Equal(pg.Next, cursor)) {
			return fmt.Errorf("%w: Page.Next %q goes back to a cursor this run passed (a Source whose cursor cycles would fetch the same pages for good)", ErrInvalidPage, cursorText(pg.Next))
		}
	}
	return nil
}

// written writes batch b with the sink and counts its records.
func (s *session[R]) written(ctx context.Context, b batch[R]) error {
	if err := s.write(ctx, b.first.sl, len(b.pages), b.page); err != nil {
		return err
	}
	s.rep.Records += len(b.page.Records)
	return nil
}

// commit makes batch b durable and commits the cursor after it over cp: a
// Sink write, then Store.Commit, or one TxSink.Commit. It counts the
// batch's slices in the report and adds its coverage.
func (s *session[R]) commit(ctx context.Context, cp checkpoint.Checkpoint, b batch[R]) (checkpoint.Checkpoint, error) {
	r := s.r
	var err error
	if tx := r.cfg.TxSink; tx != nil {
		if cp, err = tx.Commit(ctx, r.key, b.page, cp.Version, s.lease); err != nil {
			return cp, fmt.Errorf("slice: %v: write %s after cursor %q and commit cursor %q in one transaction: %w",
				r.key, nSlices(len(b.pages)), cursorText(b.first.sl.After), cursorText(b.page.Next), err)
		}
		s.rep.Records += len(b.page.Records)
	} else {
		if err := s.written(ctx, b); err != nil {
			return cp, err
		}
		if cp, err = r.cfg.Store.Commit(ctx, r.key, b.page.Next, cp.Version, s.lease); err != nil {
			return cp, fmt.Errorf("slice: %v: commit cursor %q: %w", r.key, cursorText(b.page.Next), err)
		}
	}
	s.rep.Slices += len(b.pages)
	s.rep.Commits++
	s.rep.Cursor = cp.Cursor
	if r.log.Enabled(ctx, slog.LevelDebug) {
		attrs := []any{"cursor", shown(cp.Cursor), "records", len(b.page.Records), "slices", len(b.pages)}
		if rg := b.first.sl.Range; !rg.IsZero() {
			attrs = append(attrs, "range", rg) // a cursor stream's slices have none
		}
		r.log.DebugContext(ctx, "slice: committed", attrs...)
	}
	return cp, s.cover(ctx, b.page.Covered)
}

// halted ends a stream run whose pipeline is empty, for the reason
// planning stopped: h is never nil then (an empty, open pipeline plans a
// slice or halts).
func (s *session[R]) halted(ctx context.Context, cursor []byte, h *halt) error {
	switch {
	case h.err != nil:
		return h.err
	case h.stop != nil:
		return s.deferStream(ctx, cursor, h.stop)
	}
	return s.caughtUp(ctx)
}

// flight is one slice whose fetch has started.
type flight[R any] struct {
	sl Slice
	// expect is the predicted cursor after sl, which the next slice was
	// planned after; nil when nothing was planned after sl.
	expect []byte
	// cancel ends the fetch's context; nil for a fetch made inline.
	cancel context.CancelFunc
	// done receives the fetch's result, once (buffered: a fetch never
	// waits for the run to look).
	done chan fetched[R]
	// started is closed when the fetch's first attempt begins, or when
	// the fetch returns without one: the fetch after it calls the
	// provider only then (see launch).
	started chan struct{}
	res     fetched[R] // the result, once in is set
	in      bool       // whether the result was received from done
}

// wait returns the result of the fetch once it is in.
func (f *flight[R]) wait() fetched[R] {
	if !f.in {
		f.take(<-f.done)
	}
	return f.res
}

// ready reports whether the fetch's result is in, without waiting for it.
func (f *flight[R]) ready() bool {
	if f.in {
		return true
	}
	select {
	case res := <-f.done:
		f.take(res)
		return true
	default:
		return false
	}
}

// take keeps the fetch's result, received from done, and ends its context.
func (f *flight[R]) take(res fetched[R]) {
	f.res, f.in = res, true
	if f.cancel != nil {
		f.cancel()
	}
}

// halt is why planning stopped before the pipeline was full. It is acted
// on only once every slice planned before it has landed as predicted; a
// page that ends elsewhere clears it, and planning starts again.
type halt struct {
	err  error         // Source.Next or the lease renewal failed
	stop *budget.Error // the run's budget is spent at the boundary
	// neither: Source.Next has no slice after the cursor (caught up)
}

// pipeline holds a stream run's slices in flight, oldest first.
type pipeline[R any] struct {
	s *session[R]
	// pred predicts cursors; nil means one slice at a time, fetched inline
	// (the Source is no Predictor, or Config.Prefetch is NoPrefetch).
	pred   Predictor
	window int              // slices in flight at most: 1 + Config.Prefetch, or more (see adapt)
	auto   bool             // the window adapts (see adapt)
	took   [8]time.Duration // how long the last successful fetches took (see adapt)
	ntook  int
	rate   float64 // the provider's rate at the last look (see adapt)
	q      []*flight[R]
	next   []byte // the cursor the next slice is planned after
	open   bool   // false while the last slice in q has no prediction
	halt   *halt  // why planning stopped, if it did
}

// pipeline returns the empty pipeline of a stream run starting after
// cursor.
func (s *session[R]) pipeline(cursor []byte) *pipeline[R] {
	p := &pipeline[R]{s: s, window: 1, next: cursor, open: true}
	if pred, ok := s.r.cfg.Source.(Predictor); ok && s.r.cfg.Prefetch != NoPrefetch {
		p.pred, p.window, p.auto = pred, 1+s.r.cfg.Prefetch, s.r.autoPrefetch
	}
	return p
}

// adapt widens an automatic window (Config.Prefetch 0) by one slice as f
// lands, when the run had its window full and the provider still has
// fewer attempts in flight than it needs to be kept busy (Little's law:
// its pacing rate times the round trip, taken as the shortest of the last
// fetches, which an idle pacer does not hold up): a provider far away,
// which the default window would leave idle between answers (9 in flight
// call a provider 100 ms away at most 90 times a second). Each stream
// widens only while the provider as a whole lacks attempts in flight, up
// to 1.5 times what it needs plus two and 1+autoPrefetch; it never
// narrows within a run, since a window wider than needed only queues
// fetches at the provider's pacer. While the provider's slow start is
// still climbing, it widens only while the attempts in flight number under
// two thirds of that need (see slowStartLag): that rate is a guess the
// next refusal corrects (a fixed window spent at a slow start's rate
// refuses every request in flight), unlike one held at a cap or declared;
// but slow start climbs only while the caller uses its rate, so a stream
// that holds the sends well under it holds the climb back for good (one
// stream 100 ms from a 200/s provider sent 54/s for a whole 30 s run).
func (p *pipeline[R]) adapt(f *flight[R], full bool) {
	if !p.auto || f.res.err != nil || f.res.took <= 0 {
		return
	}
	p.took[p.ntook%len(p.took)] = f.res.took
	p.ntook++
	if !full || p.window >= 1+autoPrefetch {
		return
	}
	snap := p.s.r.cfg.Provider.Snapshot()
	climbing := (snap.Phase == aimd.PhaseSlowStart.String() || snap.Phase == aimd.PhaseStart.String()) && snap.Rate != p.rate
	p.rate = snap.Rate
	share := snap.Share
	if share <= 0 {
		share = 1
	}
	need := snap.Rate * share * slices.Min(p.took[:min(p.ntook, len(p.took))]).Seconds()
	lag := 1.0
	if climbing {
		// A rate doubling by the quarter second says nothing yet of what
		// the provider takes; but slow start climbs only while the caller
		// uses the rate (up to twice what it sends), so a window that
		// holds the sends well under it holds slow start back too, for
		// good: widen only then.
		lag = slowStartLag
	}
	if float64(snap.InFlight)*lag < need && float64(p.window) < 1.5*need+2 {
		p.window++
	}
}

// slowStartLag is how far under the provider's need (see adapt) the
// attempts in flight must be for a window to widen while slow start
// climbs: well under, the stream holds the sends back, not the rate.
const slowStartLag = 1.5

// plan starts fetches after the last planned cursor until the pipeline is
// full, a slice has no prediction, or planning halts. Each start is a
// slice boundary: the run's budget is checked and the lease renewed there,
// as before a fetch of a run without prefetch.
func (p *pipeline[R]) plan(ctx context.Context) {
	s := p.s
	for p.open && p.halt == nil && len(p.q) < p.window {
		sl, ok, err := s.r.cfg.Source.Next(ctx, p.next, checkpoint.Range{})
		if err != nil {
			p.halt = &halt{err: fmt.Errorf("slice: %v: plan the slice after cursor %q: %w", s.r.key, cursorText(p.next), err)}
			return
		}
		if !ok {
			p.halt = &halt{}
			return
		}
		sl.After = p.next
		if stop, err := s.boundary(ctx); stop != nil || err != nil {
			p.halt = &halt{err: err, stop: stop}
			return
		}
		f := p.launch(ctx, sl)
		p.q = append(p.q, f)
		if p.pred == nil {
			p.open = false
			return
		}
		next, ok := p.pred.Expect(sl)
		if !ok || len(next) == 0 || bytes.Equal(next, sl.After) {
			p.open = false // nothing to plan after sl before its page is in
			return
		}
		f.expect, p.next = next, next
	}
}

// launch starts the fetch of sl: inline when the pipeline holds one slice
// at a time, else on a goroutine of its own whose context abandon cancels.
// A panic of the Source's Fetch is carried over to the run's goroutine.
//
// A fetch ahead calls the provider only once the fetch before it began its
// first attempt (or ended without one), so the run's budget admits the
// slices' first attempts in slice order: a later slice never takes the
// last request a run may make from the slice before it, whose stop would
// throw its page away. The pacer books their slots in that order anyway.
func (p *pipeline[R]) launch(ctx context.Context, sl Slice) *flight[R] {
	f := &flight[R]{sl: sl, done: make(chan fetched[R], 1), started: make(chan struct{})}
	if p.pred == nil {
		f.done <- p.s.fetch(ctx, sl, nil)
		close(f.started)
		return f
	}
	var before <-chan struct{}
	if n := len(p.q); n > 0 {
		before = p.q[n-1].started
	}
	fctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	var once sync.Once
	begin := func() { once.Do(func() { close(f.started) }) }
	go func() {
		defer func() {
			begin()
			if v := recover(); v != nil {
				f.done <- fetched[R]{panicked: v}
			}
		}()
		if before != nil {
			select {
			case <-before:
			case <-fctx.Done(): // abandoned: the fetch ends at once, canceled
			}
		}
		f.done <- p.s.fetch(fctx, sl, begin)
	}()
	return f
}

// keepLease renews the lease, when due, as a page fetched ahead lands: a
// pipeline draining its slices starts no fetch, so no boundary renews it.
// One slice at a time, the boundary before each fetch is enough.
func (p *pipeline[R]) keepLease(ctx context.Context) error {
	if p.pred == nil {
		return nil
	}
	return p.s.keepLease(ctx, p.s.r.cfg.Now())
}

// pop removes the oldest slice in flight: the next to land.
func (p *pipeline[R]) pop() *flight[R] {
	f := p.q[0]
	p.q[0] = nil
	p.q = p.q[1:]
	return f
}

// batch is what one write and one commit of a stream run make durable:
// the pages of the slices first .. last, in order, merged into page.
type batch[R any] struct {
	first, last *flight[R]
	pages       []Page[R]
	page        Page[R]
}

// gather makes the batch that starts with head, whose fetch landed page:
// head's page, then the pages of the slices after it that can be made
// durable with it. It takes the next slice as long as the batch is below
// Config.MaxBatch, the batch's last page ended where it was predicted to
// (else what follows is discarded by landed), the slice's fetch is already
// in (never waited for), and its page is valid, makes progress and leaves
// no hole in the batch's Covered range. A page that made no progress never
// ends where predicted (plan predicts nothing after such a slice), so it
// is always a batch of its own. The first slice that fails a test
// stays in the pipeline: a stop, an error or a page that made no progress
// is acted on once the batch is committed, as without batching. The run
// waits for head alone, so a batch holds what landed while the batch
// before it was being made durable.
func (p *pipeline[R]) gather(head *flight[R], page Page[R]) batch[R] {
	b := batch[R]{first: head, last: head, pages: []Page[R]{page}, page: page}
	for len(b.pages) < p.s.r.cfg.MaxBatch && len(p.q) > 0 && b.held() && !b.pages[len(b.pages)-1].Last {
		f := p.q[0]
		if !f.ready() || f.res.panicked != nil || f.res.err != nil || checkPage(f.sl, f.res.page) != nil ||
			bytes.Equal(f.res.page.Next, f.sl.After) {
			break
		}
		covered, ok := union(b.page.Covered, f.res.page.Covered)
		if !ok {
			break
		}
		p.pop()
		b.last, b.pages = f, append(b.pages, f.res.page)
		b.page = Page[R]{Next: f.res.page.Next, Covered: covered}
	}
	if len(b.pages) > 1 {
		b.page.Records = concat(b.pages)
	}
	return b
}

// held reports whether the batch's last page ended where it was predicted
// to, so the slices planned after it stand.
func (b *batch[R]) held() bool {
	return b.last.expect != nil && bytes.Equal(b.page.Next, b.last.expect)
}

// concat returns the records of pages, in order, in one new slice.
func concat[R any](pages []Page[R]) []R {
	n := 0
	for _, pg := range pages {
		n += len(pg.Records)
	}
	recs := make([]R, 0, n)
	for _, pg := range pages {
		recs = append(recs, pg.Records...)
	}
	return recs
}

// union returns the union of the Covered ranges of two pages when it is one
// range: both unknown (zero), or both known and without a hole between
// them. A known and an unknown range have no union that says what was
// answered.
func union(a, b checkpoint.Range) (checkpoint.Range, bool) {
	switch {
	case a.IsZero() && b.IsZero():
		return a, true
	case a.IsZero() || b.IsZero() || b.Start.After(a.End) || a.Start.After(b.End):
		return checkpoint.Range{}, false
	}
	u := a
	if b.Start.Before(u.Start) {
		u.Start = b.Start
	}
	if b.End.After(u.End) {
		u.End = b.End
	}
	return u, true
}

// landed takes note that f's page was committed at next. If f's page ended
// where it was predicted to, the slices planned after it stand; otherwise
// they are discarded and planning starts again from next.
func (p *pipeline[R]) landed(ctx context.Context, f *flight[R], next []byte) {
	if f.expect != nil && bytes.Equal(next, f.expect) {
		return
	}
	if len(p.q) > 0 {
		p.s.r.log.DebugContext(ctx, "slice: page ended elsewhere than predicted, discarding the slices fetched ahead",
			"predicted", shown(f.expect), "cursor", shown(next), "discarded", len(p.q))
	}
	p.abandon()
	p.next, p.open, p.halt = next, true, nil
}

// abandon cancels every fetch in flight, waits for each to return, and
// drops their pages: nothing of them is written. The run's goroutine is
// the only one left when it returns.
func (p *pipeline[R]) abandon() {
	for _, f := range p.q {
		if f.cancel != nil {
			f.cancel()
		}
	}
	for _, f := range p.q {
		f.wait()
	}
	p.s.rep.Discarded += len(p.q)
	p.q = nil
}
