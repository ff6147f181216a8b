package schedule

import (
	"fmt"
	"time"

	"github.com/forage-go/forage/internal/argerr"
)

// Kind is what a job does. Backfill is tail work; every other kind is head
// work, which a provider always runs first.
type Kind string

// The kinds of job, in their default order of priority.
const (
	// KindGapFill refetches the holes earlier runs left (the gap records of
	// one stream). It is created by the host from the planner or the gap
	// records, and deleted when the runner reports it Done.
	KindGapFill Kind = "gap_fill"
	// KindIncremental fetches new data at the head of a stream, every
	// Interval (typically the candle's timeframe).
	KindIncremental Kind = "incremental"
	// KindRefresh refreshes metadata such as a provider's markets, every
	// Interval (typically 6–24h). It ranks after incremental work: fresh
	// data matters more than a new listing, and a refresh is cheap and rare.
	KindRefresh Kind = "refresh"
	// KindBackfill walks a stream's history towards the earliest data the
	// provider has, resumable by cursor, only when the provider is idle. The
	// runner discovers the earliest data and reports it with [Result.Done].
	KindBackfill Kind = "backfill"
)

// maxPriority is the largest job priority. Priorities run from 0 (most
// urgent) to maxPriority.
const maxPriority = 1000

// valid reports whether k is one of the four kinds.
func (k Kind) valid() bool {
	switch k {
	case KindGapFill, KindIncremental, KindRefresh, KindBackfill:
		return true
	}
	return false
}

// head reports whether k is head work: anything but a backfill.
func (k Kind) head() bool { return k != KindBackfill }

// periodic reports whether k recurs every Interval (refresh, incremental)
// rather than running until done (backfill, gap fill).
func (k Kind) periodic() bool { return k == KindRefresh || k == KindIncremental }

// DefaultPriority is the priority a job of kind k gets when none is given:
// gap fill 10, incremental 20, refresh 30, backfill 40. Lower runs first.
func (k Kind) DefaultPriority() int {
	switch k {
	case KindGapFill:
		return 10
	case KindIncremental:
		return 20
	case KindRefresh:
		return 30
	}
	return 40
}

// State is where a job stands. The scheduler writes it; stores keep it.
type State string

// The states of a job.
const (
	// StateIdle: waiting for NextRun (a new job, or a periodic job after a
	// successful run).
	StateIdle State = "idle"
	// StateQueued: asked to run again soon (run now, a spent run budget, an
	// unfinished backfill, an interrupted run).
	StateQueued State = "queued"
	// StateRunning: leased by a scheduler and running.
	StateRunning State = "running"
	// StateWaitingRateLimit: the provider pushed back, or its known quota
	// is spent; NextRun is the end of its pause (Retry-After, the limit's
	// reset, the next slot of a [budget.Limit]). A provider that kept
	// failing (unavailable, circuit open) fails the job instead.
	StateWaitingRateLimit State = "waiting_rate_limit"
	// StateSuccess: a backfill that reached the earliest data. It never
	// runs again unless run now.
	StateSuccess State = "success"
	// StateFailed: the last run failed; NextRun is after the backoff, or,
	// when the provider was failing (unavailable, circuit open), the end of
	// its cool-down.
	StateFailed State = "failed"
	// StatePaused: paused by an operator; it never runs until resumed.
	StatePaused State = "paused"
)

// valid reports whether s is one of the seven states.
func (s State) valid() bool {
	switch s {
	case StateIdle, StateQueued, StateRunning, StateWaitingRateLimit, StateSuccess, StateFailed, StatePaused:
		return true
	}
	return false
}

// claimable reports whether a job in state s may be claimed once due:
// every state but paused and success (the active states).
func (s State) claimable() bool { return s.valid() && s != StatePaused && s != StateSuccess }

