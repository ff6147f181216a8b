package providertest_test

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/providertest"
)

// even keeps the candles that open at an even number of intervals since
// the epoch: a [providertest.Config.Sparse] provider's.
func even(k []providertest.Kline) []providertest.Kline {
	return slices.DeleteFunc(k, func(c providertest.Kline) bool { return c.OpenTime/60000%2 != 0 })
}

// TestLies pins every lie's answer to a request for ten candles, against
// KlinesAt's truth: which rows come back, in which order, at which times,
// with which values; Lie.After answers honestly first. A sparse provider's
// answers leave the odd candles out from the first, and a lie is told
// about them.
func TestLies(t *testing.T) {
	t.Parallel()
	listed := t0.Add(-24 * time.Hour).Truncate(time.Minute)
	ranged := url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}, "startTime": {ms(listed)}, "limit": {"10"}}
	rangedTo := url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}, "startTime": {ms(listed)}, "endTime": {ms(listed.Add(9 * time.Minute))}, "limit": {"10"}}
	latest := url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}, "endTime": {ms(listed.Add(9 * time.Minute))}, "limit": {"10"}}
	for _, tc := range []struct {
		name  string
		cfg   providertest.Config
		query url.Values
		want  func(truth []providertest.Kline) []providertest.Kline // nil: the body is checked by body
		body  string
	}{
		{"none", providertest.Config{}, ranged, id, ""},
		{"short pages", providertest.Config{Lie: providertest.Lie{ShortPages: 4}}, ranged, func(k []providertest.Kline) []providertest.Kline { return k[:4] }, ""},
		{"short pages of 500", providertest.Config{Lie: providertest.Lie{ShortPages: 500}}, ranged, id, ""},
		{"null", providertest.Config{Lie: providertest.Lie{Null: true}}, ranged, nil, "null"},
		{"empty ranged", providertest.Config{Lie: providertest.Lie{Empty: true}}, ranged, nil, "[]"},
		{"empty answers the latest honestly", providertest.Config{Lie: providertest.Lie{Empty: true}}, latest, id, ""},
		{"dropped rows", providertest.Config{Lie: providertest.Lie{DropRows: true}}, ranged, func(k []providertest.Kline) []providertest.Kline { return slices.Delete(k, 5, 6) }, ""},
		{"reversed", providertest.Config{Lie: providertest.Lie{Reversed: true}}, ranged, func(k []providertest.Kline) []providertest.Kline { slices.Reverse(k); return k }, ""},
		{"shifted by half", providertest.Config{Lie: providertest.Lie{Shifted: true}}, ranged, shift(30 * time.Second), ""},
		{"shifted back", providertest.Config{Lie: providertest.Lie{Shifted: true, Shift: -time.Minute}}, ranged, shift(-time.Minute), ""},
		{"newline", providertest.Config{Lie: providertest.Lie{Newline: true}}, ranged, func(k []providertest.Kline) []providertest.Kline {
			k[9].Volume += "\n" + ms(listed) + ",6.66,6.66,6.66,6.66,6.66"
			return k
		}, ""},
		{"empty to every request, ranged", providertest.Config{Lie: providertest.Lie{EmptyAll: true}}, ranged, nil, "[]"},
		{"empty to every request, the latest too", providertest.Config{Lie: providertest.Lie{EmptyAll: true}}, latest, nil, "[]"},
		{"sparse, ranged", providertest.Config{Sparse: true}, rangedTo, even, ""},
		{"sparse, the latest", providertest.Config{Sparse: true}, latest, even, ""},
		{"sparse, short pages", providertest.Config{Sparse: true, Lie: providertest.Lie{ShortPages: 3}}, ranged, func(k []providertest.Kline) []providertest.Kline { return even(k)[:3] }, ""},
		{"sparse, reversed", providertest.Config{Sparse: true, Lie: providertest.Lie{Reversed: true}}, rangedTo, func(k []providertest.Kline) []providertest.Kline {
			k = even(k)
			slices.Reverse(k)
			return k
		}, ""},
		{"sparse before Lie.After", providertest.Config{Sparse: true, Lie: providertest.Lie{Null: true, After: 1}}, rangedTo, even, ""},
		{"honest before Lie.After", providertest.Config{Lie: providertest.Lie{Null: true, After: 1}}, ranged, id, ""},
	} {
		cfg := tc.cfg
		cfg.Now = newClock(t0).Now
		cfg.Symbols = []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}
		srv := newServer(t, cfg)
		truth, err := srv.KlinesAt(t0, providertest.Query{Symbol: "BTCUSDT", Interval: "1m", Start: listed, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		r := get(t, srv.Client(), inMemory, "/api/v3/klines", tc.query)
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d", tc.name, r.status)
		}
		if tc.want == nil {
			if string(r.body) != tc.body {
				t.Fatalf("%s: body %q, want %q", tc.name, r.body, tc.body)
			}
			continue
		}
		got, err := parseKlines(r.body)
		if want := tc.want(truth); err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: %v\n got %+v\nwant %+v", tc.name, err, got, want)
		}
		if st := srv.Stats(); st.OK != 1 || st.Candles != int64(len(got)) {
			t.Fatalf("%s: stats %+v, want 1 OK with %d candles", tc.name, st, len(got))
		}
	}
}

