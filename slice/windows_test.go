package slice_test

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

func TestWindows(t *testing.T) {
	t.Parallel()
	sec := func(h, m, s int) time.Time { return hm(h, m).Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name     string
		r        checkpoint.Range
		interval time.Duration
		page     int
		want     []checkpoint.Range
	}{
		{"aligned, whole pages", rg(hm(12, 0), hm(12, 30)), time.Minute, 10,
			[]checkpoint.Range{rg(hm(12, 0), hm(12, 10)), rg(hm(12, 10), hm(12, 20)), rg(hm(12, 20), hm(12, 30))}},
		{"aligned, short last page", rg(hm(12, 0), hm(12, 25)), time.Minute, 10,
			[]checkpoint.Range{rg(hm(12, 0), hm(12, 10)), rg(hm(12, 10), hm(12, 20)), rg(hm(12, 20), hm(12, 25))}},
		{"unaligned ends are aligned outward", rg(sec(12, 0, 30), sec(12, 24, 10)), time.Minute, 10,
			[]checkpoint.Range{rg(hm(12, 0), hm(12, 10)), rg(hm(12, 10), hm(12, 20)), rg(hm(12, 20), hm(12, 25))}},
		{"inside one interval", rg(sec(12, 0, 10), sec(12, 0, 20)), time.Minute, 1000,
			[]checkpoint.Range{rg(hm(12, 0), hm(12, 1))}},
		{"hours align to the hour", rg(hm(10, 30), hm(15, 10)), time.Hour, 2,
			[]checkpoint.Range{rg(hm(10, 0), hm(12, 0)), rg(hm(12, 0), hm(14, 0)), rg(hm(14, 0), hm(16, 0))}},
		{"a page too large to multiply", rg(hm(0, 0), hm(23, 0)), time.Hour, math.MaxInt,
			[]checkpoint.Range{rg(hm(0, 0), hm(23, 0))}},
		{"1000 one-minute candles per request", rg(sec(0, 0, 30), sec(20, 0, 10)), time.Minute, 1000,
			[]checkpoint.Range{rg(hm(0, 0), hm(16, 40)), rg(hm(16, 40), hm(20, 1))}},
		{"empty range", rg(hm(12, 0), hm(12, 0)), time.Minute, 10, nil},
		{"inverted range", rg(hm(12, 5), hm(12, 0)), time.Minute, 10, nil},
		{"zero interval", rg(hm(12, 0), hm(13, 0)), 0, 10, nil},
		{"zero page size", rg(hm(12, 0), hm(13, 0)), time.Minute, 0, nil},
	} {
		if got := slice.WindowsForTest(tc.r, tc.interval, tc.page); !equalRanges(got, tc.want) {
			t.Errorf("%s: Windows(%v, %v, %d)\n got  %s\n want %s", tc.name, tc.r, tc.interval, tc.page, fmtRanges(got), fmtRanges(tc.want))
		}
	}
}

func TestPropWindowsTileTheAlignedRange(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		iv := rapid.SampledFrom([]time.Duration{time.Second, time.Minute, 15 * time.Minute, time.Hour, 24 * time.Hour}).Draw(t, "interval")
		page := rapid.IntRange(1, 50).Draw(t, "page size")
		start := hm(0, 0).Add(time.Duration(rapid.Int64Range(0, int64(100*iv)).Draw(t, "start")))
		r := rg(start, start.Add(time.Duration(rapid.Int64Range(1, int64(300*iv)).Draw(t, "length"))))
		ws := slice.WindowsForTest(r, iv, page)
		if len(ws) == 0 || !ws[0].Start.Equal(r.Start.Truncate(iv)) {
			t.Fatalf("windows %s do not start at %v truncated", fmtRanges(ws), r.Start)
		}
		if last := ws[len(ws)-1].End; last.Before(r.End) || !last.Add(-iv).Before(r.End) {
			t.Fatalf("windows %s end at %v: want the first boundary at or after %v", fmtRanges(ws), last, r.End)
		}
		for i, w := range ws {
			n := w.End.Sub(w.Start)
			switch {
			case !w.Start.Truncate(iv).Equal(w.Start) || !w.End.Truncate(iv).Equal(w.End):
				t.Fatalf("window %d %v not aligned to %v", i, w, iv)
			case i > 0 && !w.Start.Equal(ws[i-1].End):
				t.Fatalf("window %d %v does not follow window %d %v", i, w, i-1, ws[i-1])
			case n <= 0 || n > time.Duration(page)*iv || (i < len(ws)-1 && n != time.Duration(page)*iv):
				t.Fatalf("window %d %v is %v long; want %d×%v (only the last may be shorter)", i, w, n, page, iv)
			}
		}
	})
}
