package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/redact"
)

// outcomeKind is what one run's end does to its job; see the table in the
// package doc.
type outcomeKind uint8

const (
	outSuccess     outcomeKind = iota // next cycle, or continue an unfinished backfill / gap fill
	outDone                           // a backfill or gap fill finished
	outRequeue                        // budget exhaustion: again soon, no cool-down
	outPressure                       // source pressure: wait for the provider, cool it
	outFailed                         // back off
	outInterrupted                    // stopped by the scheduler: run again, not a failure
	outContinue                       // a stream's turn is over: progress, due again at once (or at until, the provider's next slot)
	outYielded                        // another owner holds the stream: wait, neither success nor failure
	outWaited                         // a stream's turn collected nothing, waiting for the provider's next slot: neither success nor failure
)

// pauseRecheck is how soon a job stopped by an operator's pause of its
// provider runs again: about the time a resume takes to reach every
// process sharing the provider's record (see budget.Registry.SetStatus).
const pauseRecheck = 5 * time.Second

// errIdleTurn is the failure of a stream's turn that collected nothing
// with nothing to explain it: every fetch failed or timed out, or took
// longer than the turn.
var errIdleTurn = errors.New("schedule: the stream's turn ended with nothing collected: its fetches failed, timed out or took longer than the turn (Stream.RunFor)")

// outcome is one run's end, classified.
type outcome struct {
	kind  outcomeKind
	until time.Time // the end of the provider's pause (outPressure), of the holder's lease (outYielded); for outRequeue, not before it
	err   error
	fresh bool // a failure after the run committed progress: the failure streak starts again
	// down marks source pressure that is the provider failing (it kept
	// answering 5xx, timing out or refusing connections, or its breaker
	// is open): the job waits as for pressure, and fails (see apply).
	// alone marks one whose breaker is not open: the job's calls failed,
	// but the breaker, which sees every call of the provider, has not
	// judged the provider down, so only the job waits.
	down, alone bool
}

// finish applies the outcome of a's run at now (see the package doc's
// table): the job's state, next run and stats, its provider's cool-down,
// and the release of its lease and of its slot. runErr is what the runner
// returned: nil, a [budget.Error] (exhaustion or source pressure), a
// context error, or a failure.
//
// It returns the job as stored after the outcome. A done gap fill is
// deleted and returned as last held, unless it changed since the claim
// (new work upserted into it, paused): then it is kept, as after an
// unfinished run. If the job was deleted meanwhile, or its lease was lost
// to another scheduler, nothing is written and the job is returned as
// last known. Errors: a store error (the lease then expires and the job
// is rescued).
func (s *Scheduler) finish(ctx context.Context, now time.Time, a *active, res Result, runErr error) (Job, error) {
	defer s.release(a)
	s.mu.Lock()
	job, lost := a.job, a.lost
	s.mu.Unlock()
	if lost {
		return job, nil
	}
	o := s.classify(now, &job, res, runErr)
	if o.kind == outDone && job.Kind == KindGapFill {
		deleted, err := s.deleteDone(ctx, job)
		if err != nil {
			return job, err
		}
		if deleted {
			s.count(o)
			job.State, job.Lease = StateSuccess, JobLease{}
			return job, nil
		}
		// Changed since the claim: new work upserted, paused, or rescued
		// elsewhere. Keep it, as after an unfinished run.
		o.kind = outSuccess
	}
	s.count(o)
	if o.kind == outPressure && !o.alone {
		// Not for one job's failures the breaker did not find the
		// provider's: a page that answers 500 for good cooled the
		// provider a minute after each of its runs, and a healthy
		// stream of it beside, polled every 10 s, ran once a minute.
		s.cool(job.Provider, o.until)
	}
	owner := job.Lease.Owner
	j := job
	s.apply(&j, now, a.start, o)
	var stored Job
	var err error
	wait, last := finishRetry, false
	for tries := 1; ; tries++ {
		stored, err = s.store.Update(ctx, j) // fast path: nobody wrote since us
		if errors.Is(err, ErrConflict) {
			stored, err = s.mutate(ctx, job.ID, func(j *Job) error {
				if j.Lease.Owner != owner {
					return errLost
				}
				s.apply(j, now, a.start, o)
				return nil
			})
		}
		if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, errLost) {
			break
		}
		if tries > 1 {
			s.n.storeErrors.Add(1) // logged at the first try only: a store down for a while is one record per job
			err = fmt.Errorf("schedule: finish job %d: %w", job.ID, err)
		} else {
			err = s.storeError("finish", job, err)
		}
		// Tried again while the lease is ours: left to expire, it held
		// the provider's MaxPerProvider slot in every process for up to
		// a LeaseTTL after the store was back.
		if last || !s.finishAgain(ctx, a, wait, &last) {
			return job, err
		}
		wait = min(2*wait, maxFinishRetry)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return job, nil
	case errors.Is(err, errLost):
		s.mu.Lock()
		s.loseLocked(a)
		s.mu.Unlock()
		return stored, nil
	}
	s.addWake(stored.NextRun)
	s.logOutcome(stored, o)
	return stored, nil
}

