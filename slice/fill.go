package slice

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// task is one time range to fetch, resumed after cursor (empty: from the
// start of the range).
type task struct {
	r      checkpoint.Range
	cursor []byte
}

// Fill fetches the given time ranges, such as [PlanFill] returns, slice by
// slice: [Source.Next] is asked for the slices inside each range. A fill
// fetches one slice at a time ([Config.Prefetch] applies to [Runner.Run]
// only). A fill
// never moves the stream's checkpoint: it repairs history, it does not
// advance the bookmark. With [Config.Series] set it skips the parts of each
// range that are already covered and adds the Covered range of every durable
// page.
//
// Fill holds the stream's lease like [Runner.Run] (a held lease is a yield)
// and stops like it: budget exhaustion and source pressure are not errors;
// each range not yet fetched is recorded as a range gap (its Range, and as
// Cursor the position reached inside it), for [Runner.Drain] to finish
// later. Empty ranges are skipped. run may be nil (unbounded).
//
// With no checkpoint to fence, a fill relies on the lease renewal at each
// slice boundary: a filler that stalled past its TTL and was taken over
// stops there with [checkpoint.ErrLeaseLost]. At worst it wrote one slice
// more, which the idempotent sink absorbs. It also renews the lease before
// it records range gaps, so a stale filler records none.
func (r *Runner[R]) Fill(ctx context.Context, run *budget.Run, ranges []checkpoint.Range) (Report, error) {
	return r.leased(ctx, run, func(s *session[R]) error {
		var tasks []task
		for _, rg := range ranges {
			if rg.Empty() {
				continue
			}
			ts, err := s.tasks(ctx, rg, nil)
			if err != nil {
				return err
			}
			tasks = append(tasks, ts...)
		}
		_, err := s.fill(ctx, tasks)
		return err
	})
}

// Drain recovers the stream's pending gap records: it pages
// through every unresolved gap of the runner's stream and mode, oldest
// first, until none is left or the run's budget or the provider stops it.
// The page size ([Config.GapBatch]) is a transport batch, never a reason to
// stop.
//
// A gap is one of two kinds, told apart by its Range:
//
//   - A range gap (non-zero Range: a fill that stopped, or a detail gap the
//     host recorded with [checkpoint.Gaps.AddGap]) names history to fetch.
//     Drain fills its Range, resuming after its Cursor, and resolves it once
//     the range is fetched. If the run stops inside it, what is left is
//     recorded as new range gaps first, and then the gap is resolved, so
//     nothing is lost even to a crash between the two (at worst the range
//     is fetched twice, which an idempotent sink absorbs).
//   - A cursor gap (zero Range: a stream run that stopped early) is the
//     honest record of a deferral. The checkpoint already says where to
//     resume, so there is nothing to fetch from the gap itself: if any is
//     pending, Drain ends with a stream run ([Runner.Run]), which resolves
//     the cursor gaps it passes.
//
// Range gaps are filled one slice at a time, like [Runner.Fill]; the
// closing stream run fetches ahead like Run. Drain stops like Run: a Report with the Reason for budget exhaustion and
// source pressure, an error for anything else (the gap being filled stays
// pending). run may be nil (unbounded).
func (r *Runner[R]) Drain(ctx context.Context, run *budget.Run) (Report, error) {
	return r.leased(ctx, run, func(s *session[R]) error {
		cursorGaps, stopped, err := s.drainRanges(ctx)
		if err != nil || stopped || !cursorGaps {
			return err
		}
		return s.stream(ctx)
	})
}

// drainRanges fills every pending range gap of the stream and reports
// whether it saw a cursor gap, and whether the run had to stop.
func (s *session[R]) drainRanges(ctx context.Context) (cursorGaps, stopped bool, err error) {
	err = s.eachGap(ctx, func(g checkpoint.Gap) (bool, error) {
		if g.Range.IsZero() {
			cursorGaps = true
			return true, nil
		}
		tasks, err := s.tasks(ctx, g.Range, g.Cursor)
		if err != nil {
			return false, err
		}
		if stopped, err = s.fill(ctx, tasks); err != nil {
			return false, err
		}
		// On a stop, fill has recorded the remainder as new gaps already.
		if err := s.resolve(ctx, g.ID); err != nil {
			return false, err
		}
		return !stopped, nil
	})
	return cursorGaps, stopped, err
}

