package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestDefaultRunCollectsTheLastDayOnce: with the defaults (BTCUSDT, 1m,
// the last 24h, 1000 per page) a run makes two requests, exits 0 with every
// summary field, and the export is the day's closed candles, ascending,
// each once.
func TestDefaultRunCollectsTheLastDayOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		until := time.Now().Truncate(time.Minute)
		r := cli(context.Background(), "-store", dir, "-json")
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"status", "requests", "ok", "throttled", "retries", "candles", "slices", "commits", "gaps", "elapsed_s", "learned_rate"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("summary has no %q: %s", k, r.stdout)
			}
		}
		s := decodeSummary(t, r.stdout)
		if s.Status != "done" || s.Requests != 2 || s.OK != 2 || s.Candles != 1440 || s.Slices != 2 || s.Commits != 2 || len(s.Gaps) != 0 || s.LearnedRate <= 0 {
			t.Fatalf("summary %+v, want done, 2 requests, 1440 candles in 2 slices and commits (the first page predicts nothing), no gap", s)
		}
		checkSeries(t, exportOf(t, "-store", dir), until.Add(-24*time.Hour), until, time.Minute)
	})
}

// TestRestartResumesFromTheCheckpoint: a second run makes no request when
// nothing closed since the first, and one request for the five candles that
// closed since; the export has them all, once.
func TestRestartResumesFromTheCheckpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		start := time.Now().Truncate(time.Minute)
		collectOK(t, "-store", dir)
		if s := collectOK(t, "-store", dir); s.Requests != 0 || s.Candles != 0 {
			t.Fatalf("immediate rerun: %d requests, %d candles, want none", s.Requests, s.Candles)
		}
		time.Sleep(5 * time.Minute)
		if s := collectOK(t, "-store", dir); s.Requests != 1 || s.Candles != 5 || s.Status != "done" {
			t.Fatalf("rerun 5m later: %+v, want 1 request for 5 candles", s)
		}
		checkSeries(t, exportOf(t, "-store", dir), start.Add(-24*time.Hour), start.Add(5*time.Minute), time.Minute)
	})
}

// TestRequestCapDefersWithAGap: -max-requests 1 stores the first page,
// records a request_cap gap after it and exits 0; the next run resumes
// there and resolves the gap.
func TestRequestCapDefersWithAGap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		since := time.Now().Truncate(time.Minute).Add(-24 * time.Hour)
		s := collectOK(t, "-store", dir, "-max-requests", "1")
		wantAfter := since.Add(999 * time.Minute).Format(time.RFC3339)
		if s.Status != "deferred" || s.Requests != 1 || s.Candles != 1000 || len(s.Gaps) != 1 ||
			s.Gaps[0].Reason != "request_cap" || s.Gaps[0].After != wantAfter || s.Gaps[0].Symbol != "BTCUSDT" {
			t.Fatalf("summary %+v, want deferred with one request_cap gap after %s", s, wantAfter)
		}
		s = collectOK(t, "-store", dir)
		if s.Status != "done" || s.Requests != 1 || s.Candles != 440 || len(s.Gaps) != 0 {
			t.Fatalf("resumed run: %+v, want 1 request for the other 440 candles, no gap", s)
		}
		checkSeries(t, exportOf(t, "-store", dir), since, since.Add(24*time.Hour), time.Minute)
	})
}

// TestTimeoutDefersWithADeadlineGap: a catch-up longer than -timeout
// stops at the deadline with a deadline gap, exit 0, everything before it
// stored.
func TestTimeoutDefersWithADeadlineGap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		since := time.Now().Truncate(time.Minute).Add(-20 * 24 * time.Hour)
		s := collectOK(t, "-store", dir, "-since", since.Format(time.RFC3339), "-timeout", "1s")
		// The run ends at its deadline, or just before it on a Retry-After
		// that outlasts it (source pressure, resuming after the deadline).
		deadline := func(g gapInfo) bool {
			return g.Reason == "deadline" || g.Reason == "throttled" && g.Until != ""
		}
		if s.Status != "deferred" || len(s.Gaps) != 1 || !deadline(s.Gaps[0]) || s.Candles == 0 || s.Candles >= 20*24*60 {
			t.Fatalf("summary %+v, want deferred by a deadline (or a pause past it) gap part way", s)
		}
		lines := exportOf(t, "-store", dir)
		checkSeries(t, lines, since, since.Add(time.Duration(len(lines))*time.Minute), time.Minute)
		if s.ElapsedS > 1.5 {
			t.Fatalf("ran %.1fs past a 1s timeout", s.ElapsedS)
		}
	})
}

