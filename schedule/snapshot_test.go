package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
	"pgregory.net/rapid"
)

// The calls a host (and package admin) builds an operator's view from:
// snapshots a page of providers at a time, the paused set, which
// providers the scheduler knows, its store, and a spec's validation.

// TestPropertySnapshotPage: following SnapshotPage from "" with any limit
// lists every provider once, in name order, each page at most limit long,
// MoreProviders counting exactly those after the page, and the job counts
// those of the whole store on every page. A provider the budget registry
// holds is listed with its budget snapshot whether or not a job names it,
// and a page snapshots only its page of the registry (GET /stats snapshotted
// every provider of a crawler's registry to show a hundred).
func TestPropertySnapshotPage(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			rt.Fatal(err)
		}
		s, _ := newSched(rt, schedule.Config{Budget: reg}, nil)
		n := rapid.IntRange(0, 12).Draw(rt, "providers")
		var want []string
		inRegistry := map[string]bool{}
		for i := range n {
			name := fmt.Sprintf("p%02d", i)
			switch rapid.IntRange(0, 3).Draw(rt, "how") {
			case 0:
				s.SetProviderPaused(name, true)
			case 1:
				upsert(rt, s, t0, schedule.Spec{Provider: name, Kind: schedule.KindBackfill, Stream: "s"})
			case 2: // in the registry only (a host's direct calls)
				inRegistry[name] = true
			case 3:
				upsert(rt, s, t0, schedule.Spec{Provider: name, Kind: schedule.KindBackfill, Stream: "s"})
				inRegistry[name] = true
			}
			if inRegistry[name] {
				if _, err := reg.Get(name); err != nil {
					rt.Fatal(err)
				}
			}
			want = append(want, name)
		}
		limit := rapid.IntRange(1, 5).Draw(rt, "limit")
		total := 0
		for _, name := range want {
			if jobs, _ := s.Store().List(context.Background(), schedule.Query{Provider: name}); len(jobs) > 0 {
				total++
			}
		}
		var got []string
		for after, step := "", 0; ; step++ {
			snap, err := s.SnapshotPage(context.Background(), t0, after, limit)
			if err != nil {
				rt.Fatalf("step %d: SnapshotPage(%q, %d): %v", step, after, limit, err)
			}
			if len(snap.Providers) > limit || snap.Total != total {
				rt.Fatalf("step %d: %d providers (limit %d), Total %d (want %d)", step, len(snap.Providers), limit, snap.Total, total)
			}
			for _, p := range snap.Providers {
				got = append(got, p.Provider)
				if (p.Budget != nil) != inRegistry[p.Provider] {
					rt.Fatalf("step %d: %s has a budget snapshot: %v, in the registry: %v", step, p.Provider, p.Budget != nil, inRegistry[p.Provider])
				}
			}
			if left := len(want) - len(got); snap.MoreProviders != left {
				rt.Fatalf("step %d: MoreProviders %d, want %d", step, snap.MoreProviders, left)
			}
			if snap.MoreProviders == 0 {
				break
			}
			after = got[len(got)-1]
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("paged %q, want %q", got, want)
		}
	})
}

// TestSnapshotPageLimits: a page holds the first limit providers and
// counts the rest; a zero limit lists none and counts them all; a
// negative one is refused.
func TestSnapshotPageLimits(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	const limit = 100
	for i := range limit + 2 {
		s.SetProviderPaused(fmt.Sprintf("p%04d", i), true)
	}
	ctx := context.Background()
	first, err := s.SnapshotPage(ctx, t0, "", limit)
	if err != nil || len(first.Providers) != limit || first.MoreProviders != 2 {
		t.Fatalf("SnapshotPage(limit %d): %v, %d providers, %d more; want %d and 2", limit, err, len(first.Providers), first.MoreProviders, limit)
	}
	none, err := s.SnapshotPage(ctx, t0, "", 0)
	if err != nil || len(none.Providers) != 0 || none.MoreProviders != limit+2 {
		t.Fatalf("SnapshotPage(limit 0): %v, %d providers, %d more", err, len(none.Providers), none.MoreProviders)
	}
	if _, err := s.SnapshotPage(ctx, t0, "", -1); !errors.Is(err, schedule.ErrInvalid) {
		t.Fatalf("SnapshotPage(limit -1) = %v, want ErrInvalid", err)
	}
}

