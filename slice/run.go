package slice

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/redact"
)

// releaseTimeout bounds the lease release at the end of a run, which runs
// even when the run's context was cancelled.
const releaseTimeout = 10 * time.Second

// session is one leased run: the runner, the run's budget, the lease it
// holds and the report it fills in.
type session[R any] struct {
	r     *Runner[R]
	run   *budget.Run
	lease checkpoint.Lease
	rep   *Report
	// pending are the IDs of the stream's cursor gaps that were unresolved
	// when the stream run started: the only ones it may resolve; atCursor
	// their cursors, by ID.
	pending  []int64
	atCursor map[int64][]byte
}

// Run advances the stream from its checkpoint until it is caught up or the
// run must stop:
//
//	lease the stream ── held elsewhere? yield: Report.Yielded (and HeldBy,
//	                    HeldUntil), nil error
//	load the checkpoint of (stream, mode)
//	for each slice Source.Next plans after the cursor:
//	    budget check (run.ExhaustedAt, at the boundary only) ── spent? gap, stop
//	    fetch through Provider.Do ── exhausted or source pressure? gap, stop
//	    Sink.Write ── error? stop, checkpoint unchanged
//	    Store.Commit(page.Next, version, lease)   (fenced compare-and-swap)
//	      (with a TxSink: TxSink.Commit(page, version, lease), both in one
//	      transaction ── error? stop, checkpoint and records unchanged)
//	    add page.Covered to Config.Series, if set
//	release the lease (always)
//
// When the Source is a [Predictor] (and [Config.Prefetch] is not
// [NoPrefetch]), the loop is pipelined: slice k+1 is planned after the
// cursor slice k is expected to end at, and up to 1+Prefetch fetches run at
// once, each one Provider.Do call with run. A slice boundary is when a
// fetch starts: the budget check and the lease renewal happen there, and a
// spent budget starts no more fetches (the lease is also renewed, when due,
// as each page lands, so slices fetched ahead land under a fresh lease).
// Pages are still judged, written and committed in order, as above, the
// pages that are ready in order when the sink is free merged into one
// Sink.Write and one Store.Commit of the last cursor (or one
// TxSink.Commit) ([Config.MaxBatch];
// Report.Commits counts them): the checkpoint never passes a durable page,
// and a stop on slice k+j lands only after slices k .. k+j-1 are written
// and committed, so its gap is at the last committed cursor as without
// prefetch. When page k ends elsewhere than predicted, it ends its batch,
// the slices planned after it are cancelled and discarded unwritten
// (Report.Discarded), and planning starts again from page k's Next.
//
// Budget exhaustion and source pressure are not errors: Run writes a gap
// record at the last committed cursor and returns a Report whose Reason (and,
// for pressure, Until) says why. Every other stop returns an error and
// writes no gap, except a permanent provider error ([forage.ReasonPermanent],
// with Report.Reason set): retrying cannot help, but the hole after the
// last commit must not pass for the end of the data, so it records a gap at
// that cursor whose Reason is "permanent: " and the error's message
// (redacted, at most 512 bytes). The others are a cancelled ctx (a page
// whose fetch was under way when ctx ended is not written: the run stops
// at that slice boundary), the deadline of ctx (met, or near enough that
// the provider's next pacing slot would come after it: an error that is
// [context.DeadlineExceeded], logged at Info as a cancel is), a Source,
// Sink or Store failure, or a lost lease
// ([checkpoint.ErrLeaseLost]: another owner took the stream over). The
// checkpoint is then the last commit, and the next run resumes from it.
//
// A run that ends without an error resolves the stream's cursor gaps (gaps
// without a Range, see [Runner.Drain]) that were pending when it started:
// it passed their cursor, or its own new gap supersedes them. Gaps recorded
// during the run are never touched. Before it writes or resolves a gap, the
// run renews its lease, so a holder that was taken over while it stalled
// stops there with [checkpoint.ErrLeaseLost] instead of writing a gap at its
// stale cursor or resolving the new holder's. run may be nil (unbounded).
func (r *Runner[R]) Run(ctx context.Context, run *budget.Run) (Report, error) {
	return r.leased(ctx, run, func(s *session[R]) error { return s.stream(ctx) })
}

