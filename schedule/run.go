package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
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
	if !s.inRun.CompareAndSwap(false, true) {
		return errors.New("schedule: Run called while already running")
	}
	defer s.inRun.Store(false)
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	defer timer.Stop()
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
		_ = s.RenewAt(ctx, now) // counted and logged; retried next time
		as, _ := s.claim(ctx, now, ctx)
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
	// The outcome is written even when Run is returning.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(parent), s.cfg.LeaseTTL)
	defer cancel()
	_, _ = s.finish(wctx, time.Now(), a, res, err) // store errors counted and logged
}

// canceled reports whether err says a context ended: a context error,
// [ErrInterrupted], or a [budget.Error] with ReasonCanceled.
func canceled(err error) bool {
	if be := (*budget.Error)(nil); errors.As(err, &be) && be.Reason == forage.ReasonCanceled {
		return true
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrInterrupted)
}

// call runs the runner, turning a panic into a failure.
func (s *Scheduler) call(ctx context.Context, job Job) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("schedule: runner panicked: %v", r)
		}
	}()
	return s.runner.Run(ctx, job)
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
	for len(s.wakes) > 0 && !s.wakes[0].After(now) {
		s.wakes.pop()
	}
	at := now.Add(s.cfg.Poll)
	if len(s.wakes) > 0 && s.wakes[0].Before(at) {
		at = s.wakes[0]
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
	if len(s.wakes) < maxWakes {
		s.wakes.push(t)
	}
	s.mu.Unlock()
}

// timeHeap is a min-heap of times.
type timeHeap []time.Time

func (h *timeHeap) push(t time.Time) {
	*h = append(*h, t)
	x := *h
	for i := len(x) - 1; i > 0; {
		p := (i - 1) / 2
		if !x[i].Before(x[p]) {
			break
		}
		x[i], x[p] = x[p], x[i]
		i = p
	}
}

func (h *timeHeap) pop() {
	x := *h
	n := len(x) - 1
	x[0] = x[n]
	x = x[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && x[c+1].Before(x[c]) {
			c++
		}
		if !x[c].Before(x[i]) {
			break
		}
		x[i], x[c] = x[c], x[i]
		i = c
	}
	*h = x
}
