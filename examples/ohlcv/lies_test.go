package main

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/providertest"
)

// liar serves, in memory, an exchange configured as the embedded one but
// lying (or sparse) as lie says, in place of the embedded exchange.
func liar(t tb, lie providertest.Config) env {
	t.Helper()
	cfg := embeddedConfig()
	cfg.Sparse, cfg.Lie = lie.Sparse, lie.Lie
	srv, err := providertest.New(cfg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return env{serve: func(*providertest.Server) (string, *http.Client, func(), error) {
		return "http://sim", srv.Client(), func() {}, nil
	}}
}

// cliIn runs the command in process against the exchange e serves.
func cliIn(e env, args ...string) result {
	var out, errOut bytes.Buffer
	code := runEnv(context.Background(), e, args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// truthLines returns the exchange's closed BTCUSDT 1m candles opening in
// [from, to) as export prints them.
func truthLines(t *testing.T, from, to time.Time) []string {
	t.Helper()
	srv, err := providertest.New(embeddedConfig())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for at := from; at.Before(to); at = at.Add(maxKlineLimit * time.Minute) {
		ks, err := srv.KlinesAt(time.Now(), providertest.Query{Symbol: "BTCUSDT", Interval: "1m", Start: at, End: to.Add(-time.Millisecond), Limit: maxKlineLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			out = append(out, strings.Join([]string{strconv.FormatInt(k.OpenTime, 10), k.Open, k.High, k.Low, k.Close, k.Volume}, ","))
		}
	}
	return out
}

// storedTruth fails unless the stored candles are the exchange's, once
// each, in order, from since on without a hole, and returns how many.
func storedTruth(t *testing.T, dir string, since time.Time) int {
	t.Helper()
	r := cli(context.Background(), "export", "-store", dir)
	if r.code != 0 || r.stdout == "" {
		return 0 // nothing stored yet
	}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := truthLines(t, since, since.Add(time.Duration(len(got))*time.Minute))
	for i := range got {
		if i >= len(want) || got[i] != want[i] {
			t.Fatalf("stored candle %d = %q, want the exchange's %q", i, got[i], want[min(i, len(want)-1)])
		}
	}
	return len(got)
}

// TestLyingProviderNeverLeavesASilentHole runs the command against an
// exchange that lies, each lie in turn (after lieAfter honest answers),
// with the defaults (the last 24h, pages of 1000) or over two days, under
// the embedded exchange's rate limit. A lie
// it can work around (answers capped at 500 rows, the middle row of every
// answer dropped) still ends done with every closed candle stored once,
// with the exchange's values. Any other (a redirect, refused as the one
// request it is, or [] to every request once a candle was sent, the
// confirming one included) ends the run failed, exit 1, with
// the summary, a durable gap record and the one stderr line naming the lie, and what was stored
// before it is the exchange's candles without a hole; a second run against
// the honest exchange then stores the rest: every closed candle once, with
// the exchange's values. Never done with a hole, never a forged value.
func TestLyingProviderNeverLeavesASilentHole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lie  providertest.Config
		days int
		want string // "" for a lie worked around: done, everything stored
	}{
		{"short pages", providertest.Config{Lie: providertest.Lie{ShortPages: 500}}, 2, ""},
		{"dropped rows", providertest.Config{Lie: providertest.Lie{DropRows: true}}, 1, ""},
		{"null", providertest.Config{Lie: providertest.Lie{Null: true, After: 1}}, 1, "the provider answered null"},
		{"empty in history", providertest.Config{Lie: providertest.Lie{Empty: true, After: 1}}, 1, "an answer that leaves out candles"},
		{"empty from the start", providertest.Config{Lie: providertest.Lie{Empty: true}}, 1, "an answer that leaves out candles"},
		{"reversed", providertest.Config{Lie: providertest.Lie{Reversed: true, After: 1}}, 1, "rows must be oldest first"},
		{"shifted by half", providertest.Config{Lie: providertest.Lie{Shifted: true, After: 1}}, 1, "not on a 1m boundary"},
		{"shifted later", providertest.Config{Lie: providertest.Lie{Shifted: true, Shift: time.Minute}}, 1, "outside the asked window"},
		{"shifted earlier", providertest.Config{Lie: providertest.Lie{Shifted: true, Shift: -time.Minute, After: 1}}, 1, "outside the asked window"},
		{"newline in a value", providertest.Config{Lie: providertest.Lie{Newline: true, After: 1}}, 1, "not a decimal number"},
		{"redirect loop", providertest.Config{Lie: providertest.Lie{RedirectLoop: true, After: 1}}, 1, "provider redirected to"},
		{"empty to everything after a candle", providertest.Config{Lie: providertest.Lie{EmptyAll: true, After: 1}}, 1, "but sent one at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				since := time.Now().Truncate(time.Minute).Add(-time.Duration(tc.days) * 24 * time.Hour)
				args := []string{"-store", dir, "-since", since.Format(time.RFC3339), "-json"}
				r := cliIn(liar(t, tc.lie), args...)
				s := decodeSummary(t, r.stdout)
				if tc.want == "" {
					if r.code != 0 || s.Status != "done" || len(s.Gaps) != 0 {
						t.Fatalf("exit %d, summary %+v, stderr %q: want done", r.code, s, r.stderr)
					}
					if n, want := storedTruth(t, dir, since), tc.days*24*60; n != want {
						t.Fatalf("%d candles stored, want %d", n, want)
					}
					return
				}
				if r.code != exitError || s.Status != "failed" || !strings.Contains(s.Error, tc.want) {
					t.Fatalf("exit %d, summary %+v: want failed (exit %d) naming %q", r.code, s, exitError, tc.want)
				}
				isOneLine(t, r.stderr, tc.want)
				if len(s.Gaps) != 1 || !strings.HasPrefix(s.Gaps[0].Reason, "permanent: ") || !strings.Contains(s.Gaps[0].Reason, tc.want) {
					t.Fatalf("gaps %+v: want one gap record naming %q", s.Gaps, tc.want)
				}
				if n := storedTruth(t, dir, since); n != s.Candles {
					t.Fatalf("%d candles stored, the summary says %d", n, s.Candles)
				}
				until := time.Now().Truncate(time.Minute)
				s = collectOK(t, args[:len(args)-1]...)
				if s.Status != "done" || len(s.Gaps) != 0 {
					t.Fatalf("honest run: summary %+v, want done", s)
				}
				if n, want := storedTruth(t, dir, since), int(until.Sub(since)/time.Minute); n != want {
					t.Fatalf("after the honest run %d candles stored, want %d", n, want)
				}
			})
		})
	}
}

