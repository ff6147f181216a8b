package main

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage/budget"
)

// frontier holds one queue of URLs per host and hands them to workers, at
// most perHost at a time per host, skipping hosts that asked to be left
// alone. It is safe for concurrent use.
type frontier struct {
	mu      sync.Mutex
	order   []*queue // round robin over hosts, in key order
	queues  map[string]*queue
	next    int           // where the next round-robin scan starts
	perHost int           // workers one host may hold at once
	changed chan struct{} // closed and replaced whenever a worker finishes
}

// queue is one host's pending URLs and counters.
type queue struct {
	key     string
	urls    []string
	busy    int          // workers on this host now
	maxBusy int          // most busy ever
	until   time.Time    // the host is set aside until then
	ok      atomic.Int64 // completed fetches answered 200
	fail    atomic.Int64 // fetches that ended otherwise
}

// newFrontier sorts urls into one queue per host (the Transport's provider
// key).
func newFrontier(urls []string, perHost int) *frontier {
	f := &frontier{queues: map[string]*queue{}, perHost: perHost, changed: make(chan struct{})}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		key := budget.HostKey(&http.Request{URL: u})
		q := f.queues[key]
		if q == nil {
			q = &queue{key: key}
			f.queues[key] = q
			f.order = append(f.order, q)
		}
		q.urls = append(q.urls, raw)
	}
	sort.Slice(f.order, func(i, j int) bool { return f.order[i].key < f.order[j].key })
	return f
}

// take blocks until some host has a URL and a free worker slot, and returns
// both. It returns false when ctx ends, the run is spent or nothing is left.
func (f *frontier) take(ctx context.Context, run *budget.Run) (*queue, string, bool) {
	for {
		if _, spent := run.Exhausted(); spent || ctx.Err() != nil {
			return nil, "", false
		}
		f.mu.Lock()
		q, wake, left := f.pick(time.Now())
		changed := f.changed
		var u string
		if q != nil {
			u, q.urls = q.urls[0], q.urls[1:]
			q.busy++
			q.maxBusy = max(q.maxBusy, q.busy)
		}
		f.mu.Unlock()
		if q != nil {
			return q, u, true
		}
		if !left {
			return nil, "", false
		}
		var timer *time.Timer
		var ring <-chan time.Time
		if !wake.IsZero() {
			timer = time.NewTimer(time.Until(wake))
			ring = timer.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-ring:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// pick scans the hosts round robin from f.next for one with a URL, a free
// slot and no pause. Otherwise it returns the earliest pause end (zero if
// none) and whether any work is left at all. Callers hold f.mu.
func (f *frontier) pick(now time.Time) (q *queue, wake time.Time, left bool) {
	for i := range f.order {
		c := f.order[(f.next+i)%len(f.order)]
		if len(c.urls) == 0 {
			left = left || c.busy > 0 // a busy worker may put its URL back
			continue
		}
		left = true
		if c.busy >= f.perHost {
			continue
		}
		if now.Before(c.until) {
			if wake.IsZero() || c.until.Before(wake) {
				wake = c.until
			}
			continue
		}
		f.next = (f.next + i + 1) % len(f.order)
		return c, time.Time{}, true
	}
	return nil, wake, left
}

// done returns a worker's slot on q, puts u back at the head of the queue
// if the fetch asked for it, sets the host aside if it pushed back, and
// wakes the waiting workers.
func (f *frontier) done(q *queue, u string, r fetched) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q.busy--
	if r.requeue {
		q.urls = append([]string{u}, q.urls...)
	}
	if r.until.After(q.until) {
		q.until = r.until
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// empty reports whether every URL was handed out.
func (f *frontier) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.order {
		if len(q.urls) > 0 {
			return false
		}
	}
	return true
}