// The waits between a finish's tries while the store fails: from
// finishRetry, doubling, up to maxFinishRetry.
const (
	finishRetry    = 250 * time.Millisecond
	maxFinishRetry = 2 * time.Second
)

// finishAgain waits wait before the next try of a's finish, and reports
// whether to try: only for a run Run started, whose lease is still its
// own (not lost, not ended by then) and while ctx lives. When the run is
// interrupted meanwhile (Run returning, the job paused), it sets *last:
// one more try, at once, then none, so a Run that returns is not held up.
func (s *Scheduler) finishAgain(ctx context.Context, a *active, wait time.Duration, last *bool) bool {
	if a.ctx == nil {
		return false
	}
	s.mu.Lock()
	lost, until := a.lost, a.job.Lease.Until
	s.mu.Unlock()
	if lost || !time.Now().Add(wait).Before(until) || a.ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.ctx.Done():
		*last = true
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// logOutcome writes one structured record for what a run's end did to
// its job, at a level an operator would want: a failure at Warn; a wait
// the provider imposed, a yield, a deferral and a backfill done at Info;
// an ordinary cycle at Debug. Errors are redacted. A nil Logger is silent.
func (s *Scheduler) logOutcome(j Job, o outcome) {
	l := s.cfg.Logger
	if l == nil {
		return
	}
	level, msg := slog.LevelDebug, "schedule: run ended"
	switch o.kind {
	case outFailed:
		level, msg = slog.LevelWarn, "schedule: run failed; backing off"
	case outPressure:
		level, msg = slog.LevelInfo, pressureMsg(o.err)
		if o.down {
			level, msg = slog.LevelWarn, "schedule: the provider is failing; the job waits for its cool-down"
		}
	case outYielded:
		level, msg = slog.LevelInfo, "schedule: the stream is held by another owner; the job waits"
	case outRequeue:
		level, msg = slog.LevelInfo, "schedule: run deferred: its budget is spent"
	case outDone:
		level, msg = slog.LevelInfo, "schedule: done"
	}
	if !l.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{slog.Int64("job", j.ID), slog.String("provider", j.Provider), slog.String("kind", string(j.Kind)),
		slog.String("stream", j.Stream), slog.String("state", string(j.State)), slog.Time("next_run", j.NextRun)}
	if o.err != nil {
		if why, ok := budget.ReasonOf(o.err); ok {
			attrs = append(attrs, slog.String("reason", string(why)))
		}
		attrs = append(attrs, slog.String("err", redact.String(o.err.Error())))
	}
	l.LogAttrs(context.Background(), level, msg, attrs...)
}

// pressureMsg is the message of a wait a provider's state imposed: a
// spent quota (one the host declared, or one the provider announced) and
// an operator's pause are not the provider pushing back, and an operator
// reading the log should not look for refusals that never came.
func pressureMsg(err error) string {
	switch why, _ := budget.ReasonOf(err); why {
	case forage.ReasonQuota:
		return "schedule: a known quota is spent; the job waits for its reset"
	case forage.ReasonPaused:
		return "schedule: the provider is paused by an operator; the job waits"
	}
	return "schedule: the provider pushed back; the job waits"
}

// deleteDone deletes a gap fill that finished, if it is still as this
// scheduler last wrote it (same version, same lease owner). A job changed
// meanwhile (new work upserted into it, paused, or rescued by another
// scheduler) is not deleted and deleteDone reports false. The JobStore has
// no conditional delete, so a write landing between the Get and the Delete
// is lost with the job; the window is one store round trip.
func (s *Scheduler) deleteDone(ctx context.Context, job Job) (bool, error) {
	cur, err := s.store.Get(ctx, job.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		return true, nil
	case err != nil:
		return false, s.storeError("finish", job, err)
	case cur.Version != job.Version || cur.Lease.Owner != job.Lease.Owner:
		return false, nil
	}
	if err := s.store.Delete(ctx, job.ID); err != nil && !errors.Is(err, ErrNotFound) {
		return false, s.storeError("finish", job, err)
	}
	return true, nil
}

// classify turns what the runner returned into an outcome. The runner's
// error decides, even when the scheduler interrupted the run: only a
// cancellation (context.Canceled, [ErrInterrupted], a [budget.Error] with
// ReasonCanceled) counts as interrupted, so source pressure met during a
// run that was being paused still cools the provider.
func (s *Scheduler) classify(now time.Time, job *Job, res Result, err error) outcome {
	switch {
	case err == nil && res.Done && !job.Kind.periodic():
		return outcome{kind: outDone}
	case err == nil:
		return outcome{kind: outSuccess}
	case errors.Is(err, errTurnOver):
		to := turnOver{}
		errors.As(err, &to)
		o := outcome{kind: outContinue}
		if to.next.After(now) {
			o.until = to.next // the provider's next slot is after the turn's end
		}
		switch {
		case to.idle && !o.until.IsZero():
			o.kind = outWaited
		case to.idle && to.last != nil && (to.last.Status != 0 || to.last.Err != nil):
			// With what the provider last said (a dial error, a 502): the
			// operator's first question.
			last := fmt.Sprintf("status %d", to.last.Status)
			if to.last.Err != nil {
				last = to.last.Err.Error()
				if to.last.Status != 0 {
					last = fmt.Sprintf("status %d: %s", to.last.Status, last)
				}
			}
			o = outcome{kind: outFailed, err: fmt.Errorf("%w; the last answer: %s", errIdleTurn, last)}
		case to.idle:
			o = outcome{kind: outFailed, err: errIdleTurn}
		}
		return o
	}
	if held := (*checkpoint.LeaseHeldError)(nil); errors.As(err, &held) {
		// Another owner runs the stream: look again when its lease would
		// end, within [Requeue, PressureWait], as it may finish sooner.
		until := maxTime(held.Lease.Expires, now.Add(s.cfg.Requeue))
		if late := now.Add(max(s.cfg.PressureWait, s.cfg.Requeue)); until.After(late) {
			until = late
		}
		return outcome{kind: outYielded, until: until, err: err}
	}
	if es := (*envelopeSpent)(nil); errors.As(err, &es) {
		return outcome{kind: outRequeue, until: now.Add(max(s.cfg.PressureWait, s.cfg.Requeue)), err: err}
	}
	if be := (*budget.Error)(nil); errors.As(err, &be) {
		switch {
		case be.Reason.Exhausted():
			return outcome{kind: outRequeue, err: err}
		case be.Reason.SourcePressure():
			until := be.Until
			switch {
			case until.IsZero() && be.Reason == forage.ReasonPaused:
				// An operator's pause has no end: its job looks again as
				// soon as a resume could have reached this process (a
				// resume waited out PressureWait, a minute, before).
				until = now.Add(min(s.cfg.PressureWait, pauseRecheck))
			case until.IsZero():
				until = now.Add(s.cfg.PressureWait)
			}
			down := be.Reason == forage.ReasonUnavailable || be.Reason == forage.ReasonCircuitOpen
			return outcome{kind: outPressure, until: maxTime(until, now.Add(s.cfg.Requeue)), err: err,
				down: down, alone: be.Reason == forage.ReasonUnavailable && !s.breakerOpen(be.Provider), fresh: down && errors.As(err, new(progressed))}
		case be.Reason == forage.ReasonCanceled:
			return outcome{kind: outInterrupted}
		}
		return outcome{kind: outFailed, err: err, fresh: errors.As(err, new(progressed))}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded): // the run's own wall clock
		return outcome{kind: outRequeue, err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, ErrInterrupted):
		return outcome{kind: outInterrupted}
	}
	return outcome{kind: outFailed, err: err, fresh: errors.As(err, new(progressed))}
}

