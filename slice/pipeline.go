package slice

import (
	"bytes"
	"context"
	"fmt"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// A stream run is a pipeline: slices are planned from the cursor the slice
// before them is predicted to end at ([Predictor]) and fetched
// concurrently, while their pages land strictly in order, each written and
// committed before the next one is looked at. A page that ends elsewhere
// than predicted discards, unwritten, every slice planned after it, and
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
	for {
		p.plan(ctx)
		if len(p.q) == 0 {
			return s.halted(ctx, cp.Cursor, p.halt)
		}
		f := p.pop()
		page, stop, err := s.land(f.sl, f.wait())
		if err != nil {
			return err
		}
		if stop != nil {
			p.abandon() // stop calling the provider before recording the gap
			return s.deferStream(ctx, cp.Cursor, stop)
		}
		if err := p.keepLease(ctx); err != nil {
			return err
		}
		if err := s.write(ctx, f.sl, page); err != nil {
			return err
		}
		s.rep.Records += len(page.Records)
		if bytes.Equal(page.Next, cp.Cursor) {
			// The source made no progress (a poll that found nothing new):
			// caught up, with nothing to commit.
			p.abandon()
			if err := s.cover(ctx, page.Covered); err != nil {
				return err
			}
			return s.caughtUp(ctx)
		}
		cp, err = r.cfg.Store.Commit(ctx, r.key, page.Next, cp.Version, s.lease)
		if err != nil {
			return fmt.Errorf("slice: %v: commit cursor %q: %w", r.key, page.Next, err)
		}
		s.rep.Slices++
		s.rep.Cursor = cp.Cursor
		if err := s.cover(ctx, page.Covered); err != nil {
			return err
		}
		r.log.DebugContext(ctx, "slice: committed", "cursor", string(cp.Cursor), "records", len(page.Records), "range", f.sl.Range)
		p.landed(ctx, f, page.Next)
	}
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
}

// wait returns the result of the fetch once it is in.
func (f *flight[R]) wait() fetched[R] {
	res := <-f.done
	if f.cancel != nil {
		f.cancel()
	}
	return res
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
	window int // slices in flight at most: 1 + Config.Prefetch
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
		p.pred, p.window = pred, 1+s.r.cfg.Prefetch
	}
	return p
}

// plan starts fetches after the last planned cursor until the pipeline is
// full, a slice has no prediction, or planning halts. Each start is a
// slice boundary: the run's budget is checked and the lease renewed there,
// as before a fetch of a run without prefetch.
func (p *pipeline[R]) plan(ctx context.Context) {
	s := p.s
	for p.open && p.halt == nil && len(p.q) < p.window {
		sl, ok, err := s.r.cfg.Source.Next(ctx, p.next, checkpoint.Range{})
		if err != nil {
			p.halt = &halt{err: fmt.Errorf("slice: %v: plan the slice after cursor %q: %w", s.r.key, p.next, err)}
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
func (p *pipeline[R]) launch(ctx context.Context, sl Slice) *flight[R] {
	f := &flight[R]{sl: sl, done: make(chan fetched[R], 1)}
	if p.pred == nil {
		f.done <- p.s.fetch(ctx, sl)
		return f
	}
	fctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	go func() {
		defer func() {
			if v := recover(); v != nil {
				f.done <- fetched[R]{panicked: v}
			}
		}()
		f.done <- p.s.fetch(fctx, sl)
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

// landed takes note that f's page was committed at next. If f's page ended
// where it was predicted to, the slices planned after it stand; otherwise
// they are discarded and planning starts again from next.
func (p *pipeline[R]) landed(ctx context.Context, f *flight[R], next []byte) {
	if f.expect != nil && bytes.Equal(next, f.expect) {
		return
	}
	if len(p.q) > 0 {
		p.s.r.log.DebugContext(ctx, "slice: page ended elsewhere than predicted, discarding the slices fetched ahead",
			"predicted", string(f.expect), "cursor", string(next), "discarded", len(p.q))
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
