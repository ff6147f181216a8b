package klines_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/slice"
)

// drawLie draws what a provider of candles of length step lies about
// (see providertest.Lies). A shift earlier by whole intervals is kept only
// when early is set (the exchange has a candle wherever a lying answer may
// start: dense, listed at or before since): where the lie may start after
// a stretch without candles (before the listing, a quiet interval of a
// sparse exchange), it moves the exchange's history whole, a history its
// answers never contradict before a candle is stored, which no collector
// asking one provider can tell from the truth; there it is turned later.
func drawLie(t *rapid.T, step time.Duration, early bool) providertest.Lie {
	l := providertest.Lies(step).Draw(t, "lie")
	if l.Shift < 0 && l.Shift%step == 0 && !early {
		l.Shift = -l.Shift
	}
	return l
}

// truthOf returns the provider's closed candles opening in [from, to) as
// the file store exports them: every candle of the truth, or, for a
// provider that leaves quiet intervals out, the even ones.
func truthOf(t *rapid.T, srv *providertest.Server, interval string, step time.Duration, sparse bool, from, to time.Time) []string {
	var out []string
	for at := from; at.Before(to); {
		ks, err := srv.KlinesAt(time.Now(), providertest.Query{Symbol: "BTCUSDT", Interval: interval, Start: at, End: to.Add(-time.Millisecond), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(ks) == 0 {
			break
		}
		at = time.UnixMilli(ks[len(ks)-1].OpenTime).Add(step)
		for _, k := range ks {
			if sparse && k.OpenTime/step.Milliseconds()%2 != 0 {
				continue
			}
			out = append(out, strings.Join([]string{strconv.FormatInt(k.OpenTime, 10), k.Open, k.High, k.Low, k.Close, k.Volume}, ","))
		}
	}
	return out
}

// storedLines returns the lines of the file of BTCUSDT candles of interval
// in dir, as written: they must be what Export reads back (which keeps
// the first of an open time stored twice, and sorts), so no candle is
// stored twice, nor out of order.
func storedLines(t *rapid.T, dir, interval string) []string {
	raw, err := os.ReadFile(filepath.Join(dir, "BTCUSDT-"+interval+".csv"))
	if os.IsNotExist(err) {
		return nil
	}
	lines, xerr := klines.Export(dir, "BTCUSDT", interval)
	if err != nil || xerr != nil {
		t.Fatalf("read: %v, export: %v", err, xerr)
	}
	if written := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"); len(raw) > 0 && !slices.Equal(written, lines) || len(raw) == 0 && len(lines) > 0 {
		t.Fatalf("the file holds %d lines, Export reads %d in order, once each: a candle stored twice or out of order", len(written), len(lines))
	}
	return lines
}

// openTime returns the open time of an exported line.
func openTime(line string) int64 {
	ms, _ := strconv.ParseInt(line[:strings.IndexByte(line, ',')], 10, 64)
	return ms
}

// TestPropCombinedLiesNeverLeaveASilentHole: whatever lies a provider
// tells together (any subset of the row lies, or one answer lie, after 0
// to 5 honest answers), with quiet intervals left out or not, for 1m or
// 1h candles, whatever the listing, since and until (the last closed
// candle, or settled history), a catch-up into a file, run one to four
// times (each a new process, minutes apart, with its own page, fetching
// ahead or not, perhaps stopped by a request cap, perhaps against a
// provider telling other lies, the last perhaps against the honest one),
// never stores a false candle: every line in the file is the provider's
// candle at that open time, once, in order, at or after since. After
// every run the committed cursor claims no hole: the file holds every
// candle of the truth from since up to the cursor and the candle the
// cursor says was shown (FileSink.Check), and a run that ends caught up
// at until (no error, no reason) has stored the truth over [since,
// until) exactly. An uncapped run against the honest provider stores
// every candle but those it may not trust published yet.
func TestPropCombinedLiesNeverLeaveASilentHole(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "klines-lies-")
		if err != nil {
			rt.Fatal(err)
		}
		rt.Cleanup(func() { _ = os.RemoveAll(dir) })
		rapid.SyncTest(rt, func(rt *rapid.T) { combinedLies(rt, dir) })
	})
}

