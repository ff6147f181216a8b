package checkpoint

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Range is the half-open time interval [Start, End). A Range whose End is not
// after its Start is empty; the zero Range is empty.
type Range struct {
	// Start is the first instant in the range.
	Start time.Time
	// End is the first instant after the range.
	End time.Time
}

// Empty reports whether r contains no instant: End is not after Start. An
// inverted range is empty too.
func (r Range) Empty() bool { return !r.Start.Before(r.End) }

// IsZero reports whether both ends are the zero time (an absent range).
func (r Range) IsZero() bool { return r.Start.IsZero() && r.End.IsZero() }

// String formats r as "[start, end)" with RFC 3339 times.
func (r Range) String() string {
	return "[" + r.Start.Format(time.RFC3339Nano) + ", " + r.End.Format(time.RFC3339Nano) + ")"
}

// Coverage is a set of instants kept as sorted, disjoint ranges: the parts of
// one series the provider has answered for (an empty answer counts; it proves
// there is nothing to fetch). Ranges that overlap or touch are merged, so
// [0, 5) and [5, 9) become [0, 9).
//
// The zero Coverage is empty and ready to use. Coverage is a value: copies
// are independent, because [Coverage.Add] never writes to memory a copy may
// share. Read methods are safe for concurrent use; Add is not, on the same
// variable.
type Coverage struct {
	// ranges is sorted by Start; no two ranges overlap or touch; none is
	// empty. It is replaced, never modified in place.
	ranges []Range
}

// Add unites r with the coverage. Empty and inverted ranges are ignored:
// they contain no instant. Adding is idempotent and order-independent.
func (c *Coverage) Add(r Range) {
	if r.Empty() || c.Covers(r) {
		return
	}
	rs := c.ranges
	// i: the first range that ends at or after r.Start (overlaps or touches).
	i := sort.Search(len(rs), func(k int) bool { return !rs[k].End.Before(r.Start) })
	// j: the first range that starts after r.End (neither overlaps nor touches).
	j := sort.Search(len(rs), func(k int) bool { return rs[k].Start.After(r.End) })
	merged := r
	if i < j {
		if rs[i].Start.Before(merged.Start) {
			merged.Start = rs[i].Start
		}
		if rs[j-1].End.After(merged.End) {
			merged.End = rs[j-1].End
		}
	}
	out := make([]Range, 0, len(rs)-(j-i)+1)
	out = append(out, rs[:i]...)
	out = append(out, merged)
	out = append(out, rs[j:]...)
	c.ranges = out
}

// Ranges returns the covered ranges, sorted by Start, disjoint and never
// touching. The slice is the caller's; nil when the coverage is empty.
func (c Coverage) Ranges() []Range { return slices.Clone(c.ranges) }

// Covers reports whether every instant of r is covered. An empty r is
// covered vacuously.
func (c Coverage) Covers(r Range) bool {
	if r.Empty() {
		return true
	}
	i := sort.Search(len(c.ranges), func(k int) bool { return c.ranges[k].End.After(r.Start) })
	return i < len(c.ranges) && !c.ranges[i].Start.After(r.Start) && !c.ranges[i].End.Before(r.End)
}

// Missing returns the parts of within that are not covered, sorted and
// disjoint: what is left to fetch. Together with the covered parts of within
// they make up exactly within. An empty within has nothing missing.
func (c Coverage) Missing(within Range) []Range {
	if within.Empty() {
		return nil
	}
	var out []Range
	at := within.Start
	i := sort.Search(len(c.ranges), func(k int) bool { return c.ranges[k].End.After(within.Start) })
	for ; i < len(c.ranges) && c.ranges[i].Start.Before(within.End); i++ {
		if c.ranges[i].Start.After(at) {
			out = append(out, Range{Start: at, End: c.ranges[i].Start})
		}
		at = c.ranges[i].End
	}
	if at.Before(within.End) {
		out = append(out, Range{Start: at, End: within.End})
	}
	return out
}

// String formats the coverage as its ranges, e.g. "{[a, b) [c, d)}".
func (c Coverage) String() string {
	parts := make([]string, len(c.ranges))
	for i, r := range c.ranges {
		parts[i] = r.String()
	}
	return "{" + strings.Join(parts, " ") + "}"
}
