package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
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

// exchangeTruth returns the embedded exchange's closed BTCUSDT candles of
// interval opening in [from, to) as export prints them; sparse keeps the
// even ones, those a provider that leaves quiet intervals out has.
func exchangeTruth(t tb, interval string, step time.Duration, sparse bool, from, to time.Time) []string {
	t.Helper()
	srv, err := providertest.New(embeddedConfig())
	if err != nil {
		t.Fatalf("%v", err)
	}
	var out []string
	for at := from; at.Before(to); {
		ks, err := srv.KlinesAt(time.Now(), providertest.Query{Symbol: "BTCUSDT", Interval: interval, Start: at, End: to.Add(-time.Millisecond), Limit: maxKlineLimit})
		if err != nil {
			t.Fatalf("%v", err)
		}
		if len(ks) == 0 {
			break
		}
		at = time.UnixMilli(ks[len(ks)-1].OpenTime).Add(step)
		for _, k := range ks {
			if !sparse || k.OpenTime/step.Milliseconds()%2 == 0 {
				out = append(out, strings.Join([]string{strconv.FormatInt(k.OpenTime, 10), k.Open, k.High, k.Low, k.Close, k.Volume}, ","))
			}
		}
	}
	return out
}

// TestPropertyCombinedLiesAreNeverDone runs the command one to three times
// (restarts, minutes apart, each with its page and perhaps a request cap,
// perhaps against an exchange telling other lies, the last perhaps
// against the honest one) against an exchange that tells any combination
// of lies (any subset of the row lies, or one answer lie, after 0 to 5
// honest answers), leaving quiet intervals out or not, for 1m or 1h
// candles, any -since (before the listing too) and -until (now, or in
// settled history), with a -timeout. Whatever a run says, every stored
// candle is the exchange's at its open time, once, in order, from -since
// on; a run that says done has stored exactly the exchange's candles over
// [-since, -until); one that says empty has stored none; a failure exits
// 1 with a gap record naming it; a deferral has a gap record. Against the
// honest exchange a run without a cap is done, or deferred because the
// last candles are not published yet.
func TestPropertyCombinedLiesAreNeverDone(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "ohlcv-lies-")
		if err != nil {
			rt.Fatal(err)
		}
		rt.Cleanup(func() { _ = os.RemoveAll(dir) })
		rapid.SyncTest(rt, func(rt *rapid.T) { combinedLies(rt, dir) })
	})
}