// leased runs body under the stream's lease and releases it afterwards,
// even when ctx was cancelled. A held lease is a yield, not an error.
func (r *Runner[R]) leased(ctx context.Context, run *budget.Run, body func(*session[R]) error) (Report, error) {
	rep := Report{Stream: r.key.Stream, Mode: r.key.Mode}
	lease, err := r.cfg.Store.Acquire(ctx, r.key.Stream, r.cfg.Owner, r.cfg.LeaseTTL)
	if errors.Is(err, checkpoint.ErrLeaseHeld) {
		rep.Yielded = true
		var held *checkpoint.LeaseHeldError
		if errors.As(err, &held) {
			rep.HeldBy, rep.HeldUntil = held.Lease.Owner, held.Lease.Expires
		}
		r.log.InfoContext(ctx, "slice: yielded, stream leased elsewhere",
			"held_by", rep.HeldBy, "held_until", rep.HeldUntil, "err", redact.String(err.Error()))
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("slice: %v: acquire lease: %w", r.key, err)
	}
	s := &session[R]{r: r, run: run, lease: lease, rep: &rep}
	// Released even when the Source or Sink panics: the panic goes on up
	// to the host (the scheduler turns it into a failed run), and the
	// stream is free for the next run at once rather than when the lease
	// ends.
	defer s.release(ctx)
	err = body(s)
	switch {
	case err != nil && stoppedByHost(ctx, err):
		// The host stopped the run (a shutdown, a scheduler's turn ended,
		// an operator's pause: its cause, which net/http's error wraps
		// instead of context.Canceled; the deadline it gave the run): no
		// failure, and the checkpoint is where the last commit left it.
		r.log.InfoContext(ctx, "slice: run stopped", "err", redact.String(err.Error()), "slices", rep.Slices, "reason", string(rep.Reason))
	case err != nil:
		r.log.ErrorContext(ctx, "slice: run failed", "err", redact.String(err.Error()), "slices", rep.Slices, "reason", string(rep.Reason))
	}
	if err != nil {
		err = redactedError{err}
	}
	return rep, err
}

// stoppedByHost reports whether err ends the run because its host stopped
// it: ctx is done and err is its error or cause, or ctx has a deadline and
// the provider answered at once that its next pacing slot comes after it
// (a budget stop of class Canceled that is [context.DeadlineExceeded]),
// before ctx itself is done.
func stoppedByHost(ctx context.Context, err error) bool {
	if ctx.Err() != nil && (errors.Is(err, ctx.Err()) || errors.Is(err, context.Cause(ctx))) {
		return true
	}
	_, deadline := ctx.Deadline()
	reason, _ := budget.ReasonOf(err)
	return deadline && reason == forage.ReasonCanceled && errors.Is(err, context.DeadlineExceeded)
}

// redactedError is a run's error as the host gets it: its message masks
// credentials (a cursor that is a next-page URL with ?access_token=, a
// Source's own error quoting one), as its log records do; errors.Is and
// errors.As see the error it wraps.
type redactedError struct{ err error }

func (e redactedError) Error() string { return redact.String(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }

// release gives the session's lease back. Correctness never depends on
// it: the lease expires, and a lost lease fences every later commit. So a
// failure is logged, not returned.
func (s *session[R]) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := s.r.cfg.Store.Release(rctx, s.lease); err != nil {
		s.r.log.WarnContext(ctx, "slice: release lease", "err", redact.String(err.Error()))
	}
}

// slice does everything for one slice of a fill short of recording it:
// the boundary checks, the fetch, the page checks and the durable write. A
// non-nil stop means the run must defer (nothing was written); an error
// ends the run.
func (s *session[R]) slice(ctx context.Context, sl Slice) (Page[R], *budget.Error, error) {
	if stop, err := s.boundary(ctx); stop != nil || err != nil {
		return Page[R]{}, stop, err
	}
	page, stop, err := s.land(sl, s.fetch(ctx, sl, nil))
	if stop != nil || err != nil {
		return Page[R]{}, stop, err
	}
	if err := ctx.Err(); err != nil { // stopped during the fetch: not written, fetched again next time
		return Page[R]{}, nil, fmt.Errorf("slice: %v: stopped before writing the slice after cursor %q: %w", s.r.key, cursorText(sl.After), err)
	}
	if err := s.write(ctx, sl, 1, page); err != nil {
		return Page[R]{}, nil, err
	}
	return page, nil, nil
}