// combinedLies is one case of TestPropCombinedLiesNeverLeaveASilentHole,
// storing into dir.
func combinedLies(rt *rapid.T, dir string) {
	interval := rapid.SampledFrom([]string{"1m", "1h"}).Draw(rt, "interval")
	step, _ := klines.Step(interval)
	// The bubble's clock starts on the hour: start anywhere in two
	// intervals, the forming candle odd or even.
	time.Sleep(time.Duration(rapid.IntRange(0, 2*int(step/time.Second)).Draw(rt, "seconds from the hour")) * time.Second)
	sparse := rapid.Bool().Draw(rt, "sparse")
	// Until now (the last closed candle), as a run without -until, or
	// some intervals before, in settled history. Since up to 2,000
	// candles before: a day or two of 1m, weeks or months of 1h; the
	// symbol listed before since or after it.
	back := time.Duration(rapid.SampledFrom([]int{0, 0, 1, 2, 12, 30}).Draw(rt, "until intervals before now")) * step
	span := time.Duration(rapid.IntRange(1, 2000).Draw(rt, "intervals since")) * step
	since := klines.Floor(time.Now(), step).Add(-back - span)
	listed := time.Now().Add(-time.Duration(rapid.IntRange(0, 2500).Draw(rt, "intervals listed")) * step).
		Add(-time.Duration(rapid.IntRange(0, int(step/time.Second)).Draw(rt, "seconds into the interval")) * time.Second)
	lie := drawLie(rt, step, !sparse && !listed.After(since))
	// From anywhere in since's interval: the Source starts at its candle.
	from := since.Add(time.Duration(rapid.IntRange(0, int(step/time.Second)-1).Draw(rt, "seconds into since")) * time.Second)
	cfg := providertest.Config{Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}, Sparse: sparse, Lie: lie}
	liar, err := providertest.New(cfg)
	if err != nil {
		rt.Fatalf("providertest.New(%+v): %v", cfg, err)
	}
	cfg.Lie = providertest.Lie{}
	honest, _ := providertest.New(cfg)
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	runs := rapid.IntRange(1, 4).Draw(rt, "runs")
	lastHonest := rapid.Bool().Draw(rt, "last run honest")
	for i := range runs {
		if i > 0 {
			time.Sleep(time.Duration(rapid.IntRange(0, 3*int(step/time.Second)).Draw(rt, "seconds between runs")) * time.Second)
		}
		srv := liar
		if i == runs-1 && lastHonest {
			srv = honest
		} else if i > 0 && rapid.Bool().Draw(rt, "another lie") {
			c := cfg
			c.Lie = drawLie(rt, step, !sparse && !listed.After(since))
			srv, _ = providertest.New(c)
		}
		now := time.Now()
		until := klines.Floor(now, step).Add(-back)
		// A process may be stopped early, a confirmation or a
		// verification pending in its cursor, and the next one may ask
		// for another page.
		page := rapid.OneOf(rapid.IntRange(1, 20), rapid.IntRange(1, 1000)).Draw(rt, "page")
		prefetch := rapid.SampledFrom([]int{slice.NoPrefetch, 0, 2}).Draw(rt, "prefetch")
		capped := rapid.SampledFrom([]int{0, 0, 1, 2, 3, 5, 8}).Draw(rt, "max requests")
		rep, err := lieRun(rt, srv, dir, interval, page, prefetch, capped, from, until, store)
		lines := storedLines(rt, dir, interval)
		truth := truthOf(rt, liar, interval, step, sparse, since, until)
		byTime := make(map[int64]string, len(truth))
		for _, l := range truth {
			byTime[openTime(l)] = l
		}
		for j, l := range lines {
			if ms := openTime(l); byTime[ms] != l || ms < since.UnixMilli() {
				rt.Fatalf("run %d (honest %v, report %+v, %v): stored line %d %q, the truth at that time is %q: a false candle", i, srv == honest, rep, err, j, l, byTime[ms])
			}
		}
		covered := since.UnixMilli() // the cursor claims every candle before it
		if last, derr := klines.DecodeCursor(rep.Cursor); derr == nil {
			covered = max(covered, last.Add(step).UnixMilli())
		}
		n := 0
		for n < len(truth) && openTime(truth[n]) < covered {
			n++
		}
		if len(lines) < n || !slices.Equal(lines[:n], truth[:n]) {
			rt.Fatalf("run %d (report %+v, %v): cursor %q covers up to %v, but the file holds %d lines where the truth has %d candles up to there: a silent hole",
				i, rep, err, rep.Cursor, time.UnixMilli(covered).UTC(), min(len(lines), n), n)
		}
		done := err == nil && rep.Reason == "" && covered >= until.UnixMilli()
		if done && !slices.Equal(lines, truth) {
			rt.Fatalf("run %d (report %+v): done, but the file holds %d lines, the truth over [%v, %v) has %d", i, rep, len(lines), since, until, len(truth))
		}
		settled := min(until.UnixMilli(), klines.Floor(now.Add(-max(10*time.Minute, 2*step)), step).UnixMilli())
		if err == nil && rep.Reason == "" && covered < until.UnixMilli() && covered >= settled {
			// The last candles before until, not trusted published yet,
			// are behind (Page.NotYet), never caught up: a backfill
			// caught up short of its boundary so was done with them
			// missing.
			rt.Fatalf("run %d (report %+v): caught up with the cursor at %v, short of until %v in the stretch not settled yet: a hole called done",
				i, rep, time.UnixMilli(covered).UTC(), until)
		}
		// Against the honest provider, a run ends caught up, or behind
		// (the last candles before until not trusted published yet, and
		// when to ask again), with every candle stored but perhaps those
		// of the last 10 minutes (two intervals).
		k := 0
		for k < len(truth) && openTime(truth[k]) < settled {
			k++
		}
		behind := rep.Reason == forage.ReasonBehind && rep.Until.After(now)
		if srv == honest && capped == 0 && (err != nil || rep.Reason != "" && !behind || len(lines) < k || !slices.Equal(lines[:k], truth[:k])) {
			rt.Fatalf("run %d against the honest provider: report %+v, %v, cursor up to %v, %d lines: want caught up with the truth's %d candles before %v",
				i, rep, err, time.UnixMilli(covered).UTC(), len(lines), k, time.UnixMilli(settled).UTC())
		}
	}
}

