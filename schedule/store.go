package schedule

import (
	"context"
	"time"
)

// JobStore persists jobs and hands due ones out under leases. It is the
// extension point for running many schedulers against one database: the
// memory store here is the embedded default, and a PostgreSQL store claims
// with SELECT … FOR UPDATE SKIP LOCKED. Implementations must be safe for
// concurrent use and pass
// [github.com/forage-go/forage/schedule/jobstoretest.Run].
//
// Rules common to every method:
//   - A done ctx makes the method fail with an error wrapping ctx.Err()
//     before it changes anything. A method that fails for any reason other
//     than an I/O error changed nothing.
//   - Argument errors wrap [ErrInvalid] and are reported before any other.
//   - Jobs are values: Payloads passed in are copied, Payloads returned are
//     the caller's to keep and modify.
//   - Time is an argument: the store never reads a clock. Claim takes now;
//     the other methods store the times they are given.
//   - Every successful write increments the job's Version by one.
//
// Lease lifecycle, all through these methods: Claim leases due jobs (and
// rescues jobs whose lease expired); a holder renews by [JobStore.Update]
// with a later Lease.Until, and releases by an Update that clears the Lease
// and writes the run's outcome. The version check of Update makes renew,
// release and an operator's pause safe against each other: the loser gets
// [ErrConflict], reads the job again and re-applies its change.
type JobStore interface {
	// Upsert adds job, or updates the job with the same (Provider, Kind,
	// Stream): it is idempotent on that triple.
	//
	// A new job is stored with every field as given except ID, which the
	// store assigns (> 0, greater than every ID assigned before, never
	// reused) and Version, which is 1. An existing job keeps its ID, its
	// schedule and its runtime fields (State, NextRun, Stats, Lease,
	// Created); only its definition (Priority, Interval, Payload) and
	// Updated are replaced, and Version increments. Upsert returns the job
	// as stored; Version 1 tells an insert from an update.
	//
	// Errors: [ErrInvalid] (see [Job.Validate]).
	Upsert(ctx context.Context, job Job) (Job, error)

	// Get returns the job with the given ID.
	//
	// Errors: [ErrInvalid] (id <= 0); [ErrNotFound].
	Get(ctx context.Context, id int64) (Job, error)

	// List returns the jobs matching q in ascending ID order, at most
	// q.Limit of them when it is positive. Page through all jobs by passing
	// the last ID returned as the next q.After until a page is empty.
	//
	// Errors: [ErrInvalid] when [Query.Validate] fails (a non-empty Kind
	// or State that is not valid, a negative After or Limit).
	List(ctx context.Context, q Query) ([]Job, error)

	// Update writes job's mutable fields (Priority, Interval, Payload,
	// State, NextRun, Stats, Lease, Updated) over the stored job with the
	// same ID if and only if the stored Version equals job.Version, and
	// returns the job as stored, with Version job.Version+1. It is a
	// compare-and-swap: of many concurrent Updates from one version exactly
	// one wins. ID, Provider, Kind, Stream and Created never change.
	//
	// Errors, in the order checked: [ErrInvalid] (id <= 0, see
	// [Job.Validate]); [ErrNotFound]; [ErrInvalid] (Provider, Kind or Stream
	// differ from the stored job's); [ErrConflict] (the version differs).
	Update(ctx context.Context, job Job) (Job, error)

	// Delete removes the job with the given ID. Its (Provider, Kind,
	// Stream) is free again: a later Upsert creates a new job with a new
	// ID. A lease does not protect a job from deletion; the holder's next
	// Update gets ErrNotFound.
	//
	// Errors: [ErrInvalid] (id <= 0); [ErrNotFound].
	Delete(ctx context.Context, id int64) error

	// Claim leases to owner, atomically, up to limit jobs due at now, and
	// returns them as stored after the claim: State running, Lease {owner,
	// now+ttl}, Updated now, Version incremented; NextRun and everything
	// else unchanged. Of many concurrent claims, no two lease the same job
	// while its lease is live.
	//
	// A job is claimable at now when its State is active (not paused, not
	// success), NextRun <= now, and its lease is empty or expired at now
	// (Lease.Owner empty or Lease.Until <= now) (an expired lease is taken over: that is how a crashed run is
	// rescued). A store may also end a lease before Until when it knows the
	// holder's process has died (pgstore ties a lease to its holder's
	// database session): such a lease counts as expired everywhere here,
	// in the rules below too, and every method reports it so (see
	// [JobLease]). Among claimable jobs, Claim takes them one at a time, each
	// time the best ranked job that is eligible given the jobs taken so far,
	// until limit jobs are taken or none is eligible. A claimable job of
	// provider P is eligible unless:
	//
	//   - P is in f.Skip;
	//   - f.PerProvider > 0 and P already has f.PerProvider jobs leased
	//     (live leases held by anyone, in any state, counting this claim's);
	//   - another job of P on the same Stream is leased with a live lease
	//     (counting this claim's): jobs of one stream contend for its
	//     checkpoint and lease, so they never run at once;
	//   - it is a backfill and P has a head job (any other kind, State
	//     active) that is claimable and not held back by the rule above,
	//     or leased with a live lease (counting this claim's): head first,
	//     tail only when P is idle;
	//   - it is a backfill and f.Tail is non-nil and f.Tail(P) is false.
	//
	// Rank, best first: with f.Aging > 0, ascending NextRun + Priority ×
	// f.Aging, then Priority, NextRun and ID; a job due for longer thereby
	// gains one priority point per Aging and no job starves. With f.Aging
	// zero: ascending Priority, then NextRun, then ID. The result is in the
	// order taken. Under concurrent claims a store may return fewer jobs
	// than this greedy choice (a database store skips rows another claim
	// holds locked); the scheduler simply claims again at its next poll.
	//
	// Errors: [ErrInvalid] (empty owner, ttl <= 0, limit < 1,
	// f.PerProvider < 0, f.Aging outside [0, MaxAging]).
	Claim(ctx context.Context, now time.Time, owner string, ttl time.Duration, limit int, f ClaimFilter) ([]Job, error)
}

