package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Upsert adds the job spec describes, or updates the definition (priority,
// interval, payload) of the job with the same (Provider, Kind, Stream):
// adding a job twice is harmless, and there is never more than one pending
// run per stream and kind. A new job is idle and due at spec.NextRun (zero:
// now). It returns the job as stored; Version 1 means it was created.
// Errors: [ErrInvalid] naming the field of spec; store errors.
func (s *Scheduler) Upsert(ctx context.Context, spec Spec) (Job, error) {
	now := time.Now()
	if err := spec.Validate(); err != nil {
		return Job{}, err
	}
	prio := spec.Priority
	if prio == 0 {
		prio = spec.Kind.DefaultPriority()
	}
	next := spec.NextRun
	if next.IsZero() {
		next = now
	}
	j, err := s.store.Upsert(ctx, Job{
		Provider: spec.Provider, Kind: spec.Kind, Stream: spec.Stream,
		Priority: prio, Interval: spec.Interval, Payload: spec.Payload,
		State: StateIdle, NextRun: next, Created: now, Updated: now,
	})
	if err != nil {
		return Job{}, err
	}
	if j.Version == 1 {
		s.addWake(j.NextRun)
		s.poke()
	}
	return j, nil
}

// Store returns the [JobStore] s was built with: read jobs through it
// ([JobStore.Get], [JobStore.List]), and reach what the Scheduler does
// not offer itself, such as a store's own Count method. Change jobs
// through the Scheduler (Upsert, SetPaused, Delete …), not the store: it
// interrupts the runs they concern and wakes up when new work is due.
func (s *Scheduler) Store() JobStore { return s.store }

// errNoChange aborts a mutation that has nothing to do.
var errNoChange = errors.New("schedule: no change")

// SetPaused pauses job id (paused true) or resumes it (false), and returns
// the job as stored. A paused job does not run until resumed. If it is
// running here when paused, its run is interrupted (the runner's context
// is cancelled with cause [ErrInterrupted]; it stops at its next slice
// boundary) and the job stays paused when the run ends; a run elsewhere
// notices at its next lease renewal. A resumed job is due at its NextRun,
// at once if that has passed. Pausing a paused job, or resuming one that
// is not paused, changes nothing. Errors: [ErrInvalid], [ErrNotFound].
func (s *Scheduler) SetPaused(ctx context.Context, id int64, paused bool) (Job, error) {
	if paused {
		return s.pause(ctx, id)
	}
	return s.resume(ctx, id)
}

// pause is SetPaused(ctx, id, true).
func (s *Scheduler) pause(ctx context.Context, id int64) (Job, error) {
	s.claimMu.Lock() // a claim in flight registers its jobs first
	defer s.claimMu.Unlock()
	now := time.Now()
	j, err := s.mutate(ctx, id, func(j *Job) error {
		if j.State == StatePaused {
			return errNoChange
		}
		j.State, j.Updated = StatePaused, now
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return Job{}, err
	}
	s.mu.Lock()
	if a := s.active[id]; a != nil {
		a.interrupt(fmt.Errorf("%w: job %d paused", ErrInterrupted, id))
	}
	s.mu.Unlock()
	return j, nil
}

// resume is SetPaused(ctx, id, false).
func (s *Scheduler) resume(ctx context.Context, id int64) (Job, error) {
	now := time.Now()
	j, err := s.mutate(ctx, id, func(j *Job) error {
		if j.State != StatePaused {
			return errNoChange
		}
		j.State, j.Updated = StateIdle, now
		if j.Lease.held(now) { // its interrupted run has not ended yet
			j.State = StateRunning
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return Job{}, err
	}
	s.addWake(j.NextRun)
	s.poke()
	return j, nil
}

// RunNow queues job id to run at once, ahead of its schedule; a paused job
// is resumed, a finished backfill runs again. A job whose lease has ended
// is not running: its lease expired, or its store knows the holder's
// process is gone (pgstore, by the holder's database session) and reports
// the lease ended at once; the next claim takes it over. Errors:
// [ErrInvalid], [ErrNotFound], [ErrRunning] (its run is in progress under
// a live lease: at most one run per job).
func (s *Scheduler) RunNow(ctx context.Context, id int64) (Job, error) {
	now := time.Now()
	j, err := s.mutate(ctx, id, func(j *Job) error {
		if j.Lease.held(now) {
			return fmt.Errorf("%w: job %d is leased by %s until %s", ErrRunning, j.ID, j.Lease.Owner, j.Lease.Until.Format(time.RFC3339))
		}
		j.State, j.NextRun, j.Updated = StateQueued, now, now
		return nil
	})
	if err != nil {
		return Job{}, err
	}
	s.poke()
	return j, nil
}

// Delete removes job id. If it is running here, its run is interrupted and
// its outcome discarded. Errors: [ErrInvalid], [ErrNotFound].
func (s *Scheduler) Delete(ctx context.Context, id int64) error {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	if err := s.store.Delete(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	if a := s.active[id]; a != nil {
		a.interrupt(fmt.Errorf("%w: job %d deleted", ErrInterrupted, id))
	}
	s.mu.Unlock()
	return nil
}

// SetProviderPaused pauses provider in this scheduler (paused true) or
// resumes it (false). While it is paused, none of its jobs starts here,
// and the ones running here are interrupted (their runners' contexts are
// cancelled with cause [ErrInterrupted]; they stop at their next slice
// boundary and are due again once the provider resumes). The pause lives
// in this Scheduler, not in the store: a host running several re-applies
// it to each. Each paused provider is kept (and listed in a [Snapshot])
// until resumed: a host taking provider names from outside, as an admin
// API does, bounds the set it pauses (see [Scheduler.PausedProviders]),
// and pauses only providers the scheduler knows: with a job in the store
// (Store().List with a Query for the provider and a Limit of 1), or in
// [Config.Budget] (its Lookup). Pausing a paused provider, or resuming one that
// is not, changes nothing.
func (s *Scheduler) SetProviderPaused(provider string, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !paused {
		delete(s.paused, provider)
		s.poke()
		return
	}
	s.paused[provider] = true
	for _, a := range s.active {
		if a.job.Provider == provider {
			a.interrupt(fmt.Errorf("%w: provider %s paused", ErrInterrupted, provider))
		}
	}
}

// PausedProviders returns the providers paused in this scheduler, sorted
// by name: what a host re-applies to another scheduler sharing the store,
// and what it counts to bound the set it pauses. A runner that prefers
// polling to watching its context may consult it between slices.
func (s *Scheduler) PausedProviders() []string {
	s.mu.Lock()
	names := make([]string, 0, len(s.paused))
	for name := range s.paused {
		names = append(names, name)
	}
	s.mu.Unlock()
	slices.Sort(names)
	return names
}

// spare returns the Tail check of a claim at now: Config.Spare, or the
// budget-based default, or nil (always spare).
func (s *Scheduler) spare(now time.Time) func(string) bool {
	if s.cfg.Spare != nil {
		return s.cfg.Spare
	}
	reg := s.cfg.Budget
	if reg == nil {
		return nil
	}
	return func(provider string) bool {
		p, ok := reg.Lookup(provider)
		if !ok {
			return true // never called yet: nothing in flight
		}
		snap := p.Snapshot()
		// An open breaker has no budget to spare; a half-open one wants
		// its probe, which only a call makes: held back, a provider with
		// nothing but backfills would wait for good.
		if snap.Breaker == "open" || snap.PausedUntil.After(now) {
			return false
		}
		s.spareMu.Lock()
		defer s.spareMu.Unlock()
		last, seen := s.saturated[provider]
		s.saturated[provider] = snap.Saturated
		return !seen || snap.Saturated == last
	}
}
