package slice

import (
	"math"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// windows splits r into request windows of up to pageSize intervals each:
// the slices a time-based [Source] asks for, one request per window (e.g.
// 1000 one-minute candles per Binance klines request).
//
// r is first aligned outward to whole intervals: its start down and its end
// up to the nearest multiple of interval (counted from the zero time, so a
// day is a UTC day). Every interval that r touches is therefore in exactly
// one window, and no window cuts an interval in two. Windows follow each
// other from the aligned start, each pageSize × interval long; only the last
// may be shorter. Callers that must not reach into a forming interval pass
// an r that ends at a boundary, as [PlanFill]'s ranges do.
//
// windows returns nil for an empty r, an interval <= 0 or a pageSize <= 0.
func windows(r checkpoint.Range, interval time.Duration, pageSize int) []checkpoint.Range {
	if r.Empty() || interval <= 0 || pageSize <= 0 {
		return nil
	}
	start, end := r.Start.Truncate(interval), ceil(r.End, interval)
	span := time.Duration(math.MaxInt64)
	if int64(pageSize) <= math.MaxInt64/int64(interval) {
		span = interval * time.Duration(pageSize)
	}
	var out []checkpoint.Range
	for at := start; at.Before(end); {
		next := end
		if end.Sub(at) > span {
			next = at.Add(span)
		}
		out = append(out, checkpoint.Range{Start: at, End: next})
		at = next
	}
	return out
}

// ceil rounds t up to a multiple of d (since the zero time).
func ceil(t time.Time, d time.Duration) time.Time {
	f := t.Truncate(d)
	if f.Before(t) {
		return f.Add(d)
	}
	return f
}
