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
	rank time.Time // NextRun + Priority × aging, while in a ready heap
	heap *heap     // the heap holding the entry, nil if none
	i    int       // index in heap
	hl   bool      // counted in prov.headLeased
	gone bool      // deleted; still in MemoryJobStore.order until compacted
}

// prov is one provider's index.
type prov struct {
	name       string
	head, tail heap           // ready jobs by rank
	leased     int            // entries of this provider in the leased heap
	headLeased int            // of which active head jobs
	busy       map[string]int // stream → its entries in the leased heap
	jobs       int            // stored jobs of this provider
	best       *entry
	i          int // index in the provider heap, -1 if absent
}

// heap is a binary min-heap of entries that tracks their indexes.
type heap struct {
	items []*entry
	less  func(a, b *entry) bool
}

func (h *heap) min() *entry {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *heap) push(e *entry) {
	e.heap, e.i = h, len(h.items)
	h.items = append(h.items, e)
	h.up(e.i)
}

func (h *heap) remove(e *entry) {
	i, n := e.i, len(h.items)-1
	if i != n {
		h.swap(i, n)
	}
	h.items[n] = nil
	h.items = h.items[:n]
	if i != n && !h.down(i) {
		h.up(i)
	}
	e.heap, e.i = nil, -1
}

// init restores the heap order after the keys of many entries changed.
func (h *heap) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *heap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].i, h.items[j].i = i, j
}

func (h *heap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *heap) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.less(h.items[r], h.items[c]) {
			c = r
		}
		if !h.less(h.items[c], h.items[i]) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > i0
}

// provHeap is a binary min-heap of providers by their best entry.
type provHeap struct {
	items []*prov
	less  func(a, b *entry) bool
}

func (h *provHeap) lessAt(i, j int) bool { return h.less(h.items[i].best, h.items[j].best) }

func (h *provHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].i, h.items[j].i = i, j
}

func (h *provHeap) push(p *prov) {
	p.i = len(h.items)
	h.items = append(h.items, p)
	h.up(p.i)
}

func (h *provHeap) remove(p *prov) {
	i, n := p.i, len(h.items)-1
	if i != n {
		h.swap(i, n)
	}
	h.items[n] = nil
	h.items = h.items[:n]
	if i != n {
		h.fix(i)
	}
	p.i = -1
}

func (h *provHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *provHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.lessAt(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *provHeap) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.lessAt(r, c) {
			c = r
		}
		if !h.lessAt(c, i) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > i0
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
