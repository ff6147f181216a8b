package slice_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// hm returns 2024-01-15 h:m UTC, the day of the decision matrix's examples.
func hm(h, m int) time.Time { return time.Date(2024, 1, 15, h, m, 0, 0, time.UTC) }

func rg(a, b time.Time) checkpoint.Range { return checkpoint.Range{Start: a, End: b} }

func coverage(rs ...checkpoint.Range) checkpoint.Coverage {
	var c checkpoint.Coverage
	for _, r := range rs {
		c.Add(r)
	}
	return c
}

func fmtRanges(rs []checkpoint.Range) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Start.Format("01-02 15:04:05") + "–" + r.End.Format("15:04:05")
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// planFill returns slice.PlanFill's plan, failing t on an error.
func planFill(t interface {
	Helper()
	Fatalf(string, ...any)
}, now time.Time, covered checkpoint.Coverage, p slice.FillPolicy) []checkpoint.Range {
	t.Helper()
	plan, err := slice.PlanFill(now, covered, p)
	if err != nil {
		t.Fatalf("PlanFill(%v, %+v): %v", now, p, err)
	}
	return plan
}

func equalRanges(a, b []checkpoint.Range) bool {
	return slices.EqualFunc(a, b, func(x, y checkpoint.Range) bool { return x.Start.Equal(y.Start) && x.End.Equal(y.End) })
}

