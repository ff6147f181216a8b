package admin

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// This file says why a due job has not started. Its NextRun is then in the
// past, and shown alone it read as a wake-up that never came ("idle until
// 90 s ago", a backfill held by the head-first rule for good): the
// operator is told instead what holds it, in the terms of the scheduler's
// claim rules (see [schedule.JobStore]'s Claim), checked in their order.

// waits explains the waits of the jobs of one request at now. It reads the
// store once per provider it is asked about (every job of it, a batch at a
// time), so a request that asks it holds a turn (see Handler.turn).
type waits struct {
	h     *Handler
	now   time.Time
	provs map[string]*provLoad
	snap  map[string]schedule.ProviderSnapshot // the status page's, if any: its cool-downs
}

// provLoad is what holds a provider's due jobs back at a moment.
type provLoad struct {
	running int            // its jobs under a live lease
	head    int            // its head jobs due (and not held by their stream) or running
	streams map[string]int // its streams with a job under a live lease
}

// newWaits returns the explainer of jobs' waits at now; snap, if not nil,
// is a snapshot of the scheduler taken at now (for its cool-downs, which
// only a snapshot shows).
func (h *Handler) newWaits(now time.Time, snap *schedule.Snapshot) *waits {
	w := &waits{h: h, now: now, provs: map[string]*provLoad{}, snap: map[string]schedule.ProviderSnapshot{}}
	if snap != nil {
		for _, p := range snap.Providers {
			w.snap[p.Provider] = p
		}
	}
	return w
}

// due reports whether j may be claimed at now and has not been: active
// (not paused, not success), its NextRun come, no live lease on it.
func due(j *schedule.Job, now time.Time) bool {
	return j.State != schedule.StatePaused && j.State != schedule.StateSuccess &&
		!j.NextRun.After(now) && !leased(j, now)
}

// leased reports whether a live lease holds j at now.
func leased(j *schedule.Job, now time.Time) bool {
	return j.Lease.Owner != "" && now.Before(j.Lease.Until)
}

// of returns why j, due at w.now, has not started; "" when it is not due
// (it waits for its NextRun, runs, is paused or done).
func (w *waits) of(ctx context.Context, j *schedule.Job) (string, error) {
	if !due(j, w.now) {
		return "", nil
	}
	if why := w.skipped(j.Provider); why != "" {
		return why, nil
	}
	load, err := w.load(ctx, j.Provider)
	if err != nil {
		return "", err
	}
	switch {
	case load.streams[j.Stream] > 0:
		return "held: another job of its stream is running (one at a time per stream)", nil
	case j.Kind == schedule.KindBackfill && load.head > 0:
		return fmt.Sprintf("held behind the head: fresh data first, and %d head %s of its provider %s due or running",
			load.head, plural(load.head, "job", "jobs"), plural(load.head, "is", "are")), nil
	case load.running > 0:
		return fmt.Sprintf("waiting for room on its provider: %d of its jobs %s running", load.running, plural(load.running, "is", "are")), nil
	case j.Kind == schedule.KindBackfill:
		if why := w.noSpare(j.Provider); why != "" {
			return why, nil
		}
	}
	return "due: starts at the scheduler's next claim, when a slot is free", nil
}

// skipped says why no job of provider may start now (paused, cooling
// down, or paused by the provider itself), or "".
func (w *waits) skipped(provider string) string {
	if _, ok := slices.BinarySearch(w.h.s.PausedProviders(), provider); ok {
		return "held: its provider is paused in this scheduler"
	}
	if p, ok := w.snap[provider]; ok && p.CoolingUntil.After(w.now) {
		return "held: its provider cools down after pushing back, until " + stamp(p.CoolingUntil)
	}
	b, ok := w.budget(provider)
	switch {
	case !ok:
	case b.Status == budget.StatusPaused:
		return "held: its provider is paused by an operator (every process)"
	case b.PausedUntil.After(w.now):
		return fmt.Sprintf("held: its provider asked for a pause (%s), until %s", b.PauseReason, stamp(b.PausedUntil))
	}
	return ""
}

// noSpare says why a backfill's provider has no budget to spare for it
// (see [schedule.Config.Spare]'s default), or "".
func (w *waits) noSpare(provider string) string {
	if b, ok := w.budget(provider); ok && b.Breaker == "open" {
		return "held: its provider's breaker is open, so it has no budget to spare for history"
	}
	return ""
}

// budget is provider's budget snapshot, if the registry holds it.
func (w *waits) budget(provider string) (budget.Snapshot, bool) {
	if reg := w.h.s.Budget(); reg != nil {
		if p, ok := reg.Lookup(provider); ok {
			return p.Snapshot(), true
		}
	}
	return budget.Snapshot{}, false
}

// load reads provider's jobs, once per request.
func (w *waits) load(ctx context.Context, provider string) (*provLoad, error) {
	if l, ok := w.provs[provider]; ok {
		return l, nil
	}
	l := &provLoad{streams: map[string]int{}}
	var dueHead []string // the streams of its due head jobs
	for q := (schedule.Query{Provider: provider, Limit: listBatch}); ; {
		page, err := w.h.s.Store().List(ctx, q)
		if err != nil {
			return nil, err
		}
		for i := range page {
			j := &page[i]
			switch {
			case leased(j, w.now):
				l.running++
				l.streams[j.Stream]++
				if j.Kind != schedule.KindBackfill && j.State != schedule.StatePaused && j.State != schedule.StateSuccess {
					l.head++
				}
			case j.Kind != schedule.KindBackfill && due(j, w.now):
				dueHead = append(dueHead, j.Stream)
			}
		}
		if len(page) < q.Limit {
			break
		}
		q.After = page[len(page)-1].ID
	}
	for _, s := range dueHead {
		if l.streams[s] == 0 { // held by its stream: it holds no backfill back
			l.head++
		}
	}
	w.provs[provider] = l
	return l, nil
}

// stamp formats t as the status page does.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// plural picks one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