// Job is one unit of recurring or resumable work on one stream of one
// provider, with its schedule, its state and its lease. (Provider, Kind,
// Stream) identifies a job: there is at most one per triple, so at most one
// pending run per stream and kind. Job is a plain value.
type Job struct {
	// ID is assigned by the store on insert: > 0, never reused.
	ID int64
	// Provider is the provider key, the same key as the [budget.Registry]'s
	// (an exchange, a host). Concurrency limits and cool-downs are per
	// provider.
	Provider string
	// Kind is what the job does.
	Kind Kind
	// Stream names the data, e.g. "BTC-USDT/1h". The scheduler does not
	// interpret it; the runner does.
	Stream string
	// Priority orders due jobs: lower runs first, in [0, 1000].
	Priority int
	// Interval is the cadence of a periodic job (refresh, incremental),
	// before jitter. Backfills and gap fills run until done and ignore it.
	Interval time.Duration
	// Payload is opaque host data handed to the runner, e.g. an encoded
	// request template. Stores copy it.
	Payload []byte

	// State is where the job stands.
	State State
	// NextRun is when the job is next due.
	NextRun time.Time
	// Stats counts the job's runs.
	Stats Stats
	// Lease is the scheduler holding the job while it runs, if any.
	Lease JobLease

	// Version increases by one with every write; stores compare it on
	// [JobStore.Update]. 1 after the insert.
	Version int64
	// Created is when the job was inserted.
	Created time.Time
	// Updated is when the job was last written.
	Updated time.Time
}

// Stats counts a job's runs.
type Stats struct {
	// Runs counts finished runs, whatever their outcome.
	Runs int64
	// Successes counts runs that returned no error.
	Successes int64
	// Failures counts runs that failed (not budget exhaustion, not source
	// pressure, not interruptions).
	Failures int64
	// Streak counts consecutive failures; it sets the backoff. A success
	// resets it, and a failed run of a declared stream that committed
	// slices first starts it again at one; budget exhaustion, source
	// pressure and interruptions leave it as it was.
	Streak int
	// LastError is the error of the last failed or pushed-back run, with
	// every URL's query values and userinfo redacted (they often hold the
	// provider's credentials) and cut to 2 KiB.
	LastError string
	// LastRun is when the last finished run started.
	LastRun time.Time
	// LastSuccess is when the last successful run finished.
	LastSuccess time.Time
}

// JobLease is a scheduler's hold on a running job. A lease is live until
// Until; an expired lease lets another scheduler claim the job (a rescue of
// a crashed run). Owner is unique per claim, so it also fences: a scheduler
// that lost its lease sees another Owner and does not write.
type JobLease struct {
	// Owner names the claim that holds the job; empty when not leased.
	Owner string
	// Until is when the lease expires unless renewed. A store that ends
	// a lease early, its holder's process being gone (see
	// [JobStore.Claim]), reports it with an Until already past (the
	// store's choice, e.g. the job's last write), so that what is decided
	// from a job read agrees with the claim: [Scheduler.RunNow] queues it,
	// a snapshot does not count it as running, and a holder that lives on
	// without its session finds the lease lost at its next renewal.
	Until time.Time
	// TakenFrom is set only in [JobStore.Claim]'s result: the Owner of the
	// expired lease the claim took over (a crashed or stalled run rescued),
	// empty when the job was not leased. Stores do not keep it: Upsert and
	// Update ignore it, Get and List never return it.
	TakenFrom string
}

// held reports whether the lease is live at now.
func (l JobLease) held(now time.Time) bool { return l.Owner != "" && now.Before(l.Until) }

// due reports whether j may be claimed at now: its state is active (not
// paused, not success), NextRun has come, and no live lease holds it.
func (j *Job) due(now time.Time) bool {
	return j.State.claimable() && !j.NextRun.After(now) && !j.Lease.held(now)
}

