package schedule

import (
	"context"
	"time"
)

// This file drives the scheduler's decisions step by step in explicit
// time, without Run, for the tests of package schedule_test.

// ClaimAt leases the jobs the scheduler would start at now, as a pass of
// Run does, and counts them as running until [Scheduler.FinishAt].
func (s *Scheduler) ClaimAt(ctx context.Context, now time.Time) ([]Job, error) {
	as, err := s.claim(ctx, now, nil)
	jobs := make([]Job, len(as))
	s.mu.Lock()
	for i, a := range as {
		jobs[i] = a.job.copy()
	}
	s.mu.Unlock()
	return jobs, err
}

// FinishAt reports the end of a run of job, which must have come from
// ClaimAt and not been finished yet, and applies its outcome at now, as
// Run does when a runner returns. Errors: [ErrInvalid] (a job not running
// here); those of finish.
func (s *Scheduler) FinishAt(ctx context.Context, now time.Time, job Job, res Result, runErr error) (Job, error) {
	s.mu.Lock()
	a := s.active[job.ID]
	ours := a != nil && a.job.Lease.Owner == job.Lease.Owner
	s.mu.Unlock()
	if !ours {
		return Job{}, invalid("job", "must be running here (claimed by ClaimAt, not finished)", job.ID)
	}
	return s.finish(ctx, now, a, res, runErr)
}

// RenewAt renews the leases of the running jobs at now, as Run does.
func (s *Scheduler) RenewAt(ctx context.Context, now time.Time) error {
	return s.renewAll(ctx, now)
}