// boundary runs the checks due between two slices: the run's budget, and
// the lease renewal once less than half of the TTL is left.
func (s *session[R]) boundary(ctx context.Context) (*budget.Error, error) {
	now := s.r.cfg.Now()
	if reason, spent := s.run.ExhaustedAt(now); spent {
		return &budget.Error{Reason: reason}, nil
	}
	return nil, s.keepLease(ctx, now)
}

// keepLease renews the lease if less than half of the TTL is left at now.
func (s *session[R]) keepLease(ctx context.Context, now time.Time) error {
	r := s.r
	if s.lease.Expires.Sub(now) >= r.cfg.LeaseTTL/2 {
		return nil
	}
	l, err := r.cfg.Store.Renew(ctx, s.lease, r.cfg.LeaseTTL)
	if err != nil {
		return fmt.Errorf("slice: %v: renew lease: %w", r.key, err)
	}
	s.lease = l
	return nil
}

// fetched is what one fetch came back with: the page of the successful
// attempt, or the provider's error, or a panic of the Source to re-raise.
type fetched[R any] struct {
	page     Page[R]
	err      error
	panicked any
	took     time.Duration // from the fetch's start to its end, pacing included
}

// fetch gets sl through the provider, keeping the page of the successful
// attempt. It reads no state a run changes, so fetches ahead run it
// concurrently; [session.land] judges the result. begin, if set, is called
// as each attempt begins.
func (s *session[R]) fetch(ctx context.Context, sl Slice, begin func()) fetched[R] {
	var page Page[R]
	start := time.Now()
	err := s.r.cfg.Provider.Do(ctx, s.run, func(actx context.Context) forage.Outcome {
		if begin != nil {
			begin()
		}
		var out forage.Outcome
		page, out = s.r.cfg.Source.Fetch(actx, sl)
		return out
	})
	return fetched[R]{page: page, err: err, took: time.Since(start)}
}

// land judges the fetch of sl: a valid page, or a stop for budget
// exhaustion and source pressure, or an error for anything else (a
// permanent provider error also sets the report's Reason).
func (s *session[R]) land(sl Slice, f fetched[R]) (Page[R], *budget.Error, error) {
	r := s.r
	if f.panicked != nil {
		panic(f.panicked)
	}
	if f.err == nil {
		if err := checkPage(sl, f.page); err != nil {
			return Page[R]{}, nil, fmt.Errorf("slice: %v: slice after cursor %q: %w", r.key, cursorText(sl.After), err)
		}
		return f.page, nil, nil
	}
	var be *budget.Error
	if errors.As(f.err, &be) && (be.Reason.Exhausted() || be.Reason.SourcePressure()) {
		return Page[R]{}, be, nil
	}
	if errors.As(f.err, &be) && be.Reason == forage.ReasonPermanent {
		s.rep.Reason, s.rep.Stop = forage.ReasonPermanent, be
	}
	return Page[R]{}, nil, fmt.Errorf("slice: %v: fetch the slice after cursor %q: %w", r.key, cursorText(sl.After), f.err)
}

