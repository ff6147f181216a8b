package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/slice"
)

// store writes one candle per minute of [from, to) for every symbol, but
// skip, into a file sink in dir.
func store(t *testing.T, dir string, from, to time.Time, skip time.Time) int64 {
	t.Helper()
	n := int64(0)
	for _, symbol := range symbols {
		sink, err := klines.OpenFileSink(dir, symbol, "1m")
		if err != nil {
			t.Fatal(err)
		}
		var p slice.Page[klines.Candle]
		for at := from; at.Before(to); at = at.Add(time.Minute) {
			if at.Equal(skip) && symbol == symbols[1] {
				continue
			}
			p.Records = append(p.Records, klines.Candle{OpenTime: at, Open: "1", High: "2", Low: "0.5", Close: "1.5", Volume: "10"})
		}
		if err := sink.Write(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		n += int64(len(p.Records))
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestVerifyNamesAHole: the quickstart's last step reads the files back;
// every minute since the listing, once, passes, and a missing minute or a
// count the runs reported that the files do not hold fails, naming it.
func TestVerifyNamesAHole(t *testing.T) {
	listed := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	boundary := listed.Add(2 * time.Hour)

	dir := t.TempDir()
	var tl tally
	tl.backfilled.Store(store(t, dir, listed, boundary, time.Time{}))
	if err := tl.verify(dir, listed, boundary); err != nil {
		t.Fatalf("every minute once: %v", err)
	}
	tl.head.Store(1)
	if err := tl.verify(dir, listed, boundary); err == nil || !strings.Contains(err.Error(), "reported") {
		t.Fatalf("one candle more reported than stored: %v; want an error saying so", err)
	}

	dir = t.TempDir()
	hole := listed.Add(37 * time.Minute)
	tl = tally{}
	tl.backfilled.Store(store(t, dir, listed, boundary, hole))
	err := tl.verify(dir, listed, boundary)
	if err == nil || !strings.Contains(err.Error(), symbols[1]) || !strings.Contains(err.Error(), hole.Format(time.DateTime)) {
		t.Fatalf("a minute missing: %v; want an error naming %s and %s", err, symbols[1], hole.Format(time.DateTime))
	}

	dir = t.TempDir()
	tl = tally{}
	tl.backfilled.Store(store(t, dir, listed, boundary.Add(-time.Minute), time.Time{}))
	if err := tl.verify(dir, listed, boundary); err == nil || !strings.Contains(err.Error(), "last candle") {
		t.Fatalf("the last minute missing: %v; want an error", err)
	}
}
