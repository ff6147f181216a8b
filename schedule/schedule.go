package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage/internal/cfgerr"
	"github.com/forage-go/forage/internal/redact"
)

// Worker runs one job that is not a declared stream (see [AddStream]): a
// crawl, an export, any fetch loop the host writes itself. Jobs of a
// declared stream are run by the scheduler itself, through the stream's
// slice runner.
//
// Run returns when the job's work for this run is over: nil and a
// [Result] when it succeeded; a [budget.Error] (or an error wrapping one)
// when it stopped for a reason (budget exhaustion or source pressure, see
// the package doc's outcome table); a [checkpoint.LeaseHeldError] when
// another owner holds what the job works on (a yield: the job waits and
// runs again, it is not a success); any other error when it failed. It
// must return soon after ctx ends: the scheduler cancels ctx, with cause
// [ErrInterrupted], when the job or its provider is paused, the job is
// deleted, its lease is lost, or Run is returning. The error still decides
// the outcome then: returning the context's error (or one wrapping it)
// makes the run interrupted, not a failure, while a [budget.Error] of
// source pressure still cools the provider.
type Worker interface {
	Run(ctx context.Context, job Job) (Result, error)
}

// WorkerFunc adapts a function to [Worker].
type WorkerFunc func(ctx context.Context, job Job) (Result, error)

// Run calls f(ctx, job).
func (f WorkerFunc) Run(ctx context.Context, job Job) (Result, error) { return f(ctx, job) }

// Result is what a successful run reports.
type Result struct {
	// Done reports that a backfill reached the earliest data the provider
	// has (the runner discovers it, e.g. from an empty page), or that a gap
	// fill left no gap behind. A done backfill goes to [StateSuccess]; a
	// done gap fill is deleted. Ignored for refresh and incremental jobs.
	Done bool
}

// Scheduler runs many jobs over many providers: due jobs by (priority, next
// run) with aging, head work before tail work, within a global and a
// per-provider concurrency limit, waiting out each provider's rate-limit
// pauses. Scheduler is safe for concurrent use; [New] starts nothing, [Scheduler.Run]
// does the work until its context ends.
//
// The zero Scheduler is not usable (Run returns an error, other methods
// panic): make one with [New].
type Scheduler struct {
	cfg    Config
	store  JobStore
	worker Worker // nil when every job is a declared stream
	rand   func() float64

	claimMu sync.Mutex // serialises claims with control calls that must see them
	mu      sync.Mutex // guards the fields below
	active  map[int64]*active
	// draining holds runs whose job the store handed to this scheduler
	// again while the run was still going: interrupted, not written, but
	// still running, so still holding a slot. A claim skips the providers
	// of runs with expired leases, so only a store breaking the Claim
	// contract gets a job here.
	draining map[*active]struct{}
	streams  map[string]*stream   // declared streams, by name
	paused   map[string]bool      // providers
	cooling  map[string]time.Time // provider → end of its cool-down
	wakes    heap[time.Time]      // times a known job comes due
	seq      uint64               // claim sequence, for lease owners
	wake     chan struct{}        // pokes Run's loop
	inRun    atomic.Bool

	spareMu   sync.Mutex
	saturated map[string]int64 // provider → its Saturated count at the last Spare check

	n counters
}

// active is one job this scheduler has claimed and not yet finished.
type active struct {
	id     int64
	job    Job // as last written by this scheduler
	start  time.Time
	ctx    context.Context // nil unless started by Run
	cancel context.CancelCauseFunc
	cause  error // why the scheduler interrupted the run; nil if it did not
	lost   bool  // the lease was lost: the outcome is not written
	// renewFailing: the last renewal failed, and was logged; the next
	// failures are counted only, until one succeeds.
	renewFailing bool
	// guard stops the run when its lease comes within LeaseTTL/leaseMargin
	// of its end unrenewed, whatever the store does (see expire); nil
	// unless started by Run.
	guard *time.Timer
}

// interrupt cancels a's run with cause, once.
func (a *active) interrupt(cause error) {
	if a.cause == nil {
		a.cause = cause
	}
	if a.cancel != nil {
		a.cancel(a.cause)
	}
}