// apply writes outcome o of a run that started at start into j.
func (s *Scheduler) apply(j *Job, now, start time.Time, o outcome) {
	st := &j.Stats
	st.Runs++
	st.LastRun = start
	j.Lease, j.Updated = JobLease{}, now
	paused := j.State == StatePaused
	switch o.kind {
	case outSuccess, outDone, outContinue:
		st.Successes++
		st.LastSuccess, st.Streak = now, 0
		switch {
		case o.kind == outDone:
			j.State = StateSuccess
		case o.kind == outContinue:
			j.State, j.NextRun = StateQueued, maxTime(now, o.until)
		case j.Kind.periodic():
			j.State, j.NextRun = StateIdle, s.nextCycle(j, now)
		default:
			j.State, j.NextRun = StateQueued, now.Add(s.cfg.Requeue)
		}
	case outRequeue: // a planned hand-off: the failure streak stands
		j.State, j.NextRun = StateQueued, maxTime(now.Add(s.cfg.Requeue), o.until)
	case outWaited: // likewise, until the provider's next slot
		j.State, j.NextRun = StateQueued, maxTime(now, o.until)
	case outPressure:
		st.LastError = lastError(o.err)
		j.State, j.NextRun = StateWaitingRateLimit, o.until
		if o.down {
			// A provider that is failing is no rate limit: the job is
			// failed, counted, and waits for the provider's cool-down
			// (a provider that never answered showed its jobs waiting on
			// a rate limit with no failure, for good).
			st.Failures++
			st.Streak++
			if o.fresh {
				st.Streak = 1
			}
			j.State = StateFailed
			if o.alone {
				// Its own failures, again and again: backed off as any
				// failure is, not retried every PressureWait for good.
				j.NextRun = maxTime(o.until, now.Add(s.backoff(st.Streak)))
			}
		}
	case outFailed:
		st.Failures++
		st.Streak++
		if o.fresh {
			st.Streak = 1 // the runs before made progress: not one failure after another
		}
		st.LastError = lastError(o.err)
		j.State, j.NextRun = StateFailed, now.Add(s.backoff(st.Streak))
	case outInterrupted:
		j.State = StateQueued // NextRun unchanged: due again at once
	case outYielded: // not the job's failure, nor progress
		st.LastError = lastError(o.err)
		j.State, j.NextRun = StateQueued, o.until
	}
	if paused {
		j.State = StatePaused
	}
}