// tasks splits rg, resumed after cursor, into the pieces to fetch: the parts
// not yet covered in the series, or all of rg when no coverage is kept or
// the fill resumes mid-range (the cursor is a position in the whole range).
func (s *session[R]) tasks(ctx context.Context, rg checkpoint.Range, cursor []byte) ([]task, error) {
	if len(cursor) > 0 || s.r.cfg.Series == "" {
		return []task{{r: rg, cursor: cursor}}, nil
	}
	cov, err := s.r.cfg.Store.Coverage(ctx, s.r.cfg.Series)
	if err != nil {
		return nil, fmt.Errorf("slice: %v: read coverage of series %q: %w", s.r.key, s.r.cfg.Series, err)
	}
	var out []task
	for _, m := range cov.Missing(rg) {
		out = append(out, task{r: m})
	}
	return out, nil
}

// fill fetches the tasks in order. When the run must stop, it records the
// rest (the current task from the position reached, and every later task)
// as range gaps and reports stopped.
func (s *session[R]) fill(ctx context.Context, tasks []task) (stopped bool, err error) {
	for i, t := range tasks {
		pos := t.cursor
		var passed passedCursors
		passed.add(pos)
		for {
			sl, ok, err := s.r.cfg.Source.Next(ctx, pos, t.r)
			if err != nil {
				return false, fmt.Errorf("slice: %v: plan the slice after cursor %q in %v: %w", s.r.key, cursorText(pos), t.r, err)
			}
			if !ok {
				break
			}
			sl.After = pos
			page, stop, err := s.slice(ctx, sl)
			if err != nil {
				return false, err
			}
			if stop != nil {
				rest := append([]task{{r: t.r, cursor: pos}}, tasks[i+1:]...)
				return true, s.deferFill(ctx, rest, stop)
			}
			s.rep.Records += len(page.Records)
			if err := s.cover(ctx, page.Covered); err != nil {
				return false, err
			}
			if bytes.Equal(page.Next, pos) {
				if stop := s.behind(page); stop != nil {
					// Due, not published yet: the rest of the range is
					// not done (resolved, a drained gap lost it for good).
					rest := append([]task{{r: t.r, cursor: pos}}, tasks[i+1:]...)
					return true, s.deferFill(ctx, rest, stop)
				}
				break // no progress: the range is done
			}
			if _, back := passed.set[string(page.Next)]; back {
				return false, fmt.Errorf("slice: %v: filling %v, slice after cursor %q: %w: Page.Next %q goes back to a cursor this fill passed (a Source whose cursor cycles would fetch the same pages for good)",
					s.r.key, t.r, cursorText(pos), ErrInvalidPage, cursorText(page.Next))
			}
			passed.add(page.Next)
			s.rep.Slices++
			pos = page.Next
		}
	}
	return false, nil
}

// deferFill records each unfetched task as a range gap.
func (s *session[R]) deferFill(ctx context.Context, rest []task, stop *budget.Error) error {
	if err := s.stopping(ctx, stop); err != nil {
		return err
	}
	for _, t := range rest {
		g := checkpoint.Gap{Key: s.r.key, Cursor: t.cursor, Range: t.r, Reason: string(stop.Reason)}
		if _, err := s.addGap(ctx, g, stop); err != nil {
			return err
		}
	}
	return nil
}

// behind returns the stop of a page that made no progress because the
// provider has not published yet what its slice asks for (see
// [Page.NotYet]), or nil when the page is caught up.
func (s *session[R]) behind(page Page[R]) *budget.Error {
	if page.NotYet.IsZero() {
		return nil
	}
	until := page.NotYet
	if now := s.r.cfg.Now(); until.Before(now) {
		until = now
	}
	return &budget.Error{Reason: forage.ReasonBehind, Until: until,
		Err: errors.New("slice: the provider has not published what the slice asks for yet")}
}