// TestSeveralSymbolsShareOneProvider: symbols run at once through one
// provider budget, each into its own series.
func TestSeveralSymbolsShareOneProvider(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		until := time.Now().Truncate(time.Hour)
		s := collectOK(t, "-store", dir, "-symbols", "BTCUSDT,ethusdt,SOLUSDT", "-interval", "1h", "-since", until.Add(-60*24*time.Hour).Format(time.RFC3339), "-page", "100")
		if s.Status != "done" || len(s.Streams) != 3 || s.Provider != "sim" {
			t.Fatalf("summary %+v, want 3 streams done through provider sim", s)
		}
		// The exchange lists 30 days before its start: earlier windows are
		// covered empty, not fetched forever.
		listed := until.Truncate(24 * time.Hour).Add(-30 * 24 * time.Hour)
		for _, sym := range []string{"BTCUSDT", "ETHUSDT", "SOLUSDT"} {
			checkSeries(t, exportOf(t, "-store", dir, "-symbol", sym, "-interval", "1h"), listed, until, time.Hour)
		}
	})
}

// TestFollowCollectsEachNewCandle: with -follow, after catch-up a
// steady-state stream stores every candle as it closes, until the context
// ends (SIGINT in the real command): exit 0, status interrupted, no hole.
func TestFollowCollectsEachNewCandle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		start := time.Now().Truncate(time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute+30*time.Second)
		defer cancel()
		r := cli(ctx, "-store", dir, "-follow", "-json")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		s := decodeSummary(t, r.stdout)
		if s.Status != "interrupted" || len(s.Streams) != 2 || s.Streams[1].Mode != "steady_state" || s.Streams[1].Candles != 10 {
			t.Fatalf("summary %+v, want interrupted after 10 steady-state candles", s)
		}
		checkSeries(t, exportOf(t, "-store", dir), start.Add(-24*time.Hour), start.Add(10*time.Minute), time.Minute)
	})
}

// TestInterruptedBeforeTheStreamsStart: a SIGINT or SIGTERM that comes
// while the command is still starting (connecting to its store, the
// streams not declared yet) is an interruption like any other: exit 0,
// status interrupted, nothing on stderr. It was "failed: schedule: context
// canceled", exit 1, with "streams":null (a SIGTERM 181 ms after the
// start, in a loop that signalled the real binary at random moments), and
// while connecting to PostgreSQL "failed: pgstore: Open: cannot reach
// ...: context canceled", exit 1, blaming a server that was up.
func TestInterruptedBeforeTheStreamsStart(t *testing.T) {
	t.Parallel()
	for _, store := range []string{t.TempDir(), "postgres://nobody@127.0.0.1:1/nothing?connect_timeout=5"} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r := cli(ctx, "-store", store, "-json")
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("-store %s: exit %d, stderr %q; want 0 and nothing", store, r.code, r.stderr)
			}
			if s := decodeSummary(t, r.stdout); s.Status != "interrupted" || s.Error != "" || !strings.Contains(r.stdout, `"streams":[]`) {
				t.Fatalf("-store %s: summary %s, want status interrupted, no error, and streams an empty list (not null)", store, r.stdout)
			}
		})
	}
}

