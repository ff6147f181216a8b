package checkpointtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

var gapTests = []test{
	{"AddAssignsIDAndCreated", func(t *testing.T, e *env) {
		in := checkpoint.Gap{
			ID: 999, Created: epoch.Add(-time.Hour), // ignored: the store assigns them
			Key: catchUp("s"), Cursor: []byte("c-7"), Range: span(0, 60), Reason: "request_cap",
		}
		g1, err := e.s.AddGap(e.ctx, in)
		wantErr(t, "AddGap", err, nil)
		want := in
		want.ID, want.Created = g1.ID, e.clock.Now()
		diff(t, "AddGap result", want, g1)
		if g1.ID <= 0 {
			t.Fatalf("AddGap: ID %d, want > 0", g1.ID)
		}
		e.clock.Advance(time.Second)
		in.Range = checkpoint.Range{} // the range is optional
		g2, err := e.s.AddGap(e.ctx, in)
		wantErr(t, "second AddGap", err, nil)
		if g2.ID <= g1.ID {
			t.Fatalf("second AddGap: ID %d, want > %d", g2.ID, g1.ID)
		}
		if !g2.Range.IsZero() {
			t.Fatalf("second AddGap: range %v, want zero", g2.Range)
		}
		diff(t, "ListGaps", []checkpoint.Gap{g1, g2}, e.listGaps(checkpoint.GapQuery{}))
	}},
	{"ListOldestFirstWithFilters", func(t *testing.T, e *env) {
		var all []checkpoint.Gap
		for i, k := range []checkpoint.Key{catchUp("a"), steady("b"), steady("a"), catchUp("b"), catchUp("a")} {
			e.clock.Advance(time.Second)
			g, err := e.s.AddGap(e.ctx, checkpoint.Gap{Key: k, Cursor: []byte(fmt.Sprint(i)), Reason: "deadline"})
			wantErr(t, fmt.Sprint("AddGap ", i), err, nil)
			all = append(all, g)
		}
		pick := func(idx ...int) []checkpoint.Gap {
			var out []checkpoint.Gap
			for _, i := range idx {
				out = append(out, all[i])
			}
			return out
		}
		diff(t, "all gaps", all, e.listGaps(checkpoint.GapQuery{}))
		diff(t, "stream a", pick(0, 2, 4), e.listGaps(checkpoint.GapQuery{Stream: "a"}))
		diff(t, "steady-state", pick(1, 2), e.listGaps(checkpoint.GapQuery{Mode: checkpoint.SteadyState}))
		diff(t, "a catch-up", pick(0, 4), e.listGaps(checkpoint.GapQuery{Stream: "a", Mode: checkpoint.CatchUp}))
		diff(t, "unknown stream", []checkpoint.Gap(nil), e.listGaps(checkpoint.GapQuery{Stream: "zzz"}))
	}},
	{"PagingDrainsEverything", func(t *testing.T, e *env) {
		var want []checkpoint.Gap
		for i := range 23 {
			stream := []string{"a", "b"}[i%2]
			g, err := e.s.AddGap(e.ctx, checkpoint.Gap{Key: catchUp(stream), Reason: "throttled"})
			wantErr(t, fmt.Sprint("AddGap ", i), err, nil)
			if stream == "a" {
				want = append(want, g)
			}
		}
		for _, limit := range []int{1, 5, 12, 100} {
			var got []checkpoint.Gap
			q := checkpoint.GapQuery{Stream: "a", Limit: limit}
			for pages := 0; ; pages++ {
				page := e.listGaps(q)
				if len(page) > limit {
					t.Fatalf("limit %d: page of %d", limit, len(page))
				}
				if len(page) == 0 {
					break
				}
				if pages > len(want) {
					t.Fatalf("limit %d: paging does not end", limit)
				}
				got = append(got, page...)
				q.After = page[len(page)-1].ID
			}
			diff(t, fmt.Sprintf("drained with limit %d", limit), want, got)
		}
	}},
	{"ResolveIsIdempotent", func(t *testing.T, e *env) {
		var gs []checkpoint.Gap
		for i := range 3 {
			g, err := e.s.AddGap(e.ctx, checkpoint.Gap{Key: steady("s"), Reason: "banned"})
			wantErr(t, fmt.Sprint("AddGap ", i), err, nil)
			gs = append(gs, g)
		}
		for i := range 2 {
			wantErr(t, fmt.Sprint("ResolveGap, call ", i), e.s.ResolveGap(e.ctx, gs[1].ID), nil)
			diff(t, fmt.Sprint("unresolved after call ", i), []checkpoint.Gap{gs[0], gs[2]}, e.listGaps(checkpoint.GapQuery{}))
		}
		g, err := e.s.AddGap(e.ctx, checkpoint.Gap{Key: steady("s"), Reason: "banned"})
		wantErr(t, "AddGap after resolve", err, nil)
		if g.ID <= gs[2].ID {
			t.Fatalf("AddGap after resolve: ID %d reused or not increasing (last %d)", g.ID, gs[2].ID)
		}
	}},
	{"ResolveUnknownIsNotFound", func(t *testing.T, e *env) {
		g, err := e.s.AddGap(e.ctx, checkpoint.Gap{Key: steady("s"), Reason: "deadline"})
		wantErr(t, "AddGap", err, nil)
		wantErr(t, "ResolveGap of an ID never issued", e.s.ResolveGap(e.ctx, g.ID+1000), checkpoint.ErrNotFound)
		diff(t, "gaps", []checkpoint.Gap{g}, e.listGaps(checkpoint.GapQuery{}))
	}},
	{"ConcurrentAddsGetDistinctIDs", func(t *testing.T, e *env) {
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			ids = map[int64]bool{}
		)
		for w := range 8 {
			wg.Go(func() {
				for i := range 10 {
					g, err := e.s.AddGap(e.ctx, checkpoint.Gap{Key: catchUp(fmt.Sprint("w", w)), Reason: "deadline"})
					if err != nil {
						t.Errorf("worker %d add %d: %v", w, i, err)
						return
					}
					mu.Lock()
					if ids[g.ID] {
						t.Errorf("worker %d add %d: duplicate ID %d", w, i, g.ID)
					}
					ids[g.ID] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		gs := e.listGaps(checkpoint.GapQuery{})
		if len(gs) != 80 {
			t.Fatalf("listed %d gaps, want 80", len(gs))
		}
		for i := 1; i < len(gs); i++ {
			if gs[i].ID <= gs[i-1].ID {
				t.Fatalf("list not oldest first at %d: ID %d after %d", i, gs[i].ID, gs[i-1].ID)
			}
		}
	}},
}