// New returns a Scheduler over store, or an error naming the invalid field
// of cfg. worker runs the jobs that are not declared streams; it may be nil
// when every job is one (see [AddStream]): a job that is neither then fails
// with an error that says so.
func New(cfg Config, store JobStore, worker Worker) (*Scheduler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfgerr.IsNil(store) {
		return nil, invalidConfig.Must("New's store", "not be nil: use schedule.NewMemoryJobStore() or a database store", "nil")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	if cfg.Owner == "" {
		cfg.Owner = fmt.Sprintf("schedule-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	} else {
		// Processes given one Owner (a host name, a deployment's name)
		// hold distinct leases: with "collector/1" in two of them, a
		// stalled one's late finish passed the owner check of a job the
		// other had rescued, and marked it done while it ran.
		cfg.Owner += "." + hex.EncodeToString(b[:])
	}
	s := &Scheduler{
		cfg: cfg, store: store, worker: worker, rand: cfg.Random,
		streams:   make(map[string]*stream),
		active:    make(map[int64]*active),
		draining:  make(map[*active]struct{}),
		paused:    make(map[string]bool),
		cooling:   make(map[string]time.Time),
		wake:      make(chan struct{}, 1),
		wakes:     heap[time.Time]{less: time.Time.Before},
		saturated: make(map[string]int64),
	}
	if s.rand == nil {
		s.rand = mrand.Float64
	}
	return s, nil
}

// claim leases the jobs the scheduler would start at now, within its
// limits, and counts them as running until finish. It is the
// scheduling decision: due jobs by rank (see [JobStore.Claim]), no more
// than MaxRunning in flight, no more than MaxPerProvider per provider, no
// job of a paused or cooling provider, a provider's backfills only when its
// head work is done and it has budget to spare. While a run here has a
// lost or expired lease (renewals failing), its provider's jobs are not
// claimed: the store no longer counts that run, and would hand its job
// back to run twice. With parent non-nil it also makes each run's context.
func (s *Scheduler) claim(ctx context.Context, now time.Time, parent context.Context) ([]*active, error) {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	s.mu.Lock()
	free := s.cfg.MaxRunning - len(s.active) - len(s.draining)
	var skip []string
	for p := range s.paused {
		skip = append(skip, p)
	}
	// A run whose lease is lost or expired still runs here, but the store
	// no longer counts it against its provider (and would hand an expired
	// lease back to us, running the job twice): hold the provider back
	// until the run drains or its renewal succeeds.
	for _, a := range s.active {
		if a.lost || !a.job.Lease.Until.After(now) {
			skip = append(skip, a.job.Provider)
		}
	}
	for a := range s.draining {
		skip = append(skip, a.job.Provider)
	}
	for p, until := range s.cooling {
		if until.After(now) {
			skip = append(skip, p)
		} else {
			delete(s.cooling, p)
		}
	}
	s.seq++
	owner := fmt.Sprintf("%s/%d", s.cfg.Owner, s.seq)
	s.mu.Unlock()
	if free <= 0 {
		return nil, nil
	}
	f := ClaimFilter{Skip: skip, PerProvider: s.cfg.MaxPerProvider, Aging: s.cfg.Aging, Tail: s.spare(now)}
	jobs, err := s.store.Claim(ctx, now, owner, s.cfg.LeaseTTL, free, f)
	s.n.claims.Add(1)
	if err != nil {
		s.n.storeErrors.Add(1)
		return nil, fmt.Errorf("schedule: claim: %w", err)
	}
	out := make([]*active, len(jobs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range jobs {
		a := &active{id: j.ID, job: j, start: now}
		if parent != nil {
			// Not cancelled with parent: Run cancels runs itself, with
			// cause ErrInterrupted, so runners can tell why.
			a.ctx, a.cancel = context.WithCancelCause(context.WithoutCancel(parent))
			a.guard = time.AfterFunc(time.Until(s.loseAt(j.Lease.Until)), func() { s.expire(a) })
		}
		if old := s.active[j.ID]; old != nil { // our own expired lease, rescued
			s.loseLocked(old)
			s.draining[old] = struct{}{} // still running: keeps its slot
		}
		if j.Lease.TakenFrom != "" {
			s.log("lease taken over", j, nil, "from", j.Lease.TakenFrom)
		}
		if s.paused[j.Provider] { // paused while the claim was in flight
			a.interrupt(fmt.Errorf("%w: provider %s paused", ErrInterrupted, j.Provider))
		}
		s.active[j.ID] = a
		out[i] = a
	}
	s.n.started.Add(uint64(len(jobs)))
	return out, nil
}

// renewAll extends, to now + LeaseTTL, the lease of every running job whose
// lease is past a third of its life, so no other scheduler rescues a job
// that is still running. A job found paused or deleted in the store has its
// run interrupted; a job found leased to someone else is lost (its outcome
// will not be written), and so is one whose lease is within LeaseTTL/6 of
// its end because the store did not answer: it stops before another
// scheduler may claim it (each run's guard timer stops it then too, when
// a store whose calls hang holds Run's loop; see expire). [Scheduler.Run] calls it at least every
// LeaseTTL/3, and every LeaseTTL/6 or more often while a renewal fails, so
// that call comes in time. It returns the first store error.
func (s *Scheduler) renewAll(ctx context.Context, now time.Time) error {
	due := now.Add(s.cfg.LeaseTTL * 2 / 3)
	s.mu.Lock()
	var renew []*active
	for _, a := range s.active {
		if !a.lost && !a.job.Lease.Until.After(due) {
			renew = append(renew, a)
		}
	}
	s.mu.Unlock()
	var first error
	for _, a := range renew {
		if err := s.renew(ctx, now, a); err != nil && first == nil {
			first = err
		}
	}
	// A run whose lease could not be renewed stops before the lease ends,
	// with a margin for it to return: past its end, another scheduler may
	// claim the job and run it too (a scheduler cut off from its store ran
	// a job for a minute and a half alongside the one that rescued it).
	s.mu.Lock()
	for _, a := range s.active {
		if !a.lost && !a.job.Lease.Until.After(now.Add(s.cfg.LeaseTTL/leaseMargin)) {
			s.loseLocked(a)
		}
	}
	s.mu.Unlock()
	return first
}

// leaseMargin is the part of LeaseTTL before a lease ends, unrenewed, at
// which its run is stopped (see renewAll).
const leaseMargin = 6

// loseAt is when a run whose lease ends at until is stopped unless the
// lease is renewed by then.
func (s *Scheduler) loseAt(until time.Time) time.Time {
	return until.Add(-s.cfg.LeaseTTL / leaseMargin)
}

// expire stops a's run, as renewAll does, if its lease is still within
// LeaseTTL/leaseMargin of its end. It runs on a's guard timer, not in
// Run's loop: a store whose calls hang (a dead connection, waiting for TCP
// to give up) held the loop in a renewal, and the run went on past its
// lease beside the one another scheduler rescued.
func (s *Scheduler) expire(a *active) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[a.id] == a && !a.lost && !a.job.Lease.Until.After(time.Now().Add(s.cfg.LeaseTTL/leaseMargin)) {
		s.loseLocked(a)
	}
}

// renew extends a's lease, noticing a pause, a deletion or a takeover.
func (s *Scheduler) renew(ctx context.Context, now time.Time, a *active) error {
	s.mu.Lock()
	id, owner := a.job.ID, a.job.Lease.Owner
	s.mu.Unlock()
	j, err := s.mutate(ctx, id, func(j *Job) error {
		if j.Lease.Owner != owner || !j.Lease.Until.After(now) {
			// Taken over, or ended: once it ended, another scheduler
			// may have been given the stream (a stalled one renewed its
			// expired lease and ran on beside the one that had claimed
			// the stream's gap fill).
			return errLost
		}
		j.Lease.Until, j.Updated = now.Add(s.cfg.LeaseTTL), now
		return nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[id] != a { // finished meanwhile: its release won the race
		return nil
	}
	switch {
	case errors.Is(err, ErrNotFound):
		a.interrupt(fmt.Errorf("%w: job %d deleted", ErrInterrupted, id))
		return nil
	case errors.Is(err, errLost):
		s.loseLocked(a)
		return nil
	case err != nil && a.renewFailing:
		// Retried every Poll/16 until the lease is lost: a record each
		// was 16 a second per running job while the database restarted.
		s.n.storeErrors.Add(1)
		return fmt.Errorf("schedule: renew job %d: %w", id, err)
	case err != nil:
		a.renewFailing = true
		return s.storeError("renew", a.job, err)
	}
	a.renewFailing = false
	a.job = j
	if a.guard != nil {
		a.guard.Reset(time.Until(s.loseAt(j.Lease.Until)))
	}
	if j.State == StatePaused {
		a.interrupt(fmt.Errorf("%w: job %d paused", ErrInterrupted, j.ID))
	}
	return nil
}

// errLost is mutate's abort when the lease is no longer ours.
var errLost = errors.New("schedule: lease lost")

// loseLocked marks a's lease lost and stops its run. Caller holds s.mu.
func (s *Scheduler) loseLocked(a *active) {
	if !a.lost {
		a.lost = true
		s.n.lost.Add(1)
		s.log("lease lost", a.job, nil)
	}
	a.interrupt(fmt.Errorf("%w: lease lost", ErrInterrupted))
}

// mutate reads job id, applies f and writes it back, retrying when another
// writer got in between. f returning an error aborts with that error.
func (s *Scheduler) mutate(ctx context.Context, id int64, f func(*Job) error) (Job, error) {
	for try := 0; ; try++ {
		j, err := s.store.Get(ctx, id)
		if err != nil {
			return Job{}, err
		}
		if err := f(&j); err != nil {
			return j, err
		}
		nj, err := s.store.Update(ctx, j)
		if errors.Is(err, ErrConflict) && try < 16 {
			continue
		}
		return nj, err
	}
}

// poke wakes Run's loop if it sleeps.
func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// log writes one line if a Logger is configured.
func (s *Scheduler) log(msg string, j Job, err error, extra ...any) {
	if s.cfg.Logger == nil {
		return
	}
	attrs := append([]any{"job", j.ID, "provider", j.Provider, "kind", string(j.Kind), "stream", j.Stream}, extra...)
	if err != nil {
		attrs = append(attrs, "err", redact.String(err.Error()))
	}
	s.cfg.Logger.Warn("schedule: "+msg, attrs...)
}

// counters are the scheduler's decision counts.
type counters struct {
	claims, started, succeeded, done, requeued, pressured, failed,
	interrupted, yielded, lost, storeErrors atomicCounter
}

type atomicCounter = atomic.Uint64