// combinedLies is one case of TestPropertyCombinedLiesAreNeverDone,
// storing into dir.
func combinedLies(rt *rapid.T, dir string) {
	interval := rapid.SampledFrom([]string{"1m", "1h"}).Draw(rt, "interval")
	step, _ := klines.Step(interval)
	// The bubble's clock starts on the hour: start anywhere in two
	// intervals, the forming candle odd or even.
	time.Sleep(time.Duration(rapid.IntRange(0, 2*int(step/time.Second)).Draw(rt, "seconds from the hour")) * time.Second)
	sparse := rapid.Bool().Draw(rt, "sparse")
	// Until now (the last closed candle) or some intervals before, in
	// settled history; since up to 900 candles before: hours of 1m, or
	// weeks of 1h, from before the listing too (the embedded exchange
	// lists its symbols at midnight 30 days before its start).
	back := time.Duration(rapid.SampledFrom([]int{0, 0, 1, 2, 12, 30}).Draw(rt, "until intervals before now")) * step
	since := klines.Floor(time.Now(), step).Add(-back - time.Duration(rapid.IntRange(1, 900).Draw(rt, "intervals since"))*step)
	listed := time.Now().UTC().Truncate(24 * time.Hour).Add(-30 * 24 * time.Hour)
	lie := drawLie(rt, step, !sparse && !listed.After(since))
	lying, honest := liar(rt, providertest.Config{Sparse: sparse, Lie: lie}), liar(rt, providertest.Config{Sparse: sparse})
	runs := rapid.IntRange(1, 3).Draw(rt, "runs")
	lastHonest := rapid.Bool().Draw(rt, "last run honest")
	for i := range runs {
		if i > 0 {
			time.Sleep(time.Duration(rapid.IntRange(0, 3*int(step/time.Second)).Draw(rt, "seconds between runs")) * time.Second)
		}
		e, isHonest := lying, false
		if i == runs-1 && lastHonest {
			e, isHonest = honest, true
		} else if i > 0 && rapid.Bool().Draw(rt, "another lie") {
			e = liar(rt, providertest.Config{Sparse: sparse, Lie: drawLie(rt, step, !sparse && !listed.After(since))})
		}
		now := time.Now()
		until := klines.Floor(now, step).Add(-back)
		// A run may be stopped early by its request cap, a confirmation
		// or a verification pending in its cursor, and the next one may
		// ask for another page.
		page := rapid.OneOf(rapid.IntRange(1, 20), rapid.IntRange(1, 1000)).Draw(rt, "page")
		capped := rapid.SampledFrom([]int{0, 0, 1, 2, 3, 5, 8}).Draw(rt, "max requests")
		args := []string{"-store", dir, "-interval", interval, "-since", since.Format(time.RFC3339), "-page", fmt.Sprint(page),
			"-max-requests", fmt.Sprint(capped), "-timeout", "20m", "-json"}
		if back > 0 {
			args = append(args, "-until", until.Format(time.RFC3339))
		}
		r := cliIn(e, args...)
		s := decodeSummary(rt, r.stdout)
		lines := []string{}
		if x := cliIn(e, "export", "-store", dir, "-interval", interval); x.code == 0 && x.stdout != "" {
			lines = strings.Split(strings.TrimSuffix(x.stdout, "\n"), "\n")
		}
		// Export reads the first of an open time stored twice, in order:
		// the file as written must be just that.
		if raw, err := os.ReadFile(filepath.Join(dir, "BTCUSDT-"+interval+".csv")); err == nil && len(raw) > 0 && !slices.Equal(strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"), lines) {
			rt.Fatalf("run %d: the file holds other lines than the %d export reads, once each, in order", i, len(lines))
		}
		truth := exchangeTruth(rt, interval, step, sparse, since, until)
		byTime := make(map[string]string, len(truth))
		for _, l := range truth {
			byTime[l[:strings.IndexByte(l, ',')]] = l
		}
		what := fmt.Sprintf("run %d (honest %v): exit %d, status %s, error %q, gaps %+v, %d candles stored, the truth over [%v, %v) has %d",
			i, isHonest, r.code, s.Status, s.Error, s.Gaps, len(lines), since, until, len(truth))
		for j, l := range lines {
			if t := l[:strings.IndexByte(l, ',')]; byTime[t] != l || (j > 0 && t <= lines[j-1][:strings.IndexByte(lines[j-1], ',')]) {
				rt.Fatalf("%s: stored line %d %q, the truth at that time is %q: a false candle", what, j, l, byTime[t])
			}
		}
		switch s.Status {
		case "done":
			if r.code != exitOK || !slices.Equal(lines, truth) {
				rt.Fatalf("%s: done with a hole", what)
			}
		case "empty":
			if r.code != exitOK || len(lines) != 0 {
				rt.Fatalf("%s: empty, with candles stored", what)
			}
		case "failed":
			if r.code != exitError || len(s.Gaps) == 0 {
				rt.Fatalf("%s: want exit 1 and a gap record naming the failure", what)
			}
		case "deferred":
			if r.code != exitOK || len(s.Gaps) == 0 {
				rt.Fatalf("%s: want exit 0 and a gap record", what)
			}
		default:
			rt.Fatalf("%s: want done, empty, failed or deferred", what)
		}
		if isHonest && capped == 0 && s.Status != "done" && !(s.Status == "empty" && len(truth) == 0) && !(s.Status == "deferred" && len(s.Gaps) == 1 && strings.Contains(s.Gaps[0].Reason, "not published")) {
			rt.Fatalf("%s: want done against the honest exchange", what)
		}
	}
}
