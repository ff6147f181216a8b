package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/slice"
)

// TestProgressLineWhenNotATerminal: with stderr not a terminal, a run
// longer than lineEvery writes one line of progress every lineEvery, each
// naming every stream with its share done and its state, while stdout
// keeps its one JSON line.
func TestProgressLineWhenNotATerminal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := inMemory
		e.lineEvery = lineEvery
		var out, errOut bytes.Buffer
		since := time.Now().Add(-10 * 24 * time.Hour).UTC().Format(time.RFC3339)
		code := runEnv(context.Background(), e, []string{"-store", t.TempDir(), "-symbols", "BTCUSDT,ETHUSDT", "-since", since, "-page", "100", "-json"}, &out, &errOut)
		s := decodeSummary(t, out.String())
		if code != 0 || s.Status != "done" {
			t.Fatalf("exit %d, summary %+v, stderr %q: want done", code, s, errOut.String())
		}
		lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
		if want := int(time.Duration(s.ElapsedS*float64(time.Second)) / lineEvery); len(lines) != want || want == 0 {
			t.Fatalf("%d progress lines in a %.1fs run, want %d (one every %v): %q", len(lines), s.ElapsedS, want, lineEvery, errOut.String())
		}
		for i, l := range lines {
			for _, want := range []string{"ohlcv: ", "BTCUSDT ", "ETHUSDT ", "% ", "candles fetched", "requests"} {
				if !strings.Contains(l, want) {
					t.Fatalf("line %d = %q: no %q", i, l, want)
				}
			}
		}
		if !strings.Contains(lines[0], "catching up, ") || !strings.Contains(lines[0], " behind") {
			t.Fatalf("first line %q: want the streams catching up, and how far behind", lines[0])
		}
		t.Logf("%d lines, the first: %s", len(lines), lines[0])
	})
}

// TestProgressBarsOnATerminal draws the bars into a buffer taken for a
// terminal: each stream's bar ends full and caught up, and the summary
// still goes to stdout alone.
func TestProgressBarsOnATerminal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := inMemory
		e.bars = func(io.Writer) bool { return true }
		var out, errOut bytes.Buffer
		code := runEnv(context.Background(), e, []string{"-store", t.TempDir(), "-symbols", "BTCUSDT,ETHUSDT", "-page", "500", "-json"}, &out, &errOut)
		s := decodeSummary(t, out.String())
		if code != 0 || s.Status != "done" {
			t.Fatalf("exit %d, summary %+v: want done", code, s)
		}
		for _, want := range []string{"BTCUSDT 1m", "ETHUSDT 1m", "100%", "1440 candles/3 pages · caught up", "caught up"} {
			if !strings.Contains(errOut.String(), want) {
				t.Fatalf("stderr %q: no %q", errOut.String(), want)
			}
		}
	})
}

// TestProgressStates: what a stream's state says at each stage: catching
// up (and how far behind now its cursor is), waiting for the provider,
// held by another process, paused by an operator (and why), caught up,
// and with -follow steady.
func TestProgressStates(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := reg.Get("sim")
	c := &collector{provider: pr, o: options{since: now.Add(-24 * time.Hour), until: now, step: time.Minute}}
	p := &streamProgress{symbol: "BTCUSDT"}
	steps := []struct {
		do        func()
		want      string
		done, all int64
	}{
		{func() {}, "catching up, 1d00h behind", 0, 1440},
		{func() {
			p.fetched(slice.Page[klines.Candle]{Next: plainCursor(now.Add(-6*time.Hour - time.Minute))}, false)
		}, "catching up, 6h00m behind", 1080, 1440},
		{func() { p.waiting(now.Add(90*time.Second), "throttled") }, "waiting until " + now.Add(90*time.Second).Local().Format(time.TimeOnly) + " (throttled)", 1080, 1440},
		{func() { p.waitUntil.Store(0); p.held.Store(true) }, "held by another process", 1080, 1440},
		{func() {
			p.held.Store(false)
			if err := reg.SetStatus(context.Background(), "sim", budget.StatusPaused, "key rotation"); err != nil {
				t.Fatal(err)
			}
		}, "paused by an operator (key rotation)", 1080, 1440},
		{func() {
			if err := reg.SetStatus(context.Background(), "sim", budget.StatusActive, ""); err != nil {
				t.Fatal(err)
			}
			p.caughtUp.Store(true)
		}, "caught up", 1440, 1440},
		{func() {
			c.o.follow = true
			p.fetched(slice.Page[klines.Candle]{Next: plainCursor(now)}, true)
		}, "steady, last candle " + now.Local().Format(time.TimeOnly), 1440, 1440},
	}
	for i, s := range steps {
		s.do()
		if got := c.state(p, now); got != s.want {
			t.Errorf("step %d: state %q, want %q", i, got, s.want)
		}
		if done, all := c.position(p); done != s.done || all != s.all {
			t.Errorf("step %d: position %d of %d, want %d of %d", i, done, all, s.done, s.all)
		}
	}
}