// checkPage enforces the Source contract on the page fetched for sl. An
// empty Next with no records at a stream's very start says it has nothing
// yet (no progress: caught up); anywhere else, or with records, the page
// is broken (a source that forgot its cursor would fetch them for good).
func checkPage[R any](sl Slice, p Page[R]) error {
	if len(p.Next) == 0 && (len(sl.After) > 0 || len(p.Records) > 0) {
		if p.Last {
			// A provider's last page often carries no cursor (next: null):
			// the Source must still say where the next run resumes.
			return fmt.Errorf("%w: Page.Next must not be empty, on the last page too: the position after its records (its last record's id or time), where the next run asks from (got %d records after cursor %q, Last)", ErrInvalidPage, len(p.Records), cursorText(sl.After))
		}
		return fmt.Errorf("%w: Page.Next must not be empty (got %d records after cursor %q)", ErrInvalidPage, len(p.Records), cursorText(sl.After))
	}
	if len(p.Records) > 0 && string(p.Next) == string(sl.After) {
		// The records would be fetched and written again by the next run,
		// and the one after: every run a duplicate, counted as collected.
		return fmt.Errorf("%w: Page.Next must move past the page's records (got %d records and Next equal to the cursor %q they were fetched after)", ErrInvalidPage, len(p.Records), cursorText(sl.After))
	}
	if !p.Covered.IsZero() && p.Covered.Empty() {
		return fmt.Errorf("%w: Page.Covered must be zero or non-empty (got %v)", ErrInvalidPage, p.Covered)
	}
	return nil
}

// write hands a non-empty page to the sink and waits until it is durable:
// the page of n slices merged, the first of them sl.
func (s *session[R]) write(ctx context.Context, sl Slice, n int, page Page[R]) error {
	if len(page.Records) == 0 {
		return nil
	}
	if err := s.r.sink.Write(ctx, page); err != nil {
		return fmt.Errorf("slice: %v: sink write of %s after cursor %q: %w", s.r.key, nSlices(n), cursorText(sl.After), err)
	}
	return nil
}

// nSlices names n slices in an error message: "the slice", "the 3 slices".
func nSlices(n int) string {
	if n > 1 {
		return fmt.Sprintf("the %d slices", n)
	}
	return "the slice"
}

// cover records a durable page's covered range in the series, if kept.
func (s *session[R]) cover(ctx context.Context, covered checkpoint.Range) error {
	if s.r.cfg.Series == "" || covered.IsZero() {
		return nil
	}
	if err := s.r.cfg.Store.AddCoverage(ctx, s.r.cfg.Series, covered); err != nil {
		return fmt.Errorf("slice: %v: add coverage %v to series %q: %w", s.r.key, covered, s.r.cfg.Series, err)
	}
	return nil
}

// deferStream records why the stream run stopped at cursor (the last
// committed one) and supersedes the cursor gaps pending at the start.
func (s *session[R]) deferStream(ctx context.Context, cursor []byte, stop *budget.Error) error {
	if err := s.stopping(ctx, stop); err != nil {
		return err
	}
	reason := string(stop.Reason)
	if stop.Status < 300 && stop.Err != nil && stop.Reason != forage.ReasonDeadline && stop.Reason != forage.ReasonRequestCap {
		// No answer at all (refused connection, unknown host, timeout), or
		// one whose status said success but that the Source could not use
		// (a body that does not decode, a stuck cursor): the gap says why,
		// as the status would not. A run's spent clock or request cap is
		// its own why (its error is the pacer's "the next slot comes after
		// the deadline").
		reason = gapReason(stop.Reason, stop.Err)
	}
	if _, err := s.addGap(ctx, checkpoint.Gap{Key: s.r.key, Cursor: cursor, Reason: reason}, stop); err != nil {
		return err
	}
	return s.resolvePending(ctx)
}

// refused ends a stream run whose provider answered with a permanent
// error (a broken contract, a lie, an unknown symbol): it records a gap at
// cursor (the last committed one) whose reason names the error, so the
// hole after it is never mistaken for the end of the data, and returns
// err. The gaps pending at the start stay pending: the run did not pass
// them. A run that later passes the cursor resolves the gap.
func (s *session[R]) refused(ctx context.Context, cursor []byte, err error) error {
	stop := &budget.Error{Reason: forage.ReasonPermanent}
	if ferr := s.fence(ctx); ferr != nil {
		return errors.Join(err, ferr)
	}
	why := err // the provider's own words, if the budget error carries them
	var be *budget.Error
	if errors.As(err, &be) && be.Err != nil {
		why = be.Err
	}
	g := checkpoint.Gap{Key: s.r.key, Cursor: cursor, Reason: gapReason(forage.ReasonPermanent, why)}
	if _, gerr := s.addGap(ctx, g, stop); gerr != nil {
		return errors.Join(err, gerr)
	}
	// The gaps pending at this very cursor are this hole, as an earlier
	// run saw it: the new record supersedes them (a cursor the provider
	// let expire piled up a record a run, 179 in a week, each rewritten
	// in a file store at every one after).
	kept := s.pending[:0]
	for _, id := range s.pending {
		if c, ok := s.atCursor[id]; ok && bytes.Equal(c, cursor) {
			if rerr := s.resolve(ctx, id); rerr != nil {
				return errors.Join(err, rerr)
			}
			continue
		}
		kept = append(kept, id)
	}
	s.pending = kept
	return err
}