// nextCycle is a periodic job's next run: one jittered interval after the
// run it just made was due, so the cadence does not drift by the runs'
// durations. A job that fell behind skips the missed cycles rather than
// running back to back.
func (s *Scheduler) nextCycle(j *Job, now time.Time) time.Time {
	iv := j.Interval
	if iv <= 0 {
		return now
	}
	base := j.NextRun.Add(iv)
	if !base.After(now) {
		base = now.Add(iv - now.Sub(j.NextRun)%iv)
	}
	if next := base.Add(s.jitter(iv)); next.After(now) {
		return next
	}
	return base
}

// backoff is the wait after the streak-th consecutive failure.
func (s *Scheduler) backoff(streak int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < streak && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxBackoff)
	return min(max(d+s.jitter(d), 0), s.cfg.MaxBackoff)
}

// jitter returns a uniform offset in ±Jitter × d.
func (s *Scheduler) jitter(d time.Duration) time.Duration {
	return time.Duration((2*s.rand() - 1) * s.cfg.Jitter * float64(d))
}

// count records o in the decision counters.
func (s *Scheduler) count(o outcome) {
	c := [...]*atomicCounter{
		outSuccess: &s.n.succeeded, outDone: &s.n.done, outRequeue: &s.n.requeued,
		outPressure: &s.n.pressured, outFailed: &s.n.failed, outInterrupted: &s.n.interrupted,
		outContinue: &s.n.succeeded, outYielded: &s.n.yielded, outWaited: &s.n.requeued,
	}
	c[o.kind].Add(1)
}

// cool stops every job of provider from starting before until.
func (s *Scheduler) cool(provider string, until time.Time) {
	s.mu.Lock()
	if until.After(s.cooling[provider]) {
		s.cooling[provider] = until
	}
	s.mu.Unlock()
	s.addWake(until)
}

// release frees a's slot and wakes Run.
func (s *Scheduler) release(a *active) {
	s.mu.Lock()
	if s.active[a.id] == a {
		delete(s.active, a.id)
	}
	delete(s.draining, a)
	s.mu.Unlock()
	if a.cancel != nil {
		a.cancel(nil)
	}
	if a.guard != nil {
		a.guard.Stop()
	}
	s.poke()
}

// storeError counts and logs a store failure and wraps it.
func (s *Scheduler) storeError(op string, j Job, err error) error {
	s.n.storeErrors.Add(1)
	s.log(op+" failed", j, err)
	return fmt.Errorf("schedule: %s job %d: %w", op, j.ID, err)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxLastError caps Stats.LastError, in bytes: it is a diagnostic that is
// stored with the job and served by the admin API, not a log.
const maxLastError = 2048

// lastError is err's message as Stats keeps it: every URL redacted (a
// failing request's query often holds the provider's credentials, and
// the message is persisted and served), on one line (a provider's words
// may hold line breaks, which forge lines in a log or a terminal) and at
// most maxLastError bytes.
func lastError(err error) string {
	msg := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
			return ' ' // a line break, or text that reorders what follows
		}
		return r
	}, err.Error())
	return redact.Clip(redact.String(msg), maxLastError)
}

// breakerOpen reports whether the breaker of the budget provider key is
// open (false without a budget registry, or for a provider it does not
// hold).
func (s *Scheduler) breakerOpen(key string) bool {
	if s.cfg.Budget == nil || key == "" {
		return false
	}
	p, ok := s.cfg.Budget.Lookup(key)
	return ok && p.Snapshot().Breaker == breaker.StateOpen.String()
}