// TestLyingEmptyFromTheStartIsNeverDone reproduces the silent hole of a
// provider that answers [] to every request, the confirming one too: with
// -page 60 -since -3h, a first run against it that has received nothing
// stores nothing and moves the cursor past nothing, and a later run
// against the honest exchange stores every closed candle. Before the fix
// the first run covered the three hours, and the honest run made one
// request.
func TestLyingEmptyFromTheStartIsNeverDone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		since := time.Now().Truncate(time.Minute).Add(-3 * time.Hour)
		args := []string{"-store", dir, "-since", since.Format(time.RFC3339), "-page", "60", "-json"}
		r := cliIn(liar(t, providertest.Config{Lie: providertest.Lie{EmptyAll: true}}), args...)
		if s := decodeSummary(t, r.stdout); r.code != 0 || s.Status != "empty" || s.Candles != 0 || s.Streams[0].Last != "" {
			t.Fatalf("exit %d, summary %+v, stderr %q: want status empty, no candle and a cursor on none", r.code, s, r.stderr)
		}
		until := time.Now().Truncate(time.Minute)
		if s := collectOK(t, args[:len(args)-1]...); s.Status != "done" {
			t.Fatalf("honest run: summary %+v, want done", s)
		}
		if n, want := storedTruth(t, dir, since), int(until.Sub(since)/time.Minute); n != want {
			t.Fatalf("after the honest run %d candles stored, want %d", n, want)
		}
	})
}

// TestLyingHonestOnceThenEmptyFails reproduces the other half: a provider
// honest for one page of 60, then [] to everything, makes the run fail
// naming the lie, with a gap, never "done"; the honest run then stores
// every closed candle (before the fix ~118 were lost for good).
func TestLyingHonestOnceThenEmptyFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		since := time.Now().Truncate(time.Minute).Add(-3 * time.Hour)
		args := []string{"-store", dir, "-since", since.Format(time.RFC3339), "-page", "60", "-json"}
		r := cliIn(liar(t, providertest.Config{Lie: providertest.Lie{EmptyAll: true, After: 1}}), args...)
		s := decodeSummary(t, r.stdout)
		if r.code != exitError || s.Status != "failed" || s.Candles != 60 || len(s.Gaps) != 1 || !strings.Contains(s.Gaps[0].Reason, "but sent one at") {
			t.Fatalf("exit %d, summary %+v: want failed with 60 candles and a gap naming the lie", r.code, s)
		}
		until := time.Now().Truncate(time.Minute)
		if s := collectOK(t, args[:len(args)-1]...); s.Status != "done" {
			t.Fatalf("honest run: summary %+v, want done", s)
		}
		if n, want := storedTruth(t, dir, since), int(until.Sub(since)/time.Minute); n != want {
			t.Fatalf("after the honest run %d candles stored, want %d", n, want)
		}
	})
}

// TestALaggingProviderIsNeverDoneShort: a provider whose clock runs 45 s
// behind this one has not published the last closed candle when the run
// starts just after it closed (as a cron job does). The catch-up is then
// caught up for now, short of until: it asks again until the provider
// publishes it, and is done with every candle; with too little time
// left, it is deferred and says why. It was "done" with the last candle
// missing.
func TestALaggingProviderIsNeverDoneShort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout string
		want    string
	}{{"10m", "done"}, {"20s", "deferred"}} {
		t.Run(tc.want, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := embeddedConfig()
				cfg.Now = func() time.Time { return time.Now().Add(-45 * time.Second) }
				srv, err := providertest.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				e := env{serve: func(*providertest.Server) (string, *http.Client, func(), error) {
					return "http://sim", srv.Client(), func() {}, nil
				}}
				dir := t.TempDir()
				until := time.Now().Truncate(time.Minute)
				since := until.Add(-time.Hour)
				r := cliIn(e, "-store", dir, "-since", since.Format(time.RFC3339), "-timeout", tc.timeout, "-json")
				s := decodeSummary(t, r.stdout)
				lines := exportOf(t, "-store", dir)
				switch {
				case s.Status != tc.want:
					t.Fatalf("status %q with %d of 60 candles (stderr %q); want %s", s.Status, len(lines), r.stderr, tc.want)
				case tc.want == "done" && len(lines) != 60:
					t.Fatalf("done with %d of 60 candles", len(lines))
				case tc.want == "deferred" && (len(s.Gaps) != 1 || !strings.Contains(s.Gaps[0].Reason, "not published")):
					t.Fatalf("deferred with gaps %+v; want one saying the provider has not published the last candles", s.Gaps)
				}
			})
		})
	}
}
