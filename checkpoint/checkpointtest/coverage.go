package checkpointtest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/forage-go/forage/checkpoint"
)

var coverageTests = []test{
	{"NeverCoveredIsEmpty", func(t *testing.T, e *env) {
		if c := e.coverage("s"); len(c.Ranges()) != 0 {
			t.Fatalf("coverage of a new series: %v, want empty", c)
		}
	}},
	{"MergesOnWrite", func(t *testing.T, e *env) {
		steps := []struct {
			add  checkpoint.Range
			want []checkpoint.Range
		}{
			{span(10, 20), []checkpoint.Range{span(10, 20)}},
			{span(30, 40), []checkpoint.Range{span(10, 20), span(30, 40)}},
			{span(20, 25), []checkpoint.Range{span(10, 25), span(30, 40)}}, // touches
			{span(12, 15), []checkpoint.Range{span(10, 25), span(30, 40)}}, // inside
			{span(24, 31), []checkpoint.Range{span(10, 40)}},               // bridges
			{span(0, 5), []checkpoint.Range{span(0, 5), span(10, 40)}},
			{span(0, 50), []checkpoint.Range{span(0, 50)}}, // swallows all
		}
		for i, s := range steps {
			wantErr(t, fmt.Sprintf("step %d: AddCoverage(%v)", i, s.add), e.s.AddCoverage(e.ctx, "s", s.add), nil)
			diff(t, fmt.Sprintf("step %d: ranges after adding %v", i, s.add), s.want, e.coverage("s").Ranges())
		}
		wantErr(t, "AddCoverage again", e.s.AddCoverage(e.ctx, "s", span(0, 50)), nil)
		diff(t, "ranges after an idempotent add", []checkpoint.Range{span(0, 50)}, e.coverage("s").Ranges())
	}},
	{"SeriesAreIndependent", func(t *testing.T, e *env) {
		wantErr(t, "AddCoverage(a)", e.s.AddCoverage(e.ctx, "a", span(0, 10)), nil)
		wantErr(t, "AddCoverage(b)", e.s.AddCoverage(e.ctx, "b", span(10, 20)), nil)
		diff(t, "a", []checkpoint.Range{span(0, 10)}, e.coverage("a").Ranges())
		diff(t, "b", []checkpoint.Range{span(10, 20)}, e.coverage("b").Ranges())
	}},
	{"ReturnedCoverageIsACopy", func(t *testing.T, e *env) {
		wantErr(t, "AddCoverage", e.s.AddCoverage(e.ctx, "s", span(0, 10)), nil)
		c := e.coverage("s")
		c.Add(span(10, 20))
		c.Ranges()[0] = span(5, 6)
		diff(t, "stored coverage after changing a copy", []checkpoint.Range{span(0, 10)}, e.coverage("s").Ranges())
	}},
	{"ConcurrentAddsUnite", func(t *testing.T, e *env) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for m := w; m < 64; m += 8 { // interleaved one-minute pieces
					if err := e.s.AddCoverage(e.ctx, "s", span(m, m+1)); err != nil {
						t.Errorf("worker %d minute %d: %v", w, m, err)
					}
				}
			})
		}
		wg.Wait()
		diff(t, "coverage after concurrent adds", []checkpoint.Range{span(0, 64)}, e.coverage("s").Ranges())
	}},
}
