package schedule

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// memoryJobStore is the store [NewMemoryJobStore] returns: jobs in maps,
// due work in per-provider heaps. The zero memoryJobStore is not usable.
type memoryJobStore struct {
	mu      sync.Mutex
	lastID  int64
	byID    map[int64]*entry
	byKey   map[identity]*entry
	order   []*entry // by ID, including deleted entries until compacted
	dead    int      // deleted entries in order
	provs   map[string]*prov
	waiting entryHeap
	leased  entryHeap
	ready   heap[*prov]
	aging   time.Duration
	last    time.Time // the latest now a claim saw
}

// identity is what makes a job unique.
type identity struct {
	provider string
	kind     Kind
	stream   string
}

var _ JobStore = (*memoryJobStore)(nil)

// NewMemoryJobStore returns an empty in-process [JobStore]: jobs in maps,
// due work in per-provider heaps, so a claim costs O(log n) per job taken
// rather than a scan of every job. It is the embedded default for one
// process; it keeps nothing across restarts. It is safe for concurrent use.
//
// A claim at a time earlier than a previous claim's rebuilds the indexes
// (O(n)); so does a claim with a different [ClaimFilter.Aging]. Both are
// rare: one scheduler passes the clock's time and a fixed Aging.
//
// The store also has a Count(ctx) (int, error) method, which reports how
// many jobs it holds without listing them (the admin handler of
// [github.com/forage-go/forage/admin] asks for it through an interface
// assertion to enforce its MaxJobs cap).
func NewMemoryJobStore() JobStore {
	s := &memoryJobStore{
		byID:  make(map[int64]*entry),
		byKey: make(map[identity]*entry),
		provs: make(map[string]*prov),
	}
	s.waiting, s.leased, s.ready = newEntryHeap(byNextRun), newEntryHeap(byLeaseEnd), newProvHeap()
	return s
}

// Upsert implements [JobStore.Upsert].
func (s *memoryJobStore) Upsert(ctx context.Context, job Job) (Job, error) {
	if err := job.Validate(); err != nil {
		return Job{}, err
	}
	if err := ctxErr(ctx); err != nil {
		return Job{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := identity{job.Provider, job.Kind, job.Stream}
	if e, ok := s.byKey[key]; ok {
		s.unplace(e)
		e.job.Priority, e.job.Interval = job.Priority, job.Interval
		e.job.Payload = clone(job.Payload)
		e.job.Updated = job.Updated
		e.job.Version++
		s.place(e)
		return e.job.copy(), nil
	}
	p := s.provs[job.Provider]
	if p == nil {
		p = &prov{name: job.Provider, i: -1}
		p.head, p.tail = newEntryHeap(byRank), newEntryHeap(byRank)
		s.provs[job.Provider] = p
	}
	s.lastID++
	job.ID, job.Version = s.lastID, 1
	job.Provider = p.name // share one copy of the provider's name
	job.Payload = clone(job.Payload)
	job.Lease.TakenFrom = ""
	e := &entry{job: job, prov: p, i: -1}
	p.jobs++
	s.byID[job.ID] = e
	s.byKey[key] = e
	s.order = append(s.order, e)
	s.place(e)
	return e.job.copy(), nil
}

// Get implements [JobStore.Get].
func (s *memoryJobStore) Get(ctx context.Context, id int64) (Job, error) {
	if id <= 0 {
		return Job{}, invalid("id", "must be > 0", id)
	}
	if err := ctxErr(ctx); err != nil {
		return Job{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return Job{}, fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	return e.job.copy(), nil
}

// Count returns how many jobs the store holds (see [NewMemoryJobStore]).
func (s *memoryJobStore) Count(ctx context.Context) (int, error) {
	if err := ctxErr(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID), nil
}

// List implements [JobStore.List].
func (s *memoryJobStore) List(ctx context.Context, q Query) ([]Job, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.order), func(i int) bool { return s.order[i].job.ID > q.After })
	var out []Job
	for ; i < len(s.order) && (q.Limit == 0 || len(out) < q.Limit); i++ {
		if e := s.order[i]; !e.gone && q.match(&e.job) {
			out = append(out, e.job.copy())
		}
	}
	return out, nil
}

// Update implements [JobStore.Update].
func (s *memoryJobStore) Update(ctx context.Context, job Job) (Job, error) {
	if job.ID <= 0 {
		return Job{}, invalid("Job.ID", "must be > 0", job.ID)
	}
	if err := job.Validate(); err != nil {
		return Job{}, err
	}
	if err := ctxErr(ctx); err != nil {
		return Job{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[job.ID]
	switch {
	case !ok:
		return Job{}, fmt.Errorf("%w: id %d", ErrNotFound, job.ID)
	case e.job.Provider != job.Provider || e.job.Kind != job.Kind || e.job.Stream != job.Stream:
		return Job{}, fmt.Errorf("%w: job %d is (%s, %s, %s), not (%s, %s, %s)", ErrInvalid, job.ID,
			e.job.Provider, e.job.Kind, e.job.Stream, job.Provider, job.Kind, job.Stream)
	case e.job.Version != job.Version:
		return Job{}, fmt.Errorf("%w: job %d is at version %d, not %d", ErrConflict, job.ID, e.job.Version, job.Version)
	}
	s.unplace(e)
	j := &e.job
	j.Priority, j.Interval, j.Payload = job.Priority, job.Interval, clone(job.Payload)
	j.State, j.NextRun, j.Stats, j.Lease, j.Updated = job.State, job.NextRun, job.Stats, job.Lease, job.Updated
	j.Lease.TakenFrom = ""
	j.Version++
	s.place(e)
	return j.copy(), nil
}

// Delete implements [JobStore.Delete].
func (s *memoryJobStore) Delete(ctx context.Context, id int64) error {
	if id <= 0 {
		return invalid("id", "must be > 0", id)
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	s.unplace(e)
	delete(s.byID, id)
	delete(s.byKey, identity{e.job.Provider, e.job.Kind, e.job.Stream})
	e.gone = true
	s.dead++
	if s.dead > 64 && s.dead > len(s.order)/2 {
		s.order = slices.DeleteFunc(s.order, func(e *entry) bool { return e.gone })
		s.dead = 0
	}
	if e.prov.jobs--; e.prov.jobs == 0 {
		delete(s.provs, e.prov.name)
	}
	return nil
}

// copy returns j with its own Payload.
func (j *Job) copy() Job {
	c := *j
	c.Payload = clone(j.Payload)
	return c
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	return nil
}
