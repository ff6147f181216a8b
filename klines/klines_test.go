package klines_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/slice"
)

// TestCollectsEveryClosedCandleOnce: a catch-up run over the simulated
// exchange stores every closed candle from the listing on, once, and a rerun
// after more candles closed adds exactly the new ones.
func TestCollectsEveryClosedCandleOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		listed := time.Now().Add(-10 * time.Hour).Truncate(time.Minute)
		srv, err := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		sink, err := klines.OpenFileSink(dir, "BTCUSDT", "1m")
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		src := &klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", Page: 100, From: listed.Add(-time.Hour)}
		if err := src.Init(); err != nil {
			t.Fatal(err)
		}
		p, _ := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 100}})
		r, err := slice.New(slice.Config[klines.Candle]{
			Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
			Provider: p, Source: src, Sink: sink,
		})
		if err != nil {
			t.Fatal(err)
		}
		check := func() {
			t.Helper()
			rep, err := r.Run(context.Background(), nil)
			if err != nil || rep.Reason != "" {
				t.Fatalf("Run = %+v, %v", rep, err)
			}
			lines, err := klines.Export(dir, "BTCUSDT", "1m")
			if err != nil {
				t.Fatal(err)
			}
			want := int(time.Now().Truncate(time.Minute).Sub(listed) / time.Minute)
			if len(lines) != want || sink.Len() != want {
				t.Fatalf("%d candles stored (%d in the sink), want %d", len(lines), sink.Len(), want)
			}
			for i, line := range lines {
				if !strings.HasPrefix(line, itoa(listed.Add(time.Duration(i)*time.Minute).UnixMilli())+",") {
					t.Fatalf("line %d = %q: hole or duplicate", i, line)
				}
			}
		}
		check()
		time.Sleep(7*time.Minute + 30*time.Second)
		check()
	})
}

// TestProviderErrorsAreClassified: an unknown symbol is a permanent error
// carrying the provider's message; garbage is classified (a body that is not
// JSON: transient), never a panic.
func TestProviderErrorsAreClassified(t *testing.T) {
	t.Parallel()
	srv, _ := providertest.New(providertest.Config{})
	src := &klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "NOPE", Interval: "1m", Page: 10, From: time.Now().Add(-time.Hour)}
	if err := src.Init(); err != nil {
		t.Fatal(err)
	}
	sl, ok, err := src.Next(context.Background(), nil, checkpoint.Range{})
	if !ok || err != nil {
		t.Fatalf("Next = %v, %v", ok, err)
	}
	_, out := src.Fetch(context.Background(), sl)
	if out.Status != 400 || out.Err == nil || !strings.Contains(out.Err.Error(), "Invalid symbol") {
		t.Fatalf("outcome %+v, want 400 with the provider's message", out)
	}

	garbage := &klines.Source{Client: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
	})}, Base: "http://x", Symbol: "A", Interval: "1m", Page: 10}
	_ = garbage.Init()
	_, out = garbage.Fetch(context.Background(), sl)
	p, _ := budget.NewLocal("x", budget.Config{})
	err = p.Do(context.Background(), nil, func(context.Context) forage.Outcome { return out })
	if out.Class() != forage.Transient || err == nil || !errors.Is(err, out.Err) {
		t.Fatalf("garbage: %v (class %v), want transient: not JSON, likely not the provider's own answer", err, out.Class())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestSinkCutsATornLine: a crash mid-write leaves a torn last line; opening
// the sink cuts it in place and later writes start on a fresh line.
func TestSinkCutsATornLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "BTCUSDT-1m.csv")
	if err := os.WriteFile(path, []byte("60000,1,2,0.5,1.5,10\n120000,1,2,0."), 0o644); err != nil {
		t.Fatal(err)
	}
	sink, err := klines.OpenFileSink(dir, "BTCUSDT", "1m")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if sink.Len() != 1 {
		t.Fatalf("%d candles after the cut, want 1", sink.Len())
	}
	c := klines.Candle{OpenTime: klines.Time(120000), Open: "1", High: "2", Low: "0.5", Close: "1.5", Volume: "3"}
	if err := sink.Write(context.Background(), slice.Page[klines.Candle]{Records: []klines.Candle{c, c}}); err != nil {
		t.Fatal(err)
	}
	lines, err := klines.Export(dir, "BTCUSDT", "1m")
	if err != nil || len(lines) != 2 || lines[1] != "120000,1,2,0.5,1.5,3" {
		t.Fatalf("export %q, %v", lines, err)
	}
}

// TestSinkForgetsAFailedWrite: candles of a write that failed are not
// taken as stored, so the replay writes them.
func TestSinkForgetsAFailedWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink, err := klines.OpenFileSink(dir, "BTCUSDT", "1m")
	if err != nil {
		t.Fatal(err)
	}
	c := klines.Candle{OpenTime: klines.Time(60000), Open: "1", High: "2", Low: "0.5", Close: "1.5", Volume: "3"}
	_ = sink.Close() // every write fails from now on
	if err := sink.Write(context.Background(), slice.Page[klines.Candle]{Records: []klines.Candle{c}}); err == nil || sink.Len() != 0 {
		t.Fatalf("write to a closed sink = %v with %d candles stored, want an error and none", err, sink.Len())
	}
}