// lieRun runs one catch-up process of BTCUSDT candles from the one
// containing since up to until
// from srv into a file sink in dir, with its checkpoints in store, in
// pages of page, fetching ahead as prefetch says, in at most maxRequests
// requests (0: no cap), and returns its report and error. The sink must hold the candle the
// committed cursor says was shown, before and after.
func lieRun(rt *rapid.T, srv *providertest.Server, dir, interval string, page, prefetch, maxRequests int, since, until time.Time, store checkpoint.Store) (slice.Report, error) {
	src := &klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "BTCUSDT", Interval: interval, Page: page,
		From: since, Until: func() time.Time { return until }}
	if err := src.Init(); err != nil {
		rt.Fatal(err)
	}
	sink, err := klines.OpenFileSink(dir, "BTCUSDT", interval)
	if err != nil {
		rt.Fatal(err)
	}
	defer sink.Close()
	key := checkpoint.Key{Stream: "sim/BTCUSDT/" + interval, Mode: checkpoint.CatchUp}
	p, _ := budget.NewLocal("sim", budget.Config{Burst: 1000, Adaptive: aimd.Config{Initial: 1e5, Max: 1e5}})
	r, err := slice.New(slice.Config[klines.Candle]{Stream: key.Stream, Mode: key.Mode, Store: store, Provider: p, Source: src, Sink: sink, Prefetch: prefetch})
	if err != nil {
		rt.Fatal(err)
	}
	var run *budget.Run
	if maxRequests > 0 {
		run, _ = budget.NewRun(budget.Envelope{MaxRequests: maxRequests})
	}
	rep, err := r.Run(context.Background(), run)
	if cp, lerr := store.Load(context.Background(), key); lerr == nil {
		if cerr := sink.Check(cp.Cursor); cerr != nil {
			rt.Fatalf("report %+v, %v: the committed cursor %q names a candle the file lacks: %v", rep, err, cp.Cursor, cerr)
		}
	}
	return rep, err
}