func id(k []providertest.Kline) []providertest.Kline { return k }

// shift returns a want func moving every open and close time by d.
func shift(d time.Duration) func([]providertest.Kline) []providertest.Kline {
	return func(k []providertest.Kline) []providertest.Kline {
		for i := range k {
			k[i].OpenTime += d.Milliseconds()
			k[i].CloseTime += d.Milliseconds()
		}
		return k
	}
}

// TestRedirectLoop: with Lie.RedirectLoop, every klines request is
// redirected to itself, so a client gives up after its redirect limit; the
// redirects count as OK.
func TestRedirectLoop(t *testing.T) {
	t.Parallel()
	srv := newServer(t, providertest.Config{Now: newClock(t0).Now, Lie: providertest.Lie{RedirectLoop: true}})
	_, err := tryGet(t.Context(), srv.Client(), inMemory, "/api/v3/klines", url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}})
	if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Fatalf("GET = %v, want the client to stop after 10 redirects", err)
	}
	if st := srv.Stats(); st.Requests != 10 || st.OK != 10 {
		t.Fatalf("stats %+v, want 10 requests answered (redirects)", st)
	}
}

// TestRowLiesCombine: every set of row lies is told as each alone, in the
// order of Lie's fields (short pages, dropped rows, shift, reversed,
// newline), honest or sparse.
func TestRowLiesCombine(t *testing.T) {
	t.Parallel()
	listed := t0.Add(-24 * time.Hour).Truncate(time.Minute)
	rangedTo := url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}, "startTime": {ms(listed)}, "endTime": {ms(listed.Add(19 * time.Minute))}, "limit": {"20"}}
	type step = func([]providertest.Kline) []providertest.Kline
	steps := []struct {
		set  func(*providertest.Lie)
		tell step
	}{
		{func(l *providertest.Lie) { l.ShortPages = 7 }, func(k []providertest.Kline) []providertest.Kline { return k[:min(len(k), 7)] }},
		{func(l *providertest.Lie) { l.DropRows = true }, func(k []providertest.Kline) []providertest.Kline {
			if len(k) < 3 {
				return k
			}
			return slices.Delete(k, len(k)/2, len(k)/2+1)
		}},
		{func(l *providertest.Lie) { l.Shifted, l.Shift = true, -time.Minute }, shift(-time.Minute)},
		{func(l *providertest.Lie) { l.Reversed = true }, func(k []providertest.Kline) []providertest.Kline { slices.Reverse(k); return k }},
		{func(l *providertest.Lie) { l.Newline = true }, func(k []providertest.Kline) []providertest.Kline {
			k[len(k)-1].Volume += "\n" + strconv.FormatInt(k[0].OpenTime, 10) + ",6.66,6.66,6.66,6.66,6.66"
			return k
		}},
	}
	for set := range 1 << len(steps) {
		for _, sparse := range []bool{false, true} {
			var lie providertest.Lie
			var tell []step
			for i, st := range steps {
				if set&(1<<i) != 0 {
					st.set(&lie)
					tell = append(tell, st.tell)
				}
			}
			srv := newServer(t, providertest.Config{Now: newClock(t0).Now, Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}, Lie: lie, Sparse: sparse})
			want, err := srv.KlinesAt(t0, providertest.Query{Symbol: "BTCUSDT", Interval: "1m", Start: listed, End: listed.Add(19 * time.Minute), Limit: 20})
			if err != nil {
				t.Fatal(err)
			}
			if sparse {
				want = even(want)
			}
			for _, f := range tell {
				want = f(want)
			}
			got, err := parseKlines(get(t, srv.Client(), inMemory, "/api/v3/klines", rangedTo).body)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("%+v sparse %v: %v\n got %+v\nwant %+v", lie, sparse, err, got, want)
			}
		}
	}
}