// TestFollowEndsAtTheTimeout: -follow -timeout ends the run on its own,
// exit 0, caught up.
func TestFollowEndsAtTheTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		start := time.Now().Truncate(time.Minute)
		s := collectOK(t, "-store", dir, "-follow", "-timeout", "3m")
		if s.Status != "done" || s.ElapsedS > 3*60 {
			t.Fatalf("summary %+v, want done within 3m", s)
		}
		lines := exportOf(t, "-store", dir)
		checkSeries(t, lines, start.Add(-24*time.Hour), start.Add(time.Duration(len(lines)-1440)*time.Minute), time.Minute)
		if len(lines) < 1440+2 {
			t.Fatalf("%d candles, want the 2 that closed during the 3m too", len(lines))
		}
	})
}

// TestUnknownSymbolFailsWithTheProvidersMessage: a permanent provider
// error exits 1 with one line carrying the provider's message, and the
// JSON summary says failed.
func TestUnknownSymbolFailsWithTheProvidersMessage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := cli(context.Background(), "-store", t.TempDir(), "-symbols", "NOPEUSDT", "-json")
		if r.code != exitError {
			t.Fatalf("exit %d, want %d", r.code, exitError)
		}
		isOneLine(t, r.stderr, "Invalid symbol.")
		if !strings.Contains(r.stderr, "NOPEUSDT") {
			t.Fatalf("stderr %q does not name the symbol", r.stderr)
		}
		if s := decodeSummary(t, r.stdout); s.Status != "failed" || s.Requests != 1 {
			t.Fatalf("summary %+v, want failed after one request (never retried)", s)
		}
	})
}

// TestBadFlagsFailWithOneLine: every bad command line exits 2 with one
// line naming the problem, before anything is collected.
func TestBadFlagsFailWithOneLine(t *testing.T) {
	t.Parallel()
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-nope"}, "-nope"},
		{[]string{"-page", "0"}, "-page"},
		{[]string{"-page", "1001"}, "-page"},
		{[]string{"-page", "x"}, "-page"},
		{[]string{"-interval", "7x"}, "-interval"},
		{[]string{"-symbols", ""}, "-symbols"},
		{[]string{"-symbols", "BTCUSDT,../x"}, "-symbols"},
		{[]string{"-symbols", "BTCUSDT,btcusdt"}, "-symbols"},
		{[]string{"-since", "yesterday"}, "-since"},
		{[]string{"-until", "tomorrow"}, "-until"},
		{[]string{"-until", future}, "-until"},
		{[]string{"-since", "2024-01-02T00:00:00Z", "-until", "2024-01-01T00:00:00Z"}, "-since"},
		{[]string{"-max-requests", "-1"}, "-max-requests"},
		{[]string{"-timeout", "-1s"}, "-timeout"},
		{[]string{"-timeout", "soon"}, "-timeout"},
		{[]string{"-base-url", "ftp://x"}, "-base-url"},
		{[]string{"-base-url", "http://x:99999999"}, "-base-url must have a port"},
		{[]string{"-base-url", "http://x/?apikey=K"}, "-base-url must have no query"},
		{[]string{"-base-url", "http://x/#K"}, `-base-url must have no query or fragment (the request's path and query follow it) (got "http://x/#...")`},
		{[]string{"-store", ""}, "-store"},
		{[]string{"extra"}, "extra"},
		{[]string{"export", "-symbol", "a/b"}, "-symbol"},
		{[]string{"export", "-interval", "1y"}, "-interval"},
		{[]string{"export", "-bogus"}, "-bogus"},
	} {
		r := cli(context.Background(), tc.args...)
		if r.code != exitUsage || r.stdout != "" {
			t.Errorf("case %d %q: exit %d stdout %q, want %d and nothing", i, tc.args, r.code, r.stdout, exitUsage)
			continue
		}
		isOneLine(t, r.stderr, tc.want)
	}
}