// gapReason is the Reason of a gap recorded for a stop with reason r and
// error err: "r: message", with URLs redacted, control and format
// characters and line separators (what [checkpoint.CheckName] refuses) made
// spaces and the whole cut to maxGapReason bytes of valid UTF-8, so a
// provider's text can neither leak a secret nor break the record.
func gapReason(r forage.Reason, err error) string {
	msg := strings.Map(func(c rune) rune {
		if unicode.IsControl(c) || unicode.In(c, unicode.Cf, unicode.Zl, unicode.Zp) || c == utf8.RuneError {
			return ' '
		}
		return c
	}, redact.String(err.Error()))
	out := string(r) + ": " + msg
	if len(out) > maxGapReason {
		out = out[:maxGapReason]
		for !utf8.ValidString(out) {
			out = out[:len(out)-1]
		}
	}
	return out
}

// maxGapReason bounds the Reason of a gap recorded for an error.
const maxGapReason = 512

// caughtUp ends a stream run that found nothing left: every cursor gap
// pending at the start is passed.
func (s *session[R]) caughtUp(ctx context.Context) error {
	s.r.log.DebugContext(ctx, "slice: caught up", "cursor", shown(s.rep.Cursor), "slices", s.rep.Slices)
	if len(s.pending) == 0 {
		return nil
	}
	if err := s.fence(ctx); err != nil {
		return err
	}
	return s.resolvePending(ctx)
}

// stopping notes in the report why the run stops (even if no gap can be
// recorded) and fences the gap records it is about to write.
func (s *session[R]) stopping(ctx context.Context, stop *budget.Error) error {
	s.rep.Reason, s.rep.Until, s.rep.Stop = stop.Reason, stop.Until, stop
	return s.fence(ctx)
}

// fence renews the lease before the run writes or resolves gap records.
// Unlike commits, gap records are not fenced by the store, and a stale
// holder could hit a stop long after it lost the lease (a stall, then an
// exhausted budget at the next boundary): the renewal fails with
// [checkpoint.ErrLeaseLost] once another owner took the stream over, and
// otherwise extends the lease by a whole TTL, past the writes that follow.
func (s *session[R]) fence(ctx context.Context) error {
	l, err := s.r.cfg.Store.Renew(ctx, s.lease, s.r.cfg.LeaseTTL)
	if err != nil {
		return fmt.Errorf("slice: %v: renew lease before recording gaps: %w", s.r.key, err)
	}
	s.lease = l
	return nil
}

// addGap records g as a gap the stopping run leaves and notes it in the
// report. The caller has called stopping.
func (s *session[R]) addGap(ctx context.Context, g checkpoint.Gap, stop *budget.Error) (checkpoint.Gap, error) {
	g, err := s.r.cfg.Store.AddGap(ctx, g)
	if err != nil {
		return g, fmt.Errorf("slice: %v: record the %s gap: %w", s.r.key, stop.Reason, err)
	}
	s.rep.Gaps = append(s.rep.Gaps, g)
	msg := "slice: deferred" // the gap is the work left to a later run
	if stop.Reason == forage.ReasonPermanent {
		msg = "slice: stopped" // no later run does better without the host's help
	}
	attrs := []any{"reason", string(stop.Reason), "gap", g.ID}
	if stop.Status != 0 {
		attrs = append(attrs, "status", stop.Status) // the last answer: "unavailable" after 503s, say, where the error names only the spent retries
	}
	if stop.Err != nil && stop.Reason != forage.ReasonDeadline && stop.Reason != forage.ReasonRequestCap {
		attrs = append(attrs, "error", redact.String(stop.Err.Error())) // what the last attempt met: garbage and an outage both read "unavailable"
	}
	if !stop.Until.IsZero() {
		attrs = append(attrs, "until", stop.Until)
	}
	if len(g.Cursor) > 0 {
		attrs = append(attrs, "cursor", shown(g.Cursor))
	}
	if !g.Range.IsZero() {
		attrs = append(attrs, "range", g.Range)
	}
	s.r.log.InfoContext(ctx, msg, attrs...)
	return g, nil
}