// MaxAging is the largest [ClaimFilter.Aging]: one priority point per day.
const MaxAging = 24 * time.Hour

// ClaimFilter narrows and orders a [JobStore.Claim].
type ClaimFilter struct {
	// Skip lists providers none of whose jobs may be claimed: paused or
	// cooling down after source pressure.
	Skip []string
	// PerProvider caps how many jobs of one provider may be leased at once,
	// counting live leases held by any owner. Zero means no cap.
	PerProvider int
	// Aging is the wait worth one priority point. Zero means no aging:
	// strict priority order.
	Aging time.Duration
	// Tail, if non-nil, is asked before a provider's backfill is claimed,
	// after the head-first rule allowed it; false holds the provider's
	// backfills back (no spare budget). It is called while the store
	// holds its claim, so it must be quick and must not call the store.
	Tail func(provider string) bool
}

// Query selects jobs for [JobStore.List]. Empty fields match everything.
type Query struct {
	// Provider matches jobs of this provider.
	Provider string
	// Kind matches jobs of this kind.
	Kind Kind
	// State matches jobs in this state.
	State State
	// Stream matches jobs of this stream.
	Stream string
	// After returns only jobs with an ID greater than After (paging).
	After int64
	// Limit caps the number of jobs returned; zero means no cap.
	Limit int
}

// match reports whether j matches q's filters (not its paging).
func (q *Query) match(j *Job) bool {
	return (q.Provider == "" || j.Provider == q.Provider) &&
		(q.Kind == "" || j.Kind == q.Kind) &&
		(q.State == "" || j.State == q.State) &&
		(q.Stream == "" || j.Stream == q.Stream)
}

// Validate reports whether q is a query [JobStore.List] accepts: Kind and
// State empty or one of the package's constants, After and Limit >= 0. A
// store checks it first; a host that takes a kind or state from outside (a
// URL's ?state=) can check it the same way. Errors: [ErrInvalid], naming
// the field of q ("Query.State") and the value.
func (q *Query) Validate() error {
	switch {
	case q.Kind != "" && !q.Kind.valid():
		return invalid("Query.Kind", "must be empty or a valid kind", q.Kind)
	case q.State != "" && !q.State.valid():
		return invalid("Query.State", "must be empty or a valid state", q.State)
	case q.After < 0:
		return invalid("Query.After", "must be >= 0", q.After)
	case q.Limit < 0:
		return invalid("Query.Limit", "must be >= 0", q.Limit)
	}
	return nil
}

// validateClaim checks Claim's arguments.
func validateClaim(owner string, ttl time.Duration, limit int, f *ClaimFilter) error {
	switch {
	case owner == "":
		return invalid("owner", "must not be empty", `""`)
	case ttl <= 0:
		return invalid("ttl", "must be > 0", ttl)
	case limit < 1:
		return invalid("limit", "must be >= 1", limit)
	case f.PerProvider < 0:
		return invalid("ClaimFilter.PerProvider", "must be >= 0", f.PerProvider)
	case f.Aging < 0 || f.Aging > MaxAging:
		return invalid("ClaimFilter.Aging", "must be in [0, 24h]", f.Aging)
	}
	return nil
}
