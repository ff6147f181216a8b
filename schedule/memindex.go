package schedule

import "time"

// This file holds the memory store's indexes: binary heaps that know each
// element's position, so an entry can be removed or re-keyed in O(log n).
//
// Every active job sits in exactly one place:
//
//	waiting   not leased, not yet promoted; global, by NextRun
//	ready     due; per provider, head and tail apart, by rank
//	leased    a lease that was live when written; global, by Lease.Until
//
// Inactive jobs (paused, success) sit nowhere unless leased. A claim first
// rescues expired leases, then promotes waiting jobs that are due, then
// picks from the provider heap, whose key is each provider's best job
// under the head-first rule. A decision therefore costs O(log n) per job
// taken plus O(log p) per provider looked at, never a scan of all jobs.

// entry is one stored job and its place in the indexes.
type entry struct {
	job  Job
	prov *prov
	rank time.Time  // NextRun + Priority × aging, while in a ready heap
	heap *entryHeap // the heap holding the entry, nil if none
	i    int        // index in heap
	hl   bool       // counted in prov.headLeased
	gone bool       // deleted; still in memoryJobStore.order until compacted
}

// prov is one provider's index.
type prov struct {
	name       string
	head, tail entryHeap      // ready jobs by rank
	leased     int            // entries of this provider in the leased heap
	headLeased int            // of which active head jobs
	busy       map[string]int // stream → its entries in the leased heap
	jobs       int            // stored jobs of this provider
	best       *entry
	i          int // index in the provider heap, -1 if absent
}

// entryHeap is a heap of entries; each entry knows the heap holding it.
type entryHeap struct{ heap[*entry] }

// newEntryHeap returns an empty entryHeap ordered by less.
func newEntryHeap(less func(a, b *entry) bool) entryHeap {
	return entryHeap{heap[*entry]{less: less, index: func(e *entry) *int { return &e.i }}}
}

func (h *entryHeap) min() *entry {
	e, _ := h.heap.min()
	return e
}

func (h *entryHeap) push(e *entry) {
	e.heap = h
	h.heap.push(e)
}

func (h *entryHeap) remove(e *entry) {
	h.removeAt(e.i)
	e.heap = nil
}

// newProvHeap returns an empty heap of providers by their best entry.
func newProvHeap() heap[*prov] {
	return heap[*prov]{less: func(a, b *prov) bool { return byRank(a.best, b.best) }, index: func(p *prov) *int { return &p.i }}
}

// byNextRun orders the waiting heap.
func byNextRun(a, b *entry) bool {
	if c := a.job.NextRun.Compare(b.job.NextRun); c != 0 {
		return c < 0
	}
	return a.job.ID < b.job.ID
}

// byLeaseEnd orders the leased heap.
func byLeaseEnd(a, b *entry) bool {
	if c := a.job.Lease.Until.Compare(b.job.Lease.Until); c != 0 {
		return c < 0
	}
	return a.job.ID < b.job.ID
}

// byRank orders ready jobs as [JobStore.Claim] specifies. rank is
// NextRun + Priority × aging, or NextRun alone when aging is zero (the
// Priority comparison then decides first).
func byRank(a, b *entry) bool {
	if c := a.rank.Compare(b.rank); c != 0 {
		return c < 0
	}
	if a.job.Priority != b.job.Priority {
		return a.job.Priority < b.job.Priority
	}
	if c := a.job.NextRun.Compare(b.job.NextRun); c != 0 {
		return c < 0
	}
	return a.job.ID < b.job.ID
}
