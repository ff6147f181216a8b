package schedule

import (
	"context"
	"slices"
	"time"
)

// Claim implements [JobStore.Claim] in O((k + s) log p + (k + l) log n)
// for k jobs taken, s providers skipped and l jobs leased, after promoting
// the jobs that came due since the last claim.
func (s *memoryJobStore) Claim(ctx context.Context, now time.Time, owner string, ttl time.Duration, limit int, f ClaimFilter) ([]Job, error) {
	if err := validateClaim(owner, ttl, limit, &f); err != nil {
		return nil, err
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(now, f.Aging)
	skip := skipper(f.Skip)
	var aside []*prov // providers passed over in this claim
	var held []*entry // jobs passed over: their stream is leased
	var out []Job
	lease := JobLease{Owner: owner, Until: now.Add(ttl)}
	for _, e := range s.leased.items {
		s.holdBusy(e.prov, &held)
	}
	for len(out) < limit && len(s.ready.items) > 0 {
		p := s.ready.items[0]
		e := p.best
		if skip(p.name) || (f.PerProvider > 0 && p.leased >= f.PerProvider) {
			s.ready.removeAt(p.i)
			aside = append(aside, p)
			continue
		}
		if p.busy[e.job.Stream] > 0 {
			// Another job of the stream runs: never two at once.
			s.unplace(e)
			held = append(held, e)
			continue
		}
		if !e.job.Kind.head() && f.Tail != nil && !f.Tail(p.name) {
			s.ready.removeAt(p.i)
			aside = append(aside, p)
			continue
		}
		s.unplace(e)
		j := &e.job
		from := j.Lease.Owner // claimable, so its lease is empty or expired
		j.State, j.Lease, j.Updated = StateRunning, lease, now
		j.Version++
		s.place(e)
		s.holdBusy(p, &held)
		c := j.copy()
		c.Lease.TakenFrom = from
		out = append(out, c)
	}
	for _, e := range held {
		s.promote(e)
	}
	for _, p := range aside {
		s.fix(p)
	}
	return out, nil
}

// holdBusy takes p's best ready jobs whose stream another job runs out of
// its ready heaps, into held, until the claim ends: such a job is not
// claimable (never two jobs of a stream at once), so it neither ranks p
// nor, as a head job, holds back p's backfill. (A due head job whose stream
// a backfill ran hid the provider's other backfill behind the head-first
// rule, and the claim took another provider's later job first.)
func (s *memoryJobStore) holdBusy(p *prov, held *[]*entry) {
	for p.best != nil && p.busy[p.best.job.Stream] > 0 {
		e := p.best
		s.unplace(e)
		*held = append(*held, e)
	}
}

// skipper returns a membership test for the providers in list.
func skipper(list []string) func(string) bool {
	switch {
	case len(list) == 0:
		return func(string) bool { return false }
	case len(list) <= 8:
		return func(p string) bool { return slices.Contains(list, p) }
	}
	set := make(map[string]struct{}, len(list))
	for _, p := range list {
		set[p] = struct{}{}
	}
	return func(p string) bool { _, ok := set[p]; return ok }
}

// advance brings the indexes to now: it rescues the jobs whose lease
// expired and promotes the waiting jobs that came due. Time going back, or
// a new aging, rebuilds the indexes.
func (s *memoryJobStore) advance(now time.Time, aging time.Duration) {
	if now.Before(s.last) || aging != s.aging {
		s.aging = aging
		s.reindex(now)
	}
	s.last = now
	for e := s.leased.min(); e != nil && !e.job.Lease.Until.After(now); e = s.leased.min() {
		s.unplace(e)
		if e.job.State.claimable() {
			s.waiting.push(e)
		}
	}
	for e := s.waiting.min(); e != nil && !e.job.NextRun.After(now); e = s.waiting.min() {
		s.waiting.remove(e)
		s.promote(e)
	}
}

// reindex rebuilds every index from the stored jobs, as seen at now.
func (s *memoryJobStore) reindex(now time.Time) {
	s.last = now
	s.waiting.items, s.leased.items, s.ready.items = nil, nil, nil
	for _, p := range s.provs {
		p.head.items, p.tail.items = nil, nil
		p.leased, p.headLeased, p.best, p.i, p.busy = 0, 0, nil, -1, nil
	}
	for _, e := range s.order {
		if !e.gone {
			e.heap, e.i, e.hl = nil, -1, false
			s.place(e)
		}
	}
}

// place indexes e by its job: leased if its lease was live at the last
// claim, waiting if active, nowhere if inactive. Due waiting jobs are
// promoted by the next claim.
func (s *memoryJobStore) place(e *entry) {
	j := &e.job
	if j.Lease.Owner != "" && j.Lease.Until.After(s.last) {
		s.leased.push(e)
		p := e.prov
		p.leased++
		if p.busy == nil {
			p.busy = map[string]int{}
		}
		p.busy[j.Stream]++
		if j.Kind.head() && j.State.claimable() {
			p.headLeased++
			e.hl = true
			s.fix(p)
		}
		return
	}
	if j.State.claimable() {
		s.waiting.push(e)
	}
}

// unplace takes e out of whichever index holds it.
func (s *memoryJobStore) unplace(e *entry) {
	h := e.heap
	if h == nil {
		return
	}
	h.remove(e)
	p := e.prov
	switch h {
	case &s.leased:
		p.leased--
		if p.busy[e.job.Stream]--; p.busy[e.job.Stream] == 0 {
			delete(p.busy, e.job.Stream)
		}
		if e.hl {
			p.headLeased--
			e.hl = false
			s.fix(p)
		}
	case &p.head, &p.tail:
		s.fix(p)
	}
}

// promote moves a due job into its provider's ready heap.
func (s *memoryJobStore) promote(e *entry) {
	e.rank = time.Time{}
	if s.aging > 0 {
		e.rank = e.job.NextRun.Add(time.Duration(e.job.Priority) * s.aging)
	}
	if e.job.Kind.head() {
		e.prov.head.push(e)
	} else {
		e.prov.tail.push(e)
	}
	s.fix(e.prov)
}

// fix recomputes p's best job under the head-first rule (a head job if any
// is ready; a backfill only if no head job is ready or leased) and p's
// place in the provider heap.
func (s *memoryJobStore) fix(p *prov) {
	best := p.head.min()
	if best == nil && p.headLeased == 0 {
		best = p.tail.min()
	}
	p.best = best
	switch {
	case best == nil && p.i >= 0:
		s.ready.removeAt(p.i)
	case best != nil && p.i < 0:
		s.ready.push(p)
	case best != nil:
		s.ready.fix(p.i)
	}
}