// TestLieConfigErrors: bad lie settings name their field, the rule and the
// value; an answer lie combined with another lie names both.
func TestLieConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lie  providertest.Lie
		want string
	}{
		{providertest.Lie{After: -1, Null: true}, "providertest: Config.Lie.After must be >= 0 (got -1)"},
		{providertest.Lie{After: 3}, "providertest: Config.Lie.After must be 0 without a lie to start (got 3)"},
		{providertest.Lie{ShortPages: -1}, "providertest: Config.Lie.ShortPages must be >= 0 (got -1)"},
		{providertest.Lie{Shifted: true, Shift: time.Microsecond}, "providertest: Config.Lie.Shift must be whole milliseconds (got 1µs)"},
		{providertest.Lie{Shift: time.Minute}, "providertest: Config.Lie.Shift must be 0 unless Shifted is set (got 1m0s)"},
		{providertest.Lie{Null: true, Reversed: true}, "providertest: Config.Lie.Null must combine with no other lie: it replaces the whole answer (got Reversed, Null)"},
		{providertest.Lie{Empty: true, ShortPages: 5}, "providertest: Config.Lie.Empty must combine with no other lie: it replaces the whole answer (got ShortPages, Empty)"},
		{providertest.Lie{EmptyAll: true, Shifted: true}, "providertest: Config.Lie.EmptyAll must combine with no other lie: it replaces the whole answer (got Shifted, EmptyAll)"},
		{providertest.Lie{RedirectLoop: true, Newline: true}, "providertest: Config.Lie.RedirectLoop must combine with no other lie: it replaces the whole answer (got Newline, RedirectLoop)"},
		{providertest.Lie{Null: true, Empty: true}, "providertest: Config.Lie.Null must combine with no other lie: it replaces the whole answer (got Null, Empty)"},
		{providertest.Lie{EmptyAll: true, RedirectLoop: true, DropRows: true}, "providertest: Config.Lie.EmptyAll must combine with no other lie: it replaces the whole answer (got DropRows, EmptyAll, RedirectLoop)"},
	} {
		_, err := providertest.New(providertest.Config{Lie: tc.lie})
		if err == nil || err.Error() != tc.want || !errors.Is(err, providertest.ErrInvalidConfig) {
			t.Errorf("New(Lie %+v) = %v, want %q wrapping ErrInvalidConfig", tc.lie, err, tc.want)
		}
	}
}

// TestEveryDrawnLieIsAServersLie: whatever Lies draws, a Server takes it
// (a generator that drew a Lie its Config refuses would end a property
// test at its first run with a config error, not a finding), and every
// kind of lie is drawn.
func TestEveryDrawnLieIsAServersLie(t *testing.T) {
	seen := map[string]bool{}
	rapid.Check(t, func(rt *rapid.T) {
		step := rapid.SampledFrom([]time.Duration{time.Minute, time.Hour, 24 * time.Hour}).Draw(rt, "step")
		l := providertest.Lies(step).Draw(rt, "lie")
		if _, err := providertest.New(providertest.Config{Lie: l}); err != nil {
			rt.Fatalf("%+v: %v", l, err)
		}
		for name, on := range map[string]bool{
			"short": l.ShortPages > 0, "drop": l.DropRows, "shift": l.Shifted, "reversed": l.Reversed,
			"newline": l.Newline, "null": l.Null, "empty": l.Empty, "emptyAll": l.EmptyAll, "redirect": l.RedirectLoop,
		} {
			seen[name] = seen[name] || on
		}
	})
	if len(seen) != 9 || slices.Contains(slices.Collect(maps.Values(seen)), false) {
		t.Errorf("lies never drawn: %v", seen)
	}
}