// TestPlanFillDecisionMatrix pins every scenario of the gap-filling
// decision matrix (its worked examples and its edge cases) to the windows
// PlanFill returns. One-minute candles; "now" is 13:30:20, so the forming
// candle is 13:30 and the wanted history ends at L = 13:30. "N records" of
// existing data are N covered minutes ending where the gap starts.
func TestPlanFillDecisionMatrix(t *testing.T) {
	t.Parallel()
	now := hm(13, 30).Add(20 * time.Second)
	L := hm(13, 30)
	req := func(min int) slice.FillPolicy {
		return slice.FillPolicy{Interval: time.Minute, Required: time.Duration(min) * time.Minute}
	}
	for _, tc := range []struct {
		name    string
		now     time.Time
		covered checkpoint.Coverage
		policy  slice.FillPolicy
		want    []checkpoint.Range
	}{
		// The decision matrix, row by row.
		{
			// The seed fetches [11:50, 13:30) and re-fetches the 10 records.
			name: "matrix 1: gap 5m, 10 records, required 100m: fill gap and extend to 100m",
			now:  now, covered: coverage(rg(hm(13, 15), hm(13, 25))), policy: req(100),
			want: []checkpoint.Range{rg(hm(13, 25), L), rg(hm(11, 50), hm(13, 15))},
		},
		{
			name: "matrix 2: gap 5m, 200 records, required 100m: fill gap only",
			now:  now, covered: coverage(rg(hm(10, 5), hm(13, 25))), policy: req(100),
			want: []checkpoint.Range{rg(hm(13, 25), L)},
		},
		{
			name: "matrix 3: gap 0m, 100 records, required 100m: no action",
			now:  now, covered: coverage(rg(hm(11, 50), L)), policy: req(100),
			want: nil,
		},
		{
			name: "matrix 4: gap 30m, 0 records, required 100m: full backfill of 100m",
			now:  now, covered: coverage(), policy: req(100),
			want: []checkpoint.Range{rg(hm(11, 50), L)},
		},
		{
			// Latest stored minute ends at 11:00. The seed fills all 150m from
			// 11:00; the required history is the last 100m, so the planner
			// fills the gap inside it. The hole before 11:50 is outside the
			// history the policy asks for (see matrix 5, required 220m).
			name: "matrix 5: gap 150m, 50 records, required 100m: fill the gap (within the required history)",
			now:  now, covered: coverage(rg(hm(10, 10), hm(11, 0))), policy: req(100),
			want: []checkpoint.Range{rg(hm(11, 50), L)},
		},
		{
			name: "matrix 5, required 220m: fill the whole 150m gap and extend back",
			now:  now, covered: coverage(rg(hm(10, 10), hm(11, 0))), policy: req(220),
			want: []checkpoint.Range{rg(hm(11, 0), L), rg(hm(9, 50), hm(10, 10))},
		},
		{
			name: "matrix 6: gap 5m, 10 records, required 5m: fill gap only",
			now:  now, covered: coverage(rg(hm(13, 15), hm(13, 25))), policy: req(5),
			want: []checkpoint.Range{rg(hm(13, 25), L)},
		},
		{
			name: "matrix 7: gap 0m, 50 records, required 100m: extend 50m back",
			now:  now, covered: coverage(rg(hm(12, 40), L)), policy: req(100),
			want: []checkpoint.Range{rg(hm(11, 50), hm(12, 40))},
		},

		// The worked examples that differ from the matrix rows above
		// (examples 1, 2, 4 and 5 are matrix rows 1, 2, 7 and 4).
		{
			// The seed fetches from LATEST+1m and leaves 11:00-11:50 orphaned;
			// the planner fetches the same 100m and orphans nothing.
			name: "example 3: large gap 100m, 50 records, required 100m: gap priority",
			now:  now, covered: coverage(rg(hm(11, 0), hm(11, 50))), policy: req(100),
			want: []checkpoint.Range{rg(hm(11, 50), L)},
		},

		// Rules and edge cases.
		{
			name: "rule 1: a hole shorter than the threshold counts as continuous",
			now:  now, covered: coverage(rg(hm(11, 50), hm(13, 29))),
			policy: slice.FillPolicy{Interval: time.Minute, Required: 100 * time.Minute, Threshold: 2 * time.Minute},
			want:   nil,
		},
		{
			name: "rule 1: a hole as long as the threshold is filled",
			now:  now, covered: coverage(rg(hm(11, 50), hm(13, 29))),
			policy: slice.FillPolicy{Interval: time.Minute, Required: 100 * time.Minute, Threshold: time.Minute},
			want:   []checkpoint.Range{rg(hm(13, 29), L)},
		},
		{
			name: "edge 1: clock skew, coverage ahead of now counts as covered",
			now:  now, covered: coverage(rg(hm(11, 50), hm(13, 32))), policy: req(100),
			want: nil,
		},
		{
			name: "edge 1: clock skew never yields a window after L",
			now:  now, covered: coverage(rg(hm(12, 0), hm(13, 45))), policy: req(100),
			want: []checkpoint.Range{rg(hm(11, 50), hm(12, 0))},
		},
		{
			name: "edge 3: very large gap, capped at MaxPerRun, newest first",
			now:  now, covered: coverage(),
			policy: slice.FillPolicy{Interval: time.Minute, Required: 5000 * time.Minute, MaxPerRun: 1000 * time.Minute},
			want:   []checkpoint.Range{rg(L.Add(-1000*time.Minute), L)},
		},
		{
			name: "edge 3: the next run plans the next part the cap cut, never dropped",
			now:  now, covered: coverage(rg(L.Add(-1000*time.Minute), L)),
			policy: slice.FillPolicy{Interval: time.Minute, Required: 5000 * time.Minute, MaxPerRun: 1000 * time.Minute},
			want:   []checkpoint.Range{rg(L.Add(-2000*time.Minute), L.Add(-1000*time.Minute))},
		},
		{
			name: "edge 3: the cap cuts the oldest part across holes",
			now:  now, covered: coverage(rg(hm(13, 15), hm(13, 25))),
			policy: slice.FillPolicy{Interval: time.Minute, Required: 100 * time.Minute, MaxPerRun: 30 * time.Minute},
			want:   []checkpoint.Range{rg(hm(13, 25), L), rg(hm(12, 50), hm(13, 15))},
		},
		{
			name: "edge 5: the forming candle is never planned",
			now:  hm(13, 5).Add(30 * time.Second), covered: coverage(rg(hm(11, 0), hm(13, 4))), policy: req(100),
			want: []checkpoint.Range{rg(hm(13, 4), hm(13, 5))},
		},
		{
			name: "edge 5: a partly covered candle is fetched again",
			now:  now, covered: coverage(rg(hm(11, 50), hm(13, 29).Add(30*time.Second))), policy: req(100),
			want: []checkpoint.Range{rg(hm(13, 29), L)},
		},
		{
			name: "edge 7: consecutive gap fills, the restart finds the new gap",
			now:  hm(13, 15), covered: coverage(rg(hm(11, 0), hm(13, 0))), policy: req(100),
			want: []checkpoint.Range{rg(hm(13, 0), hm(13, 15))},
		},
	} {
		if got := planFill(t, tc.now, tc.covered, tc.policy); !equalRanges(got, tc.want) {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, fmtRanges(got), fmtRanges(tc.want))
		}
	}
}

func TestFillPolicyValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    slice.FillPolicy
		want string
	}{
		{slice.FillPolicy{}, "FillPolicy.Interval must be > 0 (got 0s)"},
		{slice.FillPolicy{Interval: time.Minute}, "FillPolicy.Required must be > 0 (got 0s)"},
		{slice.FillPolicy{Interval: time.Minute, Required: time.Hour, Threshold: -1}, "FillPolicy.Threshold must be >= 0 (got -1ns)"},
		{slice.FillPolicy{Interval: time.Minute, Required: time.Hour, MaxPerRun: 30 * time.Second}, "FillPolicy.MaxPerRun must be 0 or >= 1m0s (one Interval, and Threshold in whole intervals) (got 30s)"},
		{slice.FillPolicy{Interval: time.Minute, Required: time.Hour, Threshold: 90 * time.Second, MaxPerRun: 100 * time.Second}, "FillPolicy.MaxPerRun must be 0 or >= 2m0s"},
		{slice.FillPolicy{Interval: time.Minute, Required: time.Hour, MaxPerRun: -time.Minute}, "(got -1m0s)"},
	} {
		got, err := slice.PlanFill(hm(12, 0), checkpoint.Coverage{}, tc.p)
		if !errors.Is(err, slice.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "slice: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PlanFill with %+v: error %v, want ErrInvalidConfig containing %q", tc.p, err, tc.want)
		}
		if got != nil {
			t.Errorf("PlanFill with invalid %+v = %v, want nil", tc.p, got)
		}
	}
	if _, err := slice.PlanFill(hm(12, 0), checkpoint.Coverage{}, slice.FillPolicy{Interval: time.Minute, Required: time.Hour}); err != nil {
		t.Errorf("PlanFill with a valid policy: %v", err)
	}
}

// planCase is a random planning problem: a policy, a clock, and a coverage
// of ranges scattered around (and beyond) the wanted history, some of them
// not aligned to the interval.
type planCase struct {
	now     time.Time
	policy  slice.FillPolicy
	covered checkpoint.Coverage
}

func drawPlanCase(t *rapid.T) planCase {
	iv := rapid.SampledFrom([]time.Duration{time.Second, time.Minute, 5 * time.Minute, time.Hour}).Draw(t, "interval")
	n := rapid.IntRange(1, 120).Draw(t, "required intervals")
	p := slice.FillPolicy{
		Interval:  iv,
		Required:  time.Duration(n)*iv + time.Duration(rapid.Int64Range(0, int64(iv)-1).Draw(t, "required extra")),
		Threshold: time.Duration(rapid.IntRange(0, 5).Draw(t, "threshold intervals")) * iv,
	}
	if rapid.Bool().Draw(t, "capped") {
		least := max(iv, p.Threshold) // Threshold is whole intervals here
		p.MaxPerRun = least + time.Duration(rapid.Int64Range(0, int64(40*iv)).Draw(t, "cap"))
	}
	now := hm(12, 0).Add(time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(t, "now")))
	var c checkpoint.Coverage
	for range rapid.IntRange(0, 8).Draw(t, "ranges") {
		// Anywhere from well before the wanted history to past now, in
		// whole intervals or not.
		back := rapid.IntRange(-3, n+10).Draw(t, "start intervals back")
		length := rapid.IntRange(1, max(1, n/3)).Draw(t, "length intervals")
		start := now.Truncate(iv).Add(-time.Duration(back) * iv)
		end := start.Add(time.Duration(length) * iv)
		if rapid.Bool().Draw(t, "unaligned") {
			start = start.Add(time.Duration(rapid.Int64Range(-int64(iv)+1, int64(iv)-1).Draw(t, "start jitter")))
			end = end.Add(time.Duration(rapid.Int64Range(-int64(iv)+1, int64(iv)-1).Draw(t, "end jitter")))
		}
		c.Add(rg(start, end))
	}
	return planCase{now: now, policy: p, covered: c}
}