// TestUnreachableStoreFailsWithOneLine: a PostgreSQL store that does not
// answer exits 1 with one line naming it, before any request.
func TestUnreachableStoreFailsWithOneLine(t *testing.T) {
	t.Parallel()
	r := cli(context.Background(), "-store", "postgres://nobody@127.0.0.1:1/nothing?connect_timeout=5")
	if r.code != exitError || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q; want %d and nothing", r.code, r.stdout, exitError)
	}
	isOneLine(t, r.stderr, "127.0.0.1")
}

// TestExportOfNothingFails: exporting a series never collected exits 1
// with one line.
func TestExportOfNothingFails(t *testing.T) {
	t.Parallel()
	r := cli(context.Background(), "export", "-store", t.TempDir(), "-symbol", "ETHUSDT")
	if r.code != exitError || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q; want %d and nothing", r.code, r.stdout, exitError)
	}
	isOneLine(t, r.stderr, "no ETHUSDT 1m candles")
}

// TestHelpExitsZero: -h prints the usage and exits 0.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	r := cli(context.Background(), "-h")
	if r.code != 0 || !strings.Contains(r.stderr, "-max-requests") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestDefaultsOverLoopback runs the command exactly as main does: the
// embedded exchange on a real loopback port, over HTTP, on the wall clock
// (about a second: two requests at the provider's conservative start).
func TestDefaultsOverLoopback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"-store", dir, "-json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	s := decodeSummary(t, out.String())
	if s.Status != "done" || s.Candles != 1440 || s.Requests != 2 {
		t.Fatalf("summary %+v, want 1440 candles in 2 requests", s)
	}
	if lines := exportOf(t, "-store", dir); len(lines) != 1440 {
		t.Fatalf("%d candles exported, want 1440", len(lines))
	}
}

// TestADeletedCandleFileIsNoticed: a candle file removed, cut short at a
// line, or with its last line's newline removed (cut off as torn when the
// file is opened), while the store's checkpoints say its candles were
// collected, is an inconsistent store: the next run fails and says so.
// Before, it resumed after them and said done with the hole (with nothing
// stored, or with the file's tail missing; the second found by a review).
func TestADeletedCandleFileIsNoticed(t *testing.T) {
	t.Parallel()
	for name, damage := range map[string]func(path string) error{
		"removed": os.Remove,
		"cut short": func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			lines := bytes.SplitAfter(b, []byte("\n"))
			return os.WriteFile(path, bytes.Join(lines[:len(lines)-11], nil), 0o644)
		},
		"last newline removed": func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(path, bytes.TrimSuffix(b, []byte("\n")), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				since := time.Now().Truncate(time.Minute).Add(-2 * time.Hour).Format(time.RFC3339)
				if s := collectOK(t, "-store", dir, "-since", since, "-json"); s.Status != "done" {
					t.Fatalf("first run: %q", s.Status)
				}
				if err := damage(filepath.Join(dir, "BTCUSDT-1m.csv")); err != nil {
					t.Fatal(err)
				}
				r := cli(context.Background(), "-store", dir, "-since", since, "-json")
				s := decodeSummary(t, r.stdout)
				if r.code != exitError || s.Status != "failed" || !strings.Contains(s.Error, "holds no candles") && !strings.Contains(s.Error, "lacks the candle at") {
					t.Fatalf("after the file was damaged: exit %d, %q (%s); want a failure naming the inconsistency", r.code, s.Status, s.Error)
				}
			})
		})
	}
}

// TestVerboseShowsTheProvidersPausesAndCuts: -v prints, with each stream
// run's line, what the provider did to the pace (a pause it asked for, a
// cut of the rate), so a user who sees a slow run sees why. It printed
// the streams' lines alone: the provider's records went nowhere.
func TestVerboseShowsTheProvidersPausesAndCuts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		since := time.Now().Truncate(time.Minute).Add(-30 * 24 * time.Hour)
		r := cli(context.Background(), "-store", dir, "-since", since.Format(time.RFC3339), "-v", "-progress=false")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		for _, want := range []string{"BTCUSDT", `msg="budget: rate cut"`, `msg="budget: provider paused"`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr has no %s:\n%s", want, r.stderr)
			}
		}
	})
}
