package schedule

import (
	"context"
	"slices"
	"time"

	"github.com/forage-go/forage/budget"
)

// Snapshot is the scheduler's state at a moment: the metrics an operator's
// dashboard shows. It is a plain value.
type Snapshot struct {
	// At is when the snapshot was taken.
	At time.Time `json:"at"`
	// Jobs counts stored jobs by state.
	Jobs map[State]int `json:"jobs"`
	// Total is the number of stored jobs.
	Total int `json:"total"`
	// Due counts jobs due at At and waiting for a slot, a provider or a
	// head job to finish: the queue.
	Due int `json:"due"`
	// Active counts the jobs this scheduler is running.
	Active int `json:"active"`
	// Providers has one entry per provider with jobs, paused, cooling or
	// known to the budget registry, sorted by name: the page
	// [Scheduler.SnapshotPage] was asked for.
	Providers []ProviderSnapshot `json:"providers"`
	// MoreProviders counts the providers left out of Providers (those
	// after its last by name); zero when it holds them all.
	MoreProviders int `json:"more_providers,omitempty"`
	// Decisions counts what the scheduler did since it was created.
	Decisions Decisions `json:"decisions"`
}

// ProviderSnapshot is one provider's part of a [Snapshot].
type ProviderSnapshot struct {
	// Provider is the provider key.
	Provider string `json:"provider"`
	// Jobs counts its stored jobs.
	Jobs int `json:"jobs"`
	// Due counts its jobs due and waiting (queued).
	Due int `json:"due"`
	// Running counts its jobs under a live lease, in any scheduler.
	Running int `json:"running"`
	// Paused reports whether it is paused: in this scheduler
	// ([Scheduler.SetProviderPaused]), or by an operator's status in its
	// budget record ([budget.Registry.SetStatus], in every process).
	Paused bool `json:"paused"`
	// CoolingUntil is the end of its cool-down after source pressure; zero
	// when not cooling.
	CoolingUntil time.Time `json:"cooling_until,omitzero"`
	// Budget is its budget snapshot (rate, breaker, in flight), if a
	// [budget.Registry] is configured and holds it.
	Budget *budget.Snapshot `json:"budget,omitempty"`
}

// Decisions counts the scheduler's decisions.
type Decisions struct {
	// Claims counts claims sent to the store.
	Claims uint64 `json:"claims"`
	// Started counts jobs claimed to run.
	Started uint64 `json:"started"`
	// Succeeded counts successful runs that left work to do (the next
	// cycle, or more backfill, including a declared stream's run whose
	// turn was over).
	Succeeded uint64 `json:"succeeded"`
	// Done counts backfills and gap fills that finished.
	Done uint64 `json:"done"`
	// Requeued counts runs that spent their budget (re-queued, no cool-down).
	Requeued uint64 `json:"requeued"`
	// Pressured counts runs stopped by source pressure (provider cooled).
	Pressured uint64 `json:"pressured"`
	// Failed counts failed runs (backed off).
	Failed uint64 `json:"failed"`
	// Interrupted counts runs the scheduler stopped (pause, delete,
	// shutdown).
	Interrupted uint64 `json:"interrupted"`
	// Yielded counts runs that found their stream held by another owner
	// (a [checkpoint.LeaseHeldError]): nothing done, the job waits.
	Yielded uint64 `json:"yielded"`
	// LeasesLost counts runs whose lease another scheduler took over.
	LeasesLost uint64 `json:"leases_lost"`
	// StoreErrors counts failed store calls.
	StoreErrors uint64 `json:"store_errors"`
}

// Budget returns [Config.Budget], the registry of s's providers, or nil: an
// admin page reads and steers the providers through it.
func (s *Scheduler) Budget() *budget.Registry { return s.cfg.Budget }

