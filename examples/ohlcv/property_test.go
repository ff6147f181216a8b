package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertyRunsStoreTheClosedSeriesOnce: whatever the sequence of runs
// (any page size, any request cap, any time between them), the store holds
// a prefix of the closed candles from -since, ascending, each once, with no
// hole; a run never exceeds its cap; and a run that reports done has
// stored every candle closed when it started.
func TestPropertyRunsStoreTheClosedSeriesOnce(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "ohlcv-property-")
		if err != nil {
			rt.Fatal(err)
		}
		rt.Cleanup(func() { _ = os.RemoveAll(dir) })
		rapid.SyncTest(rt, func(rt *rapid.T) {
			since := time.Now().Truncate(time.Minute).Add(-3 * time.Hour)
			runs := rapid.IntRange(1, 5).Draw(rt, "runs")
			for i := range runs {
				time.Sleep(time.Duration(rapid.IntRange(0, 90*60).Draw(rt, "wait seconds")) * time.Second)
				page := rapid.IntRange(1, 300).Draw(rt, "page")
				limit := rapid.IntRange(0, 3).Draw(rt, "max requests")
				until := time.Now().Truncate(time.Minute)
				s := collectOK(rt, "-store", dir, "-since", since.Format(time.RFC3339),
					"-page", fmt.Sprint(page), "-max-requests", fmt.Sprint(limit))
				lines := exportOf(rt, "-store", dir)
				stored := since.Add(time.Duration(len(lines)) * time.Minute)
				checkSeries(rt, lines, since, stored, time.Minute)
				switch {
				case limit > 0 && s.Requests > uint64(limit):
					rt.Fatalf("run %d: %d requests over a cap of %d", i, s.Requests, limit)
				case limit == 0 && s.Status != "done":
					rt.Fatalf("run %d: uncapped run ended %q (%+v)", i, s.Status, s.Gaps)
				case s.Status == "done" && !stored.Equal(until):
					rt.Fatalf("run %d: done but stored up to %s, want %s", i, stored, until)
				case s.Status == "deferred" && (len(s.Gaps) != 1 || s.Gaps[0].Reason != "request_cap"):
					rt.Fatalf("run %d: deferred with gaps %+v, want one request_cap gap", i, s.Gaps)
				case stored.After(until):
					rt.Fatalf("run %d: stored up to %s, after the last closed candle %s", i, stored, until)
				}
			}
		})
	})
}
