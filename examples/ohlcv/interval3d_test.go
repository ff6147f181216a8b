package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/klines"
)

// A 3d catch-up up to now. In the bubble it is 2000-01-01T00:00Z: the
// window's ends were truncated to 3d counted from the year 1 (2000-01-01),
// while the exchange and the klines Source count 3d candles from the Unix
// epoch (1999-12-31, 2000-01-03). The last closed candle before -until
// opened 1999-12-28, every candle there was collected, and yet the run
// never said done: it polled for a candle at -until - 3d for up to two
// days (364 runs under -timeout 6h), and stored one a day before -since.
func TestA3dIntervalIsDoneWhenItsCandlesAre(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		now := time.Now()
		r := cli(context.Background(), "-store", dir, "-interval", "3d", "-since", now.Add(-21*24*time.Hour).Format(time.RFC3339), "-timeout", "6h", "-json")
		t.Logf("now %s exit %d\nstdout %s\nstderr lines %d", now.UTC(), r.code, r.stdout, len(r.stderr))
		lines := exportOf(t, "-store", dir, "-interval", "3d")
		t.Logf("export: %q", lines)
		s := decodeSummary(t, r.stdout)
		if s.Status != "done" {
			t.Errorf("status %q, want done: every closed 3d candle before until was collected", s.Status)
		}
		since := now.Add(-21 * 24 * time.Hour)
		for _, l := range lines {
			ms, err := strconv.ParseInt(strings.SplitN(l, ",", 2)[0], 10, 64)
			if err != nil {
				t.Fatalf("export line %q: %v", l, err)
			}
			if open := time.UnixMilli(ms).UTC(); open.Before(klines.Floor(since, 3*24*time.Hour)) {
				t.Errorf("stored a candle at %v, before the one that holds -since's %v", open, since)
			}
		}
	})
}
