package slice

import (
	"slices"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// FillPolicy says how much history a series must hold and how the
// gap-fill planner ([PlanFill]) schedules what is missing. The zero
// FillPolicy is invalid (Interval and Required have no default).
type FillPolicy struct {
	// Interval is the series' step: the candle length, e.g. time.Minute.
	// Every planned boundary is a multiple of it (since the zero time).
	// Required: must be > 0.
	Interval time.Duration
	// Required is how much closed history the series must hold, back from
	// the start of the forming interval. Rounded up to whole intervals.
	// Required: must be > 0.
	Required time.Duration
	// Threshold drops holes shorter than it: smaller gaps count as
	// continuous. Compared after alignment, so with Threshold <= Interval
	// every missing interval is planned. Zero means no threshold.
	Threshold time.Duration
	// MaxPerRun caps the total length planned in one call; the oldest part
	// beyond it is not dropped, it is simply planned by a later call once
	// the newer part is covered. A cut
	// never leaves a remainder shorter than Threshold (which would then be
	// dropped), so MaxPerRun, rounded down to whole intervals, must be 0 or
	// at least one Interval and at least Threshold rounded up to whole
	// intervals. Zero means no cap.
	MaxPerRun time.Duration
}

// validate returns nil when p is usable, and otherwise an error wrapping
// [ErrInvalidConfig] naming the field, the rule and the value.
func (p FillPolicy) validate() error {
	bad := func(field, rule string, got time.Duration) error {
		return invalid.Must("FillPolicy."+field, "be "+rule, got)
	}
	switch {
	case p.Interval <= 0:
		return bad("Interval", "> 0", p.Interval)
	case p.Required <= 0:
		return bad("Required", "> 0", p.Required)
	case p.Threshold < 0:
		return bad("Threshold", ">= 0", p.Threshold)
	}
	if least := p.leastCap(); p.MaxPerRun < 0 || (p.MaxPerRun > 0 && p.MaxPerRun < least) {
		return bad("MaxPerRun", "0 or >= "+least.String()+" (one Interval, and Threshold in whole intervals)", p.MaxPerRun)
	}
	return nil
}

// minRest is the shortest hole that is planned: Threshold rounded up to
// whole intervals. A cut keeps at least this much for the next call.
func (p FillPolicy) minRest() time.Duration {
	return (p.Threshold + p.Interval - 1) / p.Interval * p.Interval
}

// leastCap is the smallest valid non-zero MaxPerRun.
func (p FillPolicy) leastCap() time.Duration { return max(p.Interval, p.minRest()) }

// PlanFill returns the time ranges to fetch so that the series holds the
// required closed history, given what it already covers, and never asks
// again for what is covered.
//
// The wanted history is the last p.Required of closed intervals,
// [L − Required, L) with L = now truncated to p.Interval: the forming
// interval (the candle still open at now) is never planned. PlanFill returns
// wanted minus covered, where an interval counts as covered only when all of
// it is (a partly covered candle is fetched again), so:
//
//   - a hole is filled, and history is extended back to Required, in one
//     plan, and nothing already covered is fetched again (a planner that
//     fills the hole and extends history as two requests re-fetches the
//     covered middle and orphans data);
//   - when wanted is covered, the plan is empty (no action);
//   - coverage past L (clock skew, a forming candle stored early) counts as
//     covered, and no range ever ends after L.
//
// The ranges are aligned to p.Interval, disjoint, newest first (recent data
// matters most and the oldest is what a cap defers). Holes shorter than
// p.Threshold are dropped. With p.MaxPerRun set, the total is capped by
// cutting the oldest part: what is cut is planned by a later call, once the
// newer ranges are covered, never dropped (planning, filling what was
// planned, and planning again covers exactly what one uncapped plan would).
//
// PlanFill returns nil and an error wrapping [ErrInvalidConfig], naming the
// field, the rule and the value, when p is invalid. The ranges are nil when
// nothing is missing.
func PlanFill(now time.Time, covered checkpoint.Coverage, p FillPolicy) ([]checkpoint.Range, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	end := now.Truncate(p.Interval)
	wanted := checkpoint.Range{Start: end.Add(-p.Required).Truncate(p.Interval), End: end}
	// Align every missing piece outward to whole intervals: a candle not
	// fully covered is missing. Aligned pieces may touch; the Coverage
	// merges them.
	var holes checkpoint.Coverage
	for _, m := range covered.Missing(wanted) {
		holes.Add(checkpoint.Range{Start: m.Start.Truncate(p.Interval), End: ceil(m.End, p.Interval)})
	}
	rs := holes.Ranges()
	slices.Reverse(rs)
	left := p.MaxPerRun.Truncate(p.Interval)
	out := rs[:0]
	for _, r := range rs {
		n := r.End.Sub(r.Start)
		if n < p.Threshold {
			continue
		}
		if p.MaxPerRun > 0 && n > left {
			// Keep the newest part; leave at least minRest for a later call
			// so that the remainder is not dropped as below the threshold.
			n = min(left, n-p.minRest()).Truncate(p.Interval)
			if n <= 0 {
				break
			}
			r.Start = r.End.Add(-n)
		}
		left -= n
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
