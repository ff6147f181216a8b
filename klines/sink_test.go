package klines_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/slice"
)

// TestOpenFileSinkRefusesAPath: a symbol or interval that would name a
// file outside the directory ("../x" wrote beside it; found by a review)
// is refused, as is an interval whose count overflows a step.
func TestOpenFileSinkRefusesAPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range [][2]string{{"../escaped", "1m"}, {"BTCUSDT", "../1m"}, {"..", "1m"}, {"a/b", "1m"}, {"", "1m"}} {
		if s, err := klines.OpenFileSink(dir, c[0], c[1]); err == nil {
			_ = s.Close()
			t.Errorf("OpenFileSink(%q, %q) = nil error, want a refusal", c[0], c[1])
		}
	}
	for _, iv := range []string{"20211507185753197s", "5000000w", "0m", "-1h"} {
		if d, err := klines.Step(iv); err == nil {
			t.Errorf("Step(%q) = %v, want an error", iv, d)
		}
	}
}

// TestShownCandleIsStored: run by run, a request at a time, over a stretch
// before the symbol's listing and on: whenever the committed cursor says
// the provider showed a candle, that candle is in the file, even where the
// cursor's last time ends a stretch confirmed empty (no candle there), and
// FileSink.Check passes. A host checks its file against the candle shown,
// not DecodeCursor (the first check of examples/ohlcv refused a healthy
// restart there; found by a review).
func TestShownCandleIsStored(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Minute)
	listed := now.Add(-3 * time.Hour)
	srv, err := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
	if err != nil {
		t.Fatal(err)
	}
	src := &klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", Page: 60, From: listed.Add(-2 * time.Hour)}
	if err := src.Init(); err != nil {
		t.Fatal(err)
	}
	sink, err := klines.OpenFileSink(t.TempDir(), "BTCUSDT", "1m")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	p, err := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 100}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := slice.New(slice.Config[klines.Candle]{Stream: "s", Mode: checkpoint.CatchUp, Store: store, Provider: p, Source: src, Sink: sink, Prefetch: slice.NoPrefetch})
	if err != nil {
		t.Fatal(err)
	}
	emptyEnd := false
	for n := range 6 {
		run, _ := budget.NewRun(budget.Envelope{MaxRequests: 1})
		_, _ = r.Run(context.Background(), run)
		cp, err := store.Load(context.Background(), checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp})
		if err != nil {
			t.Fatal(err)
		}
		if at, shown := klines.ShownCandle(cp.Cursor); shown && !sink.Has(at) {
			t.Fatalf("run %d: cursor %q shows a candle at %v, not in the file", n+1, cp.Cursor, at)
		}
		if err := sink.Check(cp.Cursor); err != nil {
			t.Fatalf("run %d: Check(%q) = %v", n+1, cp.Cursor, err)
		}
		if last, err := klines.DecodeCursor(cp.Cursor); err == nil && !sink.Has(last) {
			emptyEnd = true // the cursor's last time ends the stretch before the listing
		}
	}
	if !emptyEnd {
		t.Log("no cursor ended a stretch confirmed empty in these runs")
	}
}

// TestCheckNamesTheMissingCandle: a file that lacks the candle a cursor
// says was shown (restored from an older backup, cut short) fails Check,
// which names the candle; a plain cursor names none and passes.
func TestCheckNamesTheMissingCandle(t *testing.T) {
	t.Parallel()
	sink, err := klines.OpenFileSink(t.TempDir(), "BTCUSDT", "1m")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	t0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	shown := func(at time.Time) []byte { return fmt.Appendf(nil, "%dk", at.UnixMilli()) }
	if err := sink.Check(shown(t0)); err == nil || !strings.Contains(err.Error(), "holds no candles") {
		t.Fatalf("empty file: Check = %v, want it to hold no candles", err)
	}
	c := klines.Candle{OpenTime: t0, Open: "1", High: "1", Low: "1", Close: "1", Volume: "1"}
	if err := sink.Write(context.Background(), slice.Page[klines.Candle]{Records: []klines.Candle{c}}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Check(shown(t0)); err != nil {
		t.Fatalf("stored candle: Check = %v", err)
	}
	later := t0.Add(time.Minute)
	if err := sink.Check(shown(later)); err == nil || !strings.Contains(err.Error(), "lacks the candle at "+later.Format(time.RFC3339)) {
		t.Fatalf("missing candle: Check = %v, want it named", err)
	}
	if err := sink.Check(klines.EncodeCursor(later)); err != nil {
		t.Fatalf("plain cursor: Check = %v, want nil (it names no candle shown)", err)
	}
}