// modelPlan is PlanFill computed candle by candle: the missing candles of
// the wanted history grouped into runs, runs shorter than the threshold
// dropped, newest first, and the oldest cut beyond the cap.
func modelPlan(c planCase) []checkpoint.Range {
	p := c.policy
	end := c.now.Truncate(p.Interval)
	start := end.Add(-p.Required).Truncate(p.Interval)
	var runs []checkpoint.Range // newest first
	for at := end.Add(-p.Interval); !at.Before(start); at = at.Add(-p.Interval) {
		candle := rg(at, at.Add(p.Interval))
		if c.covered.Covers(candle) {
			continue
		}
		if k := len(runs) - 1; k >= 0 && runs[k].Start.Equal(candle.End) {
			runs[k].Start = at
		} else {
			runs = append(runs, candle)
		}
	}
	var out []checkpoint.Range
	left := p.MaxPerRun.Truncate(p.Interval)
	rest := p.Threshold.Truncate(p.Interval) // the remainder a cut must leave
	if rest < p.Threshold {
		rest += p.Interval
	}
	for _, r := range runs {
		if r.End.Sub(r.Start) < p.Threshold {
			continue
		}
		if p.MaxPerRun > 0 {
			if n := r.End.Sub(r.Start); n > left {
				take := min(left, n-rest).Truncate(p.Interval)
				if take <= 0 {
					break
				}
				r.Start = r.End.Add(-take)
			}
			left -= r.End.Sub(r.Start)
		}
		out = append(out, r)
	}
	return out
}

func TestPropPlanFillMatchesTheCandleModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := drawPlanCase(t)
		got := planFill(t, c.now, c.covered, c.policy)
		if want := modelPlan(c); !equalRanges(got, want) {
			t.Fatalf("PlanFill(%v, %v, %+v)\n got  %s\n want %s", c.now, c.covered, c.policy, fmtRanges(got), fmtRanges(want))
		}
		end := c.now.Truncate(c.policy.Interval)
		var total time.Duration
		for i, r := range got {
			total += r.End.Sub(r.Start)
			switch {
			case r.Empty() || !r.Start.Truncate(c.policy.Interval).Equal(r.Start) || !r.End.Truncate(c.policy.Interval).Equal(r.End):
				t.Fatalf("range %d %v is empty or not aligned to %v", i, r, c.policy.Interval)
			case r.End.After(end):
				t.Fatalf("range %d %v ends after L = %v (the forming candle)", i, r, end)
			case i > 0 && !r.End.Before(got[i-1].Start):
				t.Fatalf("range %d %v is not strictly older than range %d %v", i, r, i-1, got[i-1])
			case c.covered.Covers(rg(r.Start, r.Start.Add(c.policy.Interval))) || c.covered.Covers(rg(r.End.Add(-c.policy.Interval), r.End)):
				t.Fatalf("range %d %v re-fetches a covered candle at one of its ends", i, r)
			}
		}
		if c.policy.MaxPerRun > 0 && total > c.policy.MaxPerRun {
			t.Fatalf("planned %v in total, over the cap %v", total, c.policy.MaxPerRun)
		}
	})
}

func TestPropPlanFillConvergesUnderACap(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := drawPlanCase(t)
		uncapped := c.policy
		uncapped.MaxPerRun = 0
		// Filling what each call plans, at a fixed now, covers exactly what
		// one uncapped call plans: the cap defers, it never drops.
		want := coverage(planFill(t, c.now, c.covered, uncapped)...)
		var filled checkpoint.Coverage
		for step := 0; ; step++ {
			plan := planFill(t, c.now, c.covered, c.policy)
			if len(plan) == 0 {
				break
			}
			if step > 1000 {
				t.Fatalf("no convergence after %d calls", step)
			}
			for _, r := range plan {
				if m := filled.Missing(r); !equalRanges(m, []checkpoint.Range{r}) {
					t.Fatalf("step %d planned %v again", step, r)
				}
				filled.Add(r)
				c.covered.Add(r)
			}
		}
		if !equalRanges(filled.Ranges(), want.Ranges()) {
			t.Fatalf("filled %v under the cap, want %v as without it", filled, want)
		}
	})
}
