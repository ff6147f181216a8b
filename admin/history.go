package admin

import (
	"context"
	"sync"
	"time"

	"github.com/forage-go/forage/budget"
)

// This file holds the history behind the status page's charts: a small
// ring of samples per provider of the budget registry, taken by
// [Handler.Run] every Config.SampleEvery and, lazily, by the requests that
// show it when the last sample is older than that.

// The bounds of the history.
const (
	defaultSampleEvery = 5 * time.Second
	historyLen         = 120                   // samples kept per provider: ten minutes at the default
	maxCharted         = maxShown              // providers sampled: the first by key
	rateWindow         = time.Minute           // what the connectors' rates cover, when sampled
	minSampleEvery     = 10 * time.Millisecond // the least Config.SampleEvery
	maxSampleEvery     = time.Hour             // the largest Config.SampleEvery
)

// sample is one provider's state at a moment.
type sample struct {
	at            time.Time
	rate, ceiling float64 // requests/s
	requests      uint64  // attempts sent, cumulative
	throttled     uint64  // refused for rate (429, 418), cumulative
	errs          uint64  // failed otherwise, cumulative
}

// sampleOf is b's sample at now.
func sampleOf(now time.Time, b budget.Snapshot) sample {
	return sample{at: now, rate: b.Rate, ceiling: b.Ceiling, requests: b.Requests, throttled: b.Throttled,
		errs: b.Overloaded + b.Transient + b.Permanent}
}

// ring is the last historyLen samples of one provider, oldest first from
// start.
type ring struct {
	s     []sample
	start int
}

func (r *ring) push(x sample) {
	if len(r.s) < historyLen {
		r.s = append(r.s, x)
		return
	}
	r.s[r.start] = x
	r.start = (r.start + 1) % len(r.s)
}

// ordered returns a copy of the samples, oldest first.
func (r *ring) ordered() []sample {
	out := make([]sample, 0, len(r.s))
	out = append(out, r.s[r.start:]...)
	return append(out, r.s[:r.start]...)
}

// history holds the rings of the charted providers. It is safe for
// concurrent use.
type history struct {
	every time.Duration
	mu    sync.Mutex
	last  time.Time // when the last sample was taken; guarded by mu
	rings map[string]*ring
}

func newHistory(every time.Duration) *history {
	return &history{every: every, rings: map[string]*ring{}}
}

// take adds a sample of each of the first maxCharted providers in snaps
// (sorted by key) at now, and forgets the providers no longer there. It
// takes none within every/2 of the last, so that requests sampling at once
// do not draw spikes from counts over a few microseconds.
func (h *history) take(now time.Time, snaps []budget.Snapshot) {
	snaps = snaps[:min(len(snaps), maxCharted)]
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.last.IsZero() && now.Sub(h.last) < h.every/2 {
		return
	}
	h.last = now
	seen := make(map[string]bool, len(snaps))
	for _, b := range snaps {
		seen[b.Key] = true
		r := h.rings[b.Key]
		if r == nil {
			r = &ring{}
			h.rings[b.Key] = r
		}
		r.push(sampleOf(now, b))
	}
	for key := range h.rings {
		if !seen[key] {
			delete(h.rings, key)
		}
	}
}

// due reports whether the last sample is at least every old at now.
func (h *history) due(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return now.Sub(h.last) >= h.every
}

// of returns key's samples, oldest first (none if it is not charted).
func (h *history) of(key string) []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rings[key]; r != nil {
		return r.ordered()
	}
	return nil
}

// sample samples the budget registry at now if the last sample is due:
// the first maxCharted providers, the ones charted, and no other (a
// crawler's registry may hold 100,000).
func (h *Handler) sample(now time.Time) {
	if reg := h.s.Budget(); reg != nil && h.hist.due(now) {
		snaps, _ := reg.SnapshotPage("", maxCharted)
		h.hist.take(now, snaps)
	}
}

// Run samples every provider of the scheduler's budget registry
// ([schedule.Config.Budget]) every [Config.SampleEvery] for the status
// page's charts, until ctx ends; then it returns ctx's error. Without Run
// the handler samples only when a page or GET /connectors is served, so the
// charts show what happened between views. Run is optional, and at most
// one should run per Handler.
func (h *Handler) Run(ctx context.Context) error {
	t := time.NewTicker(h.hist.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			h.sample(now)
		}
	}
}
