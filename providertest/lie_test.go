package providertest_test

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// even keeps the candles that open at an even number of intervals since
// the epoch: a [providertest.Config.Sparse] provider's.
func even(k []providertest.Kline) []providertest.Kline {
	return slices.DeleteFunc(k, func(c providertest.Kline) bool { return c.OpenTime/60000%2 != 0 })
}

// TestLies pins every lie's answer to a request for ten candles, against
// KlinesAt's truth: which rows come back, in which order, at which times,
// with which values; LieAfter answers honestly first. A sparse provider's
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
		{"short pages", providertest.Config{Lie: providertest.LieShortPages, LieCap: 4}, ranged, func(k []providertest.Kline) []providertest.Kline { return k[:4] }, ""},
		{"short pages default cap", providertest.Config{Lie: providertest.LieShortPages}, ranged, id, ""},
		{"null", providertest.Config{Lie: providertest.LieNull}, ranged, nil, "null"},
		{"empty ranged", providertest.Config{Lie: providertest.LieEmpty}, ranged, nil, "[]"},
		{"empty answers the latest honestly", providertest.Config{Lie: providertest.LieEmpty}, latest, id, ""},
		{"dropped rows", providertest.Config{Lie: providertest.LieDropRows}, ranged, func(k []providertest.Kline) []providertest.Kline { return slices.Delete(k, 5, 6) }, ""},
		{"reversed", providertest.Config{Lie: providertest.LieReversed}, ranged, func(k []providertest.Kline) []providertest.Kline { slices.Reverse(k); return k }, ""},
		{"shifted by half", providertest.Config{Lie: providertest.LieShifted}, ranged, shift(30 * time.Second), ""},
		{"shifted back", providertest.Config{Lie: providertest.LieShifted, LieShift: -time.Minute}, ranged, shift(-time.Minute), ""},
		{"newline", providertest.Config{Lie: providertest.LieNewline}, ranged, func(k []providertest.Kline) []providertest.Kline {
			k[9].Volume += "\n" + ms(listed) + ",6.66,6.66,6.66,6.66,6.66"
			return k
		}, ""},
		{"empty to every request, ranged", providertest.Config{Lie: providertest.LieEmptyAll}, ranged, nil, "[]"},
		{"empty to every request, the latest too", providertest.Config{Lie: providertest.LieEmptyAll}, latest, nil, "[]"},
		{"sparse, ranged", providertest.Config{Sparse: true}, rangedTo, even, ""},
		{"sparse, the latest", providertest.Config{Sparse: true}, latest, even, ""},
		{"sparse, short pages", providertest.Config{Sparse: true, Lie: providertest.LieShortPages, LieCap: 3}, ranged, func(k []providertest.Kline) []providertest.Kline { return even(k)[:3] }, ""},
		{"sparse, reversed", providertest.Config{Sparse: true, Lie: providertest.LieReversed}, rangedTo, func(k []providertest.Kline) []providertest.Kline {
			k = even(k)
			slices.Reverse(k)
			return k
		}, ""},
		{"sparse before LieAfter", providertest.Config{Sparse: true, Lie: providertest.LieNull, LieAfter: 1}, rangedTo, even, ""},
		{"honest before LieAfter", providertest.Config{Lie: providertest.LieNull, LieAfter: 1}, ranged, id, ""},
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

// TestLieRedirectLoop: every klines request is redirected to itself, so a
// client gives up after its redirect limit; the redirects count as OK.
func TestLieRedirectLoop(t *testing.T) {
	t.Parallel()
	srv := newServer(t, providertest.Config{Now: newClock(t0).Now, Lie: providertest.LieRedirectLoop})
	_, err := tryGet(t.Context(), srv.Client(), inMemory, "/api/v3/klines", url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}})
	if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Fatalf("GET = %v, want the client to stop after 10 redirects", err)
	}
	if st := srv.Stats(); st.Requests != 10 || st.OK != 10 {
		t.Fatalf("stats %+v, want 10 requests answered (redirects)", st)
	}
}

// TestLieConfigErrors: bad lie settings name their field.
func TestLieConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  providertest.Config
		want string
	}{
		{providertest.Config{Lie: providertest.LieEmptyAll + 1}, "Config.Lie"},
		{providertest.Config{Lie: -1}, "Config.Lie"},
		{providertest.Config{LieAfter: -1}, "Config.LieAfter"},
		{providertest.Config{LieCap: -1}, "Config.LieCap"},
		{providertest.Config{LieShift: time.Microsecond}, "Config.LieShift"},
	} {
		if _, err := providertest.New(tc.cfg); !errors.Is(err, providertest.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("New(%+v) = %v, want an invalid-config error naming %s", tc.cfg, err, tc.want)
		}
	}
	if providertest.LieDropRows.String() != "dropped rows" || providertest.Lie(99).String() != "Lie(99)" {
		t.Fatalf("String: %q, %q", providertest.LieDropRows, providertest.Lie(99))
	}
}
