package budget_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// TestPropertySnapshotPagesAreTheSnapshot: the pages of SnapshotPage,
// followed from "" by each page's last key, are Snapshot's providers in
// its order, whatever the page size; more says whether a page follows.
func TestPropertySnapshotPagesAreTheSnapshot(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			rt.Fatal(err)
		}
		for _, k := range rapid.SliceOfDistinct(rapid.StringMatching(`[a-z0-9.]{1,12}`), rapid.ID[string]).Draw(rt, "keys") {
			if _, err := reg.Get(k); err != nil {
				rt.Fatal(err)
			}
		}
		limit := rapid.IntRange(1, 7).Draw(rt, "limit")
		var got []string
		after := ""
		for {
			page, more := reg.SnapshotPage(after, limit)
			if len(page) > limit || more > 0 && len(page) != limit {
				rt.Fatalf("page of %d (more %d) for a limit of %d", len(page), more, limit)
			}
			if rest := len(keysAfter(reg, after)) - len(page); more != rest {
				rt.Fatalf("a page after %q counts %d more, want %d", after, more, rest)
			}
			for _, s := range page {
				got = append(got, s.Key)
			}
			if more == 0 {
				break
			}
			after = page[len(page)-1].Key
		}
		var want []string
		all, _ := reg.SnapshotPage("", math.MaxInt)
		for _, s := range all {
			want = append(want, s.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			rt.Fatalf("pages %v, snapshot %v", got, want)
		}
		if page, more := reg.SnapshotPage("", 0); page != nil || more != len(want) {
			rt.Fatalf("a page of 0: %v, %d more, want none and %d", page, more, len(want))
		}
	})
}

// keysAfter lists reg's keys after after, from a snapshot of all.
func keysAfter(reg *budget.Registry, after string) []string {
	all, _ := reg.SnapshotPage(after, math.MaxInt)
	keys := make([]string, 0, len(all))
	for _, s := range all {
		keys = append(keys, s.Key)
	}
	return keys
}

// TestAPageShowsAPauseSetElsewhere: a provider paused through another
// process's registry (one record store between them) shows paused on
// this process's page of providers within recordEvery and a page
// loaded after it, though it gets no calls (it showed active for as long
// as nothing called it: an operator reading another process's dashboard
// saw a pause not taken, and a resume not given).
func TestAPageShowsAPauseSetElsewhere(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		var regs [2]*budget.Registry
		for i := range regs {
			r, err := budget.NewRegistry(budget.RegistryConfig{Records: store})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Get("api.example.com"); err != nil {
				t.Fatal(err)
			}
			regs[i] = r
		}
		status := func() string {
			page, _ := regs[1].SnapshotPage("", 10)
			return page[0].Status
		}
		for _, want := range []string{budget.StatusPaused, budget.StatusActive} {
			if err := regs[0].SetStatus(context.Background(), "api.example.com", want, "maintenance"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(6 * time.Second)
			status() // the page after recordEvery reads the record again
			synctest.Wait()
			if got := status(); got != want {
				t.Fatalf("the other process's page says %q after it was set %q elsewhere", got, want)
			}
		}
	})
}
