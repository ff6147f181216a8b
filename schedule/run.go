package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/internal/redact"
)

// maxWakes bounds the times the scheduler remembers to wake at. Past it,
// jobs still start, within Poll of their NextRun.
const maxWakes = 4096

// Run schedules until ctx ends: it claims due jobs within the limits, runs
// each in its own goroutine through the Runner, renews their leases, and
// applies each outcome. When ctx ends, Run cancels the running jobs'
// contexts (cause [ErrInterrupted]), waits for every run to return and its
// outcome to be written (interrupted jobs are due again at once), and
// returns ctx.Err(). It leaves no goroutine behind. Store errors are
// logged and retried at the next poll. Only one Run may be active per
// Scheduler.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.store == nil {
		return errors.New("schedule: Run on a zero Scheduler: make one with New") // it spun, polling nothing
	}
	if !s.inRun.CompareAndSwap(false, true) {
		return errors.New("schedule: Run called while already running")
	}
	defer s.inRun.Store(false)
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	defer timer.Stop()
	failedClaims := 0 // in a row: a store down is logged when it fails and when it answers again
	for {
		select {
		case <-ctx.Done():
			s.stop(fmt.Errorf("%w: scheduler stopping", ErrInterrupted))
			wg.Wait()
			return ctx.Err()
		case <-timer.C:
		case <-s.wake:
		}
		now := time.Now()
		_ = s.renewAll(ctx, now) // counted and logged; retried next time
		as, err := s.claim(ctx, now, ctx)
		failedClaims = s.logClaim(err, failedClaims)
		for _, a := range as {
			s.mu.Lock()
			job := a.job.copy()
			s.mu.Unlock()
			wg.Add(1)
			go s.run(ctx, &wg, a, job)
		}
		timer.Reset(s.sleep(now))
	}
}

// logClaim logs a claim's store error, the first of a run of them
// only, and the first claim that succeeds after them; it returns the
// failures in a row, counting err. A store that is down (a database
// restart) is one record when it fails and one when it answers again,
// not one each Poll; before, a scheduler with nothing running logged
// nothing at all while its store was down.
func (s *Scheduler) logClaim(err error, failed int) int {
	l := s.cfg.Logger
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return failed // Run is returning
	case err != nil:
		if failed == 0 && l != nil {
			l.Warn("schedule: claim failed; claiming again every poll", "err", redact.String(err.Error()))
		}
		return failed + 1
	case failed > 0 && l != nil:
		l.Info("schedule: claims succeed again", "failed_claims", failed)
	}
	return 0
}

// run runs one claimed job and applies its outcome.
func (s *Scheduler) run(parent context.Context, wg *sync.WaitGroup, a *active, job Job) {
	defer wg.Done()
	ctx := a.ctx
	if s.cfg.RunTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RunTimeout)
		defer cancel()
	}
	var res Result
	var err error
	if ctx.Err() == nil { // not interrupted before it started
		res, err = s.call(ctx, job)
	} else {
		err = context.Cause(ctx)
	}
	// Only RunTimeout ended it, and the runner stopped because of that: a
	// spent budget. Any other error is the runner's own verdict.
	if err != nil && ctx.Err() != nil && a.ctx.Err() == nil && canceled(err) {
		err = &budget.Error{Reason: forage.ReasonDeadline, Provider: job.Provider, Err: err}
	}
	if err != nil && ctx.Err() == nil && canceled(err) {
		if be := (*budget.Error)(nil); !errors.As(err, &be) || be.Reason == forage.ReasonCanceled {
			// The run's context is alive: the context error is the
			// runner's own (a Sink's statement timeout, a Source's
			// client closed), a failure. Read as the run's end, it was
			// requeued without a failure counted or a reason kept, run
			// after run: a Sink whose database stopped answering
			// re-fetched its page every 6 s for good, one whose writer
			// was closed 12,000 times in two minutes.
			err = &ownContextError{err}
		}
	}
	// The outcome is written even when Run is returning.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(parent), s.cfg.LeaseTTL)
	defer cancel()
	_, _ = s.finish(wctx, time.Now(), a, res, err) // store errors counted and logged
}

// ownContextError is a runner's failure with a context error of its own,
// while the run's context was alive (see run). It does not unwrap, so the
// outcome reads it as a failure, not as the run's end.
type ownContextError struct{ err error }

func (e *ownContextError) Error() string {
	return "a context of the runner's own ended (the run's had not): " + e.err.Error()
}

// canceled reports whether err says a context ended: a context error,
// [ErrInterrupted], or a [budget.Error] with ReasonCanceled.
func canceled(err error) bool {
	if be := (*budget.Error)(nil); errors.As(err, &be) && be.Reason == forage.ReasonCanceled {
		return true
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrInterrupted)
}

// call runs job: through its declared stream, or the Worker. A panic
// becomes a failure.
func (s *Scheduler) call(ctx context.Context, job Job) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("schedule: job %d panicked: %v", job.ID, r)
		}
	}()
	if st := s.streamOf(&job); st != nil {
		res, err = st.work(ctx, job, time.Now())
		if res.Done && s.streamOf(&job) != st {
			// Declared again during the run ([AddStream]): the new
			// declaration's Backfill may reach further (a later
			// boundary), and the run of the old one, done at the old
			// end, marked the backfill done with the new range never
			// fetched. One more run finds what is left, or nothing.
			res.Done = false
		}
		return res, err
	}
	if s.worker == nil {
		return Result{}, fmt.Errorf("schedule: job %d (%s of stream %q, provider %q) is not a declared stream, and the scheduler has no Worker",
			job.ID, job.Kind, job.Stream, job.Provider)
	}
	return s.worker.Run(ctx, job)
}

// stop interrupts every running job.
func (s *Scheduler) stop(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.active {
		a.interrupt(cause)
	}
	for a := range s.draining {
		a.interrupt(cause)
	}
}

// sleep returns how long Run may sleep after a pass at now: until the
// earliest of the next poll, a known job coming due or a cool-down ending,
// and a lease needing renewal.
func (s *Scheduler) sleep(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ok := s.wakes.min(); ok && !t.After(now); t, ok = s.wakes.min() {
		s.wakes.removeAt(0)
	}
	at := now.Add(s.cfg.Poll)
	if t, ok := s.wakes.min(); ok && t.Before(at) {
		at = t
	}
	// A renewal that failed is retried soon, but not in a busy loop.
	floor := now.Add(s.cfg.Poll / 16)
	for _, a := range s.active {
		if r := maxTime(a.job.Lease.Until.Add(-s.cfg.LeaseTTL*2/3), floor); !a.lost && r.Before(at) {
			at = r
		}
	}
	return max(time.Until(at), 0)
}

// addWake asks Run to wake at t.
func (s *Scheduler) addWake(t time.Time) {
	s.mu.Lock()
	if len(s.wakes.items) < maxWakes {
		s.wakes.push(t)
	}
	s.mu.Unlock()
}