// TestPausedProvidersAndSnapshotRows: PausedProviders lists the paused
// set, sorted, as pauses and resumes change it; a Snapshot lists a
// provider with a job, in the budget registry or paused, and no other: a
// paused one is forgotten once resumed.
func TestPausedProvidersAndSnapshotRows(t *testing.T) {
	t.Parallel()
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	provider(reg, "in-registry")
	s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
	upsert(t, s, t0, schedule.Spec{Provider: "with-job", Kind: schedule.KindBackfill, Stream: "s"})
	if got := s.PausedProviders(); len(got) != 0 {
		t.Fatalf("PausedProviders of a new scheduler: %q", got)
	}
	s.SetProviderPaused("zeta", true)
	s.SetProviderPaused("alpha", true)
	s.SetProviderPaused("zeta", true) // twice: listed once
	if got := s.PausedProviders(); !slices.Equal(got, []string{"alpha", "zeta"}) {
		t.Fatalf("PausedProviders = %q, want [alpha zeta]", got)
	}
	ctx := context.Background()
	rows := func() []string {
		t.Helper()
		snap, err := s.SnapshotPage(ctx, time.Now(), "", math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range snap.Providers {
			names = append(names, p.Provider)
		}
		return names
	}
	if got := rows(); !slices.Equal(got, []string{"alpha", "in-registry", "with-job", "zeta"}) {
		t.Errorf("Snapshot lists %q, want alpha, in-registry, with-job and zeta", got)
	}
	s.SetProviderPaused("alpha", false)
	if got := s.PausedProviders(); !slices.Equal(got, []string{"zeta"}) {
		t.Fatalf("PausedProviders after resuming alpha = %q, want [zeta]", got)
	}
	if got := rows(); slices.Contains(got, "alpha") {
		t.Errorf("Snapshot lists %q: alpha is still known once resumed, with no job and no budget", got)
	}
}

// TestStoreIsTheOneGiven: Store returns the store the scheduler was built
// with, so a host reaches its own methods (the memory store's Count).
func TestStoreIsTheOneGiven(t *testing.T) {
	t.Parallel()
	s, store := newSched(t, schedule.Config{}, nil)
	if got := s.Store(); got != store {
		t.Fatalf("Store() = %T %p, want the memory store %p", got, got, store)
	}
	counter, ok := s.Store().(interface {
		Count(context.Context) (int, error)
	})
	if !ok {
		t.Fatalf("the memory store %T has no Count method", store)
	}
	upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
	if n, err := counter.Count(context.Background()); err != nil || n != 1 {
		t.Fatalf("Count through the store: %d, %v; want 1", n, err)
	}
}

// TestSpecValidateAgreesWithUpsert: Validate refuses exactly the specs
// Upsert refuses, with the same error.
func TestSpecValidateAgreesWithUpsert(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	rapid.Check(t, func(rt *rapid.T) {
		spec := schedule.Spec{
			Provider: rapid.SampledFrom([]string{"p", "", "p\x00"}).Draw(rt, "provider"),
			Kind:     schedule.Kind(rapid.SampledFrom([]string{"backfill", "incremental", "gap_fill", "refresh", "sideways", ""}).Draw(rt, "kind")),
			Stream:   rapid.SampledFrom([]string{"s", "", "t"}).Draw(rt, "stream"),
			Priority: rapid.IntRange(-2, 1002).Draw(rt, "priority"),
			Interval: rapid.SampledFrom([]time.Duration{-time.Second, 0, time.Minute}).Draw(rt, "interval"),
		}
		verr := spec.Validate()
		_, uerr := s.Upsert(context.Background(), spec)
		if fmt.Sprint(verr) != fmt.Sprint(uerr) || (verr != nil && !errors.Is(verr, schedule.ErrInvalid)) {
			rt.Fatalf("Validate(%+v) = %v, Upsert = %v: want the same ErrInvalid or both nil", spec, verr, uerr)
		}
	})
}

// TestAConnectorPauseIsShownAsPaused: a provider an operator paused
// through its budget record reads as paused in the snapshot, beside its
// budget's status: it read "paused": false next to status "paused".
func TestAConnectorPauseIsShownAsPaused(t *testing.T) {
	t.Parallel()
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
	ctx := context.Background()
	if err := reg.SetStatus(ctx, "sim", budget.StatusPaused, "maintenance"); err != nil {
		t.Fatal(err)
	}
	snap, err := s.SnapshotPage(ctx, time.Now(), "", math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(snap.Providers, func(p schedule.ProviderSnapshot) bool { return p.Provider == "sim" })
	if i < 0 || !snap.Providers[i].Paused || snap.Providers[i].Budget == nil || snap.Providers[i].Budget.Status != budget.StatusPaused {
		t.Fatalf("providers %+v: want sim paused, with its budget's status", snap.Providers)
	}
}