// SnapshotPage returns the scheduler's state at now (usually time.Now())
// with a page of providers: its Providers are the first limit providers
// named after after (by byte-wise name order; "" starts at the first), and
// MoreProviders counts the rest, so a snapshot stays small however many
// providers there are. To list every provider, call it again with after
// the name of the last provider of the page until MoreProviders is zero
// (or pass math.MaxInt). The counts of jobs are of the whole store
// whatever the page. It reads every job from the store, page by page:
// meant for dashboards, not hot paths. Errors: [ErrInvalid] for a negative
// limit; store errors.
func (s *Scheduler) SnapshotPage(ctx context.Context, now time.Time, after string, limit int) (Snapshot, error) {
	if limit < 0 {
		return Snapshot{}, invalid("limit", "must be >= 0", limit)
	}
	snap := Snapshot{At: now, Jobs: make(map[State]int), Decisions: s.decisions()}
	provs := map[string]*ProviderSnapshot{}
	get := func(name string) *ProviderSnapshot {
		p := provs[name]
		if p == nil {
			p = &ProviderSnapshot{Provider: name}
			provs[name] = p
		}
		return p
	}
	for q := (Query{Limit: snapshotBatch}); ; {
		page, err := s.store.List(ctx, q)
		if err != nil {
			return Snapshot{}, err
		}
		if len(page) == 0 {
			break
		}
		for i := range page {
			j := &page[i]
			p := get(j.Provider)
			snap.Jobs[j.State]++
			snap.Total++
			p.Jobs++
			if j.Lease.held(now) {
				p.Running++
			} else if j.due(now) {
				p.Due++
				snap.Due++
			}
		}
		q.After = page[len(page)-1].ID
	}
	s.mu.Lock()
	snap.Active = len(s.active)
	for name := range s.paused {
		get(name).Paused = true
	}
	for name, until := range s.cooling {
		if until.After(now) {
			get(name).CoolingUntil = until
		}
	}
	s.mu.Unlock()
	// The budget's providers, a page of them: a crawler's registry may hold
	// 100,000, and a snapshot of each is what a dashboard cannot afford.
	// The page's first limit names are among this scheduler's own and the
	// registry's first limit after after; every registry key past its page
	// comes after them all.
	beyond := 0 // registry keys past the page that no job, pause or cool-down names
	if reg := s.cfg.Budget; reg != nil {
		page, more := reg.SnapshotPage(after, limit)
		for i := range page {
			b := &page[i]
			p := get(b.Key)
			p.Budget = b
			p.Paused = p.Paused || b.Status == budget.StatusPaused // "paused": false beside status "paused" read as a contradiction
		}
		last := after
		if len(page) > 0 {
			last = page[len(page)-1].Key
		}
		beyond = more
		for name := range provs {
			if _, ok := reg.Lookup(name); ok && name > last && more > 0 {
				beyond-- // counted in more already, and counted below as a name
			}
		}
	}
	names := make([]string, 0, len(provs))
	for name := range provs {
		if name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) > limit {
		snap.MoreProviders = len(names) - limit
		names = names[:limit]
	}
	snap.MoreProviders += beyond
	snap.Providers = make([]ProviderSnapshot, 0, len(names))
	for _, name := range names {
		snap.Providers = append(snap.Providers, *provs[name])
	}
	return snap, nil
}

// snapshotBatch is how many jobs a Snapshot reads from the store at once:
// it holds their payloads (up to 1 MiB each) only while it counts them.
const snapshotBatch = 128

// decisions reads the counters.
func (s *Scheduler) decisions() Decisions {
	n := &s.n
	return Decisions{
		Claims: n.claims.Load(), Started: n.started.Load(), Succeeded: n.succeeded.Load(),
		Done: n.done.Load(), Requeued: n.requeued.Load(), Pressured: n.pressured.Load(),
		Failed: n.failed.Load(), Interrupted: n.interrupted.Load(), Yielded: n.yielded.Load(), LeasesLost: n.lost.Load(),
		StoreErrors: n.storeErrors.Load(),
	}
}
