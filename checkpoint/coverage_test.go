package checkpoint_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// The properties below work on a one-minute grid from t0, where a set of
// covered minutes is an obviously correct model of a Coverage.

// grid returns [t0+a min, t0+b min).
func grid(a, b int) checkpoint.Range {
	return checkpoint.Range{Start: t0.Add(time.Duration(a) * time.Minute), End: t0.Add(time.Duration(b) * time.Minute)}
}

// sameCoverage reports whether c and d cover the same instants.
func sameCoverage(c, d checkpoint.Coverage) bool {
	return slices.EqualFunc(c.Ranges(), d.Ranges(), func(a, b checkpoint.Range) bool {
		return a.Start.Equal(b.Start) && a.End.Equal(b.End)
	})
}

// minuteOf returns the grid index of t.
func minuteOf(t time.Time) int { return int(t.Sub(t0) / time.Minute) }

// genRange draws a grid range, sometimes empty or inverted.
func genRange(label string) *rapid.Generator[checkpoint.Range] {
	return rapid.Custom(func(t *rapid.T) checkpoint.Range {
		a := rapid.IntRange(0, 60).Draw(t, label+" start")
		return grid(a, a+rapid.IntRange(-3, 15).Draw(t, label+" length"))
	})
}

func build(rs []checkpoint.Range) checkpoint.Coverage {
	var c checkpoint.Coverage
	for _, r := range rs {
		c.Add(r)
	}
	return c
}

// minutes is the model: the set of grid minutes rs cover.
func minutes(rs []checkpoint.Range) map[int]bool {
	set := map[int]bool{}
	for _, r := range rs {
		for m := minuteOf(r.Start); m < minuteOf(r.End); m++ {
			set[m] = true
		}
	}
	return set
}

func TestCoverageRangesAreSortedDisjointAndNeverTouch(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.SliceOf(genRange("add")).Draw(t, "adds")
		rs := build(in).Ranges()
		for i, r := range rs {
			if r.Empty() {
				t.Fatalf("range %d %v is empty", i, r)
			}
			if i > 0 && !rs[i-1].End.Before(r.Start) {
				t.Fatalf("ranges %d %v and %d %v overlap or touch", i-1, rs[i-1], i, r)
			}
		}
		want, got := minutes(in), minutes(rs)
		if len(want) != len(got) {
			t.Fatalf("covers %d minutes, the adds cover %d", len(got), len(want))
		}
		for m := range want {
			if !got[m] {
				t.Fatalf("minute %d added but not covered", m)
			}
		}
	})
}

func TestCoverageAddIsIdempotentAndOrderIndependent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.SliceOf(genRange("add")).Draw(t, "adds")
		shuffled := rapid.Permutation(in).Draw(t, "shuffled")
		c, d := build(in), build(append(shuffled, in...))
		if !sameCoverage(c, d) {
			t.Fatalf("in order: %v; shuffled and repeated: %v", c, d)
		}
	})
}

func TestCoverageMissingIsTheComplementWithin(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := build(rapid.SliceOf(genRange("add")).Draw(t, "adds"))
		within := genRange("within").Draw(t, "within")
		missing := c.Missing(within)
		covered := minutes(c.Ranges())
		gone := minutes(missing)
		for i, r := range missing {
			if r.Empty() || r.Start.Before(within.Start) || r.End.After(within.End) {
				t.Fatalf("missing range %d %v is empty or outside %v", i, r, within)
			}
			if i > 0 && !missing[i-1].End.Before(r.Start) {
				t.Fatalf("missing ranges %d and %d overlap or touch: %v", i-1, i, missing)
			}
		}
		for m := range gone {
			if covered[m] {
				t.Fatalf("minute %d is both covered and missing", m)
			}
		}
		for m := minuteOf(within.Start); m < minuteOf(within.End); m++ {
			if !covered[m] && !gone[m] {
				t.Fatalf("minute %d of %v is neither covered nor missing", m, within)
			}
		}
		if n := len(gone); within.Empty() && n != 0 {
			t.Fatalf("empty within %v has %d missing minutes", within, n)
		}
	})
}

func TestCoverageCoversAgreesWithModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := build(rapid.SliceOf(genRange("add")).Draw(t, "adds"))
		set := minutes(c.Ranges())
		m := rapid.IntRange(-2, 80).Draw(t, "minute")
		at := t0.Add(time.Duration(m)*time.Minute + rapid.SampledFrom([]time.Duration{0, time.Second, 59 * time.Second}).Draw(t, "offset"))
		// An instant is covered when the nanosecond it starts is.
		if got := c.Covers(checkpoint.Range{Start: at, End: at.Add(1)}); got != set[m] {
			t.Fatalf("Covers(instant %v) = %v, model says %v", at, got, set[m])
		}
		r := genRange("query").Draw(t, "query")
		want := true
		for i := minuteOf(r.Start); i < minuteOf(r.End); i++ {
			want = want && set[i]
		}
		if got := c.Covers(r); got != want {
			t.Fatalf("Covers(%v) = %v, model says %v (coverage %v)", r, got, want, c)
		}
		if got := len(c.Missing(r)) == 0; got != want {
			t.Fatalf("Missing(%v) empty = %v, Covers says %v", r, got, want)
		}
	})
}

func TestCoverageCopiesAreIndependent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := build(rapid.SliceOf(genRange("add")).Draw(t, "adds"))
		before := c.Ranges()
		d := c
		d.Add(genRange("more").Draw(t, "more"))
		if rs := d.Ranges(); len(rs) > 0 {
			rs[0] = grid(-9, 99) // the slice is the caller's
		}
		if !sameCoverage(c, build(before)) {
			t.Fatalf("adding to a copy changed the original: %v, was %v", c, before)
		}
	})
}

// The worked examples of the merge rule (seed 002 §4: merge when
// next.start <= current.end, i.e. on overlap or touch, never across a gap).
func TestCoverageMergeRule(t *testing.T) {
	t.Parallel()
	steps := []struct {
		add  checkpoint.Range
		want string
	}{
		{grid(0, 10), "[0,10)"},
		{grid(11, 20), "[0,10) [11,20)"}, // a one-minute gap is not merged
		{grid(10, 11), "[0,20)"},         // touching on both sides
		{grid(5, 5), "[0,20)"},           // empty: ignored
		{grid(30, 25), "[0,20)"},         // inverted: ignored
		{grid(19, 21), "[0,21)"},         // overlap
		{grid(40, 50), "[0,21) [40,50)"},
		{grid(-5, 60), "[-5,60)"},
	}
	var c checkpoint.Coverage
	for i, s := range steps {
		c.Add(s.add)
		got := ""
		for j, r := range c.Ranges() {
			if j > 0 {
				got += " "
			}
			got += fmt.Sprintf("[%d,%d)", minuteOf(r.Start), minuteOf(r.End))
		}
		if got != s.want {
			t.Fatalf("step %d: after Add(%v): %s, want %s", i, s.add, got, s.want)
		}
	}
}
