package providertest_test

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/providertest"
)

// legacyGolden holds the transcripts of the Answer and Lie constants that
// the structs replaced, recorded at 8727146 (the last commit with them):
// what each answered, byte for byte, to the scripts below, named by the
// constant's String (the file's preamble maps the names).
const legacyGolden = "testdata/legacy.golden"

// transcribe renders one answer: status, took (the round trip's fake
// time), headers sorted, and the body (verbatim when short, else its length
// and SHA-256).
func transcribe(b *strings.Builder, i int, r result, took time.Duration) {
	fmt.Fprintf(b, "  %d: %d took %v", i, r.status, took)
	for _, k := range slices.Sorted(maps.Keys(r.header)) {
		if k == "Date" {
			continue // the server's clock, which the constants' transcripts predate
		}
		fmt.Fprintf(b, " %s=%s", k, strings.Join(r.header[k], ","))
	}
	if len(r.body) <= 40 {
		fmt.Fprintf(b, " body %q\n", r.body)
	} else {
		fmt.Fprintf(b, " body %d bytes sha256 %.16x…\n", len(r.body), sha256.Sum256(r.body))
	}
}

// noRedirects is s's client, which returns a redirect instead of following it.
func noRedirects(s *providertest.Server) *http.Client {
	c := s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// answerTranscript runs the answers' script against cfg in a synctest
// bubble, over a GCRA limit of 10/s burst 5 and over a fixed window of 3
// per second, with Binance's usage headers: bursts back to back, then pauses of
// 100ms, 61s and 2m (a ban's whole life), then two bursts 40s apart
// (violations inside a minute's window, outside 30s).
func answerTranscript(t *testing.T, cfg providertest.Config) string {
	var b strings.Builder
	for _, l := range []providertest.Limit{{Rate: 10, Burst: 5}, {Count: 3, Window: time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			c := cfg
			c.Limit, c.Headers = l, providertest.Headers{Binance: true}
			s := newServer(t, c)
			fmt.Fprintf(&b, "%v:\n", l)
			i := 0
			for _, step := range []struct {
				pause time.Duration
				n     int
			}{{0, 9}, {100 * time.Millisecond, 1}, {61 * time.Second, 3}, {2 * time.Minute, 2}, {40 * time.Second, 7}, {40 * time.Second, 7}} {
				time.Sleep(step.pause)
				for range step.n {
					start := time.Now()
					r := get(t, s.Client(), inMemory, "/api/v3/time", nil)
					transcribe(&b, i, r, time.Since(start))
					i++
				}
			}
			fmt.Fprintf(&b, "  stats %+v\n", s.Stats())
		})
	}
	return b.String()
}

// lieTranscript runs the lies' script against cfg on a stopped clock:
// ranged pages of 1m candles (7 rows twice, 3 rows, 1000 rows), the latest
// 7 (no startTime), a ranged page of 1h candles.
func lieTranscript(t *testing.T, cfg providertest.Config) string {
	listed := t0.Add(-24 * time.Hour).Truncate(time.Hour)
	cfg.Now = newClock(t0).Now
	cfg.Symbols = []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}
	s := newServer(t, cfg)
	q := func(iv string, start time.Time, end time.Time, limit int) url.Values {
		v := url.Values{"symbol": {"BTCUSDT"}, "interval": {iv}, "limit": {fmt.Sprint(limit)}}
		if !start.IsZero() {
			v.Set("startTime", ms(start))
		}
		if !end.IsZero() {
			v.Set("endTime", ms(end))
		}
		return v
	}
	var b strings.Builder
	for i, v := range []url.Values{
		q("1m", listed, time.Time{}, 7),
		q("1m", listed, time.Time{}, 7),
		q("1m", listed.Add(3*time.Minute), time.Time{}, 3),
		q("1m", time.Time{}, listed.Add(time.Hour), 7),
		q("1m", listed, time.Time{}, 1000),
		q("1h", listed, time.Time{}, 4),
	} {
		r, err := tryGet(t.Context(), noRedirects(s), inMemory, "/api/v3/klines", v)
		if err != nil {
			t.Fatal(err)
		}
		transcribe(&b, i, r, 0)
	}
	fmt.Fprintf(&b, "  stats %+v\n", s.Stats())
	return b.String()
}

// readGolden splits the golden file into its transcripts by case name.
func readGolden(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(legacyGolden)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, part := range strings.Split(string(raw), "=== ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		out[name] = body
	}
	return out
}

// TestTheOldConstantsAreValues pins that each Answer and Lie constant the
// structs replaced is reproduced byte for byte by its value: status, took,
// headers, body and Stats, against the transcripts the constants gave
// (testdata/legacy.golden), with the old ban and lie parameters as fields.
func TestTheOldConstantsAreValues(t *testing.T) {
	t.Parallel()
	golden := readGolden(t)
	check := func(name, got string) {
		t.Helper()
		want, ok := golden[name]
		if !ok {
			t.Fatalf("%s: no transcript in %s", name, legacyGolden)
		}
		if got != want {
			t.Errorf("%s: transcript differs from the old constant's\n got:\n%s\nwant:\n%s", name, got, want)
		}
		delete(golden, name)
	}
	for _, c := range []struct {
		name   string
		answer providertest.Answer
	}{
		{"429+retry-after", providertest.Answer{}},
		{"bare-429", providertest.Answer{NoRetryAfter: true}},
		{"503", providertest.Answer{Status: 503}},
		{"slow-down", providertest.Answer{SlowDown: true}},
		{"ban", providertest.Answer{BanAfter: 5}},
		{"ban after 3", providertest.Answer{BanAfter: 3}},
		{"ban after 3 in 30s for 90s", providertest.Answer{BanAfter: 3, BanWindow: 30 * time.Second, BanFor: 90 * time.Second}},
	} {
		check("answer "+c.name, answerTranscript(t, providertest.Config{Answer: c.answer}))
	}
	for _, c := range []struct {
		name string
		lie  providertest.Lie
	}{
		{"none", providertest.Lie{}},
		{"short pages", providertest.Lie{ShortPages: 500}},
		{"short pages of 4", providertest.Lie{ShortPages: 4}},
		{"null", providertest.Lie{Null: true}},
		{"empty", providertest.Lie{Empty: true}},
		{"dropped rows", providertest.Lie{DropRows: true}},
		{"reversed", providertest.Lie{Reversed: true}},
		{"shifted", providertest.Lie{Shifted: true}},
		{"shifted by -1m", providertest.Lie{Shifted: true, Shift: -time.Minute}},
		{"shifted by 90s", providertest.Lie{Shifted: true, Shift: 90 * time.Second}},
		{"newline", providertest.Lie{Newline: true}},
		{"redirect loop", providertest.Lie{RedirectLoop: true}},
		{"empty to every request", providertest.Lie{EmptyAll: true}},
	} {
		for _, after := range []int{0, 2} {
			for _, sparse := range []bool{false, true} {
				lie := c.lie
				if lie != (providertest.Lie{}) {
					lie.After = after // After without a lie was honest; it is refused now
				}
				name := c.name
				if after > 0 {
					name += ", after 2"
				}
				if sparse {
					name += ", sparse"
				}
				check("lie "+name, lieTranscript(t, providertest.Config{Lie: lie, Sparse: sparse}))
			}
		}
	}
	if len(golden) > 0 {
		t.Errorf("transcripts not checked: %v", slices.Sorted(maps.Keys(golden)))
	}
}