// TestSinkRefusesValuesThatAreNotDecimals: a candle whose value carries a
// newline and a forged line (or any text that is not a decimal number)
// fails the whole write: nothing is appended, nothing taken as stored, and
// the stored candle the forged line aimed at keeps its value.
func TestSinkRefusesValuesThatAreNotDecimals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink, err := klines.OpenFileSink(dir, "BTCUSDT", "1m")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	good := klines.Candle{OpenTime: klines.Time(60000), Open: "824.45", High: "825", Low: "824", Close: "824.5", Volume: "3"}
	if err := sink.Write(context.Background(), slice.Page[klines.Candle]{Records: []klines.Candle{good}}); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"1\n60000,6.66,6.66,6.66,6.66,6.66", "1,2", "NaN", "", "1e3", "-1", " 1", "1.", `"1"`} {
		forged := klines.Candle{OpenTime: klines.Time(120000), Open: "1", High: "1", Low: "1", Close: "1", Volume: v}
		ok := klines.Candle{OpenTime: klines.Time(180000), Open: "1", High: "1", Low: "1", Close: "1", Volume: "1"}
		err := sink.Write(context.Background(), slice.Page[klines.Candle]{Records: []klines.Candle{ok, forged}})
		if err == nil || !strings.Contains(err.Error(), "not a decimal number") || sink.Len() != 1 {
			t.Fatalf("case %d: write of volume %q = %v with %d stored, want an error and 1 stored", i, v, err, sink.Len())
		}
	}
	lines, err := klines.Export(dir, "BTCUSDT", "1m")
	if err != nil || len(lines) != 1 || lines[0] != "60000,824.45,825,824,824.5,3" {
		t.Fatalf("export %q, %v: want only the good candle", lines, err)
	}
}

// TestSinkReadsOldFiles: a file written by earlier versions reads as it
// did: every record, ascending. Of two records for one open time, which
// the sink never writes (an old version let a forged line in through a
// value with a newline), the first wins: the forgery cannot overwrite the
// true 824.45.
func TestSinkReadsOldFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := "120000,1,2,0.5,1.5,10\n" +
		"60000,824.45,825,824,824.5,3\n" +
		"180000,1,1,1,1,1\n" + // the forged line's carrier, cut at its newline
		"60000,6.66,6.66,6.66,6.66,6.66\n"
	if err := os.WriteFile(filepath.Join(dir, "BTCUSDT-1m.csv"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	sink, err := klines.OpenFileSink(dir, "BTCUSDT", "1m")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if sink.Len() != 3 {
		t.Fatalf("%d candles stored, want 3", sink.Len())
	}
	lines, err := klines.Export(dir, "BTCUSDT", "1m")
	want := []string{"60000,824.45,825,824,824.5,3", "120000,1,2,0.5,1.5,10", "180000,1,1,1,1,1"}
	if err != nil || strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("export %q, %v, want %q", lines, err, want)
	}
}

// TestSinkRefusesADamagedLine: a line that is not a record, other than a
// torn last line, makes OpenFileSink and Export fail with ErrCorrupt, the
// file and the line number and what to do; never a silent skip, which
// would leave the candle unstored while the checkpoint is past it (before
// the fix: one line fewer, exit 0, and the next run made no request).
func TestSinkRefusesADamagedLine(t *testing.T) {
	t.Parallel()
	good := "60000,1,2,0.5,1.5,10\n"
	for _, damaged := range []string{
		"120000;1,2,0.5,1.5,10", "120000,1,2,0.5,1.5;10", "garbage", "", "120000,1,1,1,1", "120000,1,1,1,1,1,1",
		"+120000,1,1,1,1,1", "120000,1,1,1,1,1\r", "120000,NaN,1,1,1,1",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "BTCUSDT-1m.csv")
		if err := os.WriteFile(path, []byte(good+damaged+"\n"+"180000,1,1,1,1,1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"OpenFileSink": func() error {
				s, err := klines.OpenFileSink(dir, "BTCUSDT", "1m")
				if err == nil {
					s.Close()
				}
				return err
			}(),
			"Export": func() error { _, err := klines.Export(dir, "BTCUSDT", "1m"); return err }(),
		} {
			if !errors.Is(err, klines.ErrCorrupt) || !strings.Contains(err.Error(), path+" line 2 ") || !strings.Contains(err.Error(), "reset the stream's checkpoint") {
				t.Fatalf("%s with line 2 %q: %v, want ErrCorrupt naming %s line 2 and what to do", what, damaged, err, path)
			}
		}
	}
}