// Validate checks the fields a store must reject: an empty provider or
// stream, an unknown kind or state, a priority outside [0, 1000], a
// negative interval, a lease owner without an expiry. The error wraps
// [ErrInvalid] and names the field. It ignores ID and Version.
func (j *Job) Validate() error {
	for _, f := range [...]struct{ field, name string }{
		{"Job.Provider", j.Provider}, {"Job.Stream", j.Stream},
	} {
		if err := checkName(f.field, f.name); err != nil {
			return err
		}
	}
	if j.Lease.Owner != "" {
		if err := checkName("Job.Lease.Owner", j.Lease.Owner); err != nil {
			return err
		}
	}
	switch {
	case !j.Kind.valid():
		return invalid("Job.Kind", "must be gap_fill, incremental, refresh or backfill", fmt.Sprintf("%q", j.Kind))
	case !j.State.valid():
		return invalid("Job.State", "must be a known state", fmt.Sprintf("%q", j.State))
	case j.Priority < 0 || j.Priority > maxPriority:
		return invalid("Job.Priority", fmt.Sprintf("must be in [0, %d]", maxPriority), j.Priority)
	case j.Interval < 0:
		return invalid("Job.Interval", "must be >= 0", j.Interval)
	case j.Lease.Owner != "" && j.Lease.Until.IsZero():
		return invalid("Job.Lease.Until", "must be set when Lease.Owner is", "zero")
	}
	return nil
}

// invalid returns an [ErrInvalid] error naming field, rule and value. It
// knows its field, so the admin API can name it in its own terms.
func invalid(field, rule string, got any) error {
	return argerr.New(ErrInvalid, field, rule, got)
}

// Spec describes a job to add with [Scheduler.Upsert]: its identity and its
// definition. The scheduler fills in the rest.
type Spec struct {
	// Provider is the provider key. Required.
	Provider string
	// Kind is what the job does. Required.
	Kind Kind
	// Stream names the data. Required.
	Stream string
	// Priority orders due jobs, lower first, in [0, 1000]. Zero
	// means the kind's [Kind.DefaultPriority].
	Priority int
	// Interval is the cadence of a refresh or incremental job (required > 0
	// for them); backfills and gap fills run until done and ignore it.
	Interval time.Duration
	// Payload is opaque host data handed to the runner.
	Payload []byte
	// NextRun is when a new job first runs. Zero means at once. Ignored
	// when the job exists: an upsert never moves a job's schedule.
	NextRun time.Time
}

// maxPayloadLen caps a Spec's Payload, in bytes, so the admin API cannot
// grow a store without bound through one request. Names are capped by the
// name rule ([checkpoint.MaxNameLen]).
const maxPayloadLen = 1 << 20

// Validate checks s as [Scheduler.Upsert] does, without the store: a host
// checking a spec it takes from outside before doing more with it (as an
// admin API checks its caps) gets the error Upsert would return. Errors:
// [ErrInvalid], naming the field of s ("Spec.Interval") and the value.
func (s *Spec) Validate() error {
	if err := checkName("Spec.Provider", s.Provider); err != nil {
		return err
	}
	if err := checkName("Spec.Stream", s.Stream); err != nil {
		return err
	}
	switch {
	case !s.Kind.valid():
		return invalid("Spec.Kind", "must be gap_fill, incremental, refresh or backfill", fmt.Sprintf("%q", s.Kind))
	case s.Priority < 0 || s.Priority > maxPriority:
		return invalid("Spec.Priority", fmt.Sprintf("must be in [0, %d]", maxPriority), s.Priority)
	case s.Interval < 0:
		return invalid("Spec.Interval", "must be >= 0", s.Interval)
	case s.Kind.periodic() && s.Interval == 0:
		return invalid("Spec.Interval", "must be > 0 for a "+string(s.Kind)+" job", s.Interval)
	case len(s.Payload) > maxPayloadLen:
		return invalid("Spec.Payload", fmt.Sprintf("must be at most %d bytes", maxPayloadLen), len(s.Payload))
	}
	return nil
}