// listPending records the IDs of the stream's unresolved cursor gaps
// (those without a Range) as the run starts: the gaps it may resolve.
func (s *session[R]) listPending(ctx context.Context) error {
	s.pending = s.pending[:0]
	s.atCursor = map[int64][]byte{}
	return s.eachGap(ctx, func(g checkpoint.Gap) (bool, error) {
		if g.Range.IsZero() {
			s.pending = append(s.pending, g.ID)
			s.atCursor[g.ID] = g.Cursor
		}
		return true, nil
	})
}

// resolvePending resolves the cursor gaps pending when the run started.
// Resolving is idempotent, so gaps another party resolved since are no
// error.
func (s *session[R]) resolvePending(ctx context.Context) error {
	for _, id := range s.pending {
		if err := s.resolve(ctx, id); err != nil {
			return err
		}
	}
	s.pending = nil
	return nil
}

// eachGap pages through the stream's unresolved gaps, oldest first, calling
// f on each until f returns false or an error. The page size is a batch:
// paging goes on until a page comes back empty.
func (s *session[R]) eachGap(ctx context.Context, f func(checkpoint.Gap) (bool, error)) error {
	q := checkpoint.GapQuery{Stream: s.r.key.Stream, Mode: s.r.key.Mode, Limit: s.r.cfg.GapBatch}
	for {
		gaps, err := s.r.cfg.Store.ListGaps(ctx, q)
		if err != nil {
			return fmt.Errorf("slice: %v: list gaps after %d: %w", s.r.key, q.After, err)
		}
		if len(gaps) == 0 {
			return nil
		}
		for _, g := range gaps {
			q.After = g.ID
			more, err := f(g)
			if err != nil || !more {
				return err
			}
		}
	}
}

// resolve marks gap id resolved.
func (s *session[R]) resolve(ctx context.Context, id int64) error {
	if err := s.r.cfg.Store.ResolveGap(ctx, id); err != nil {
		return fmt.Errorf("slice: %v: resolve gap %d: %w", s.r.key, id, err)
	}
	s.rep.Resolved++
	return nil
}

// shown is a cursor as a log record shows it: a cursor may be the provider's
// next-page URL with the credential in its query (GitHub's ?access_token=),
// so its URLs' query values, and the values of well-known secret keys, are
// masked.
func shown(c []byte) string { return redact.String(fmt.Sprintf("%s", cursorText(c))) }

// cursorText is a cursor as an error or a log record quotes it (%q, or
// %s unquoted): at most maxCursorText bytes of it, and its length when it
// was cut. A feed's cursor holds key hashes (a PageFeed of Size 100 about
// 4,000 bytes of them): quoted whole, it filled an error line, and the
// gap recorded for a permanent stop (its Reason cut at 512 bytes) held
// nothing but hashes, the provider's answer cut off.
type cursorText []byte

// maxCursorText is the most of a cursor an error quotes.
const maxCursorText = 160

// Format writes c as %q (or, for any other verb, as %s) does, cut to
// maxCursorText bytes on a rune boundary with the whole length after it.
func (c cursorText) Format(f fmt.State, verb rune) {
	b, more := []byte(c), ""
	if len(b) > maxCursorText {
		cut := maxCursorText
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		b, more = b[:cut], fmt.Sprintf("… (%d bytes)", len(c))
	}
	if verb == 'q' {
		fmt.Fprintf(f, "%q%s", b, more)
		return
	}
	fmt.Fprintf(f, "%s%s", b, more)
}
