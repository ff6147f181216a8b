package providertest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// TestKlinesPagingWalksListingToForming pages with startTime and limit from
// before the listing and checks every candle from the listing's to the
// forming one arrives exactly once, in order, the forming one last.
func TestKlinesPagingWalksListingToForming(t *testing.T) {
	t.Parallel()
	listed := t0.Add(-3*24*time.Hour - 13*time.Minute - 42*time.Second)
	for _, iv := range []string{"1m", "15m", "1h", "1d"} {
		t.Run(iv, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, providertest.Config{Now: newClock(t0).Now, Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
			d, _ := intervalDuration(iv)
			first, forming := listed.Truncate(d).UnixMilli(), t0.Truncate(d).UnixMilli()
			var all []providertest.Kline
			start := int64(0)
			for page := 0; ; page++ {
				ks := klines(t, s.Client(), url.Values{"symbol": {"BTCUSDT"}, "interval": {iv},
					"startTime": {strconv.FormatInt(start, 10)}, "limit": {"1000"}})
				all = append(all, ks...)
				if len(ks) < 1000 {
					break
				}
				start = ks[len(ks)-1].OpenTime + d.Milliseconds()
				if page > 100 {
					t.Fatal("paging does not end")
				}
			}
			if want := int((forming-first)/d.Milliseconds()) + 1; len(all) != want {
				t.Fatalf("got %d candles, want %d", len(all), want)
			}
			for i, k := range all {
				if want := first + int64(i)*d.Milliseconds(); k.OpenTime != want {
					t.Fatalf("candle %d opens at %d, want %d (gap or duplicate)", i, k.OpenTime, want)
				}
				if k.CloseTime != k.OpenTime+d.Milliseconds()-1 {
					t.Fatalf("candle %d: close time %d for open %d", i, k.CloseTime, k.OpenTime)
				}
				if i > 0 && all[i-1].Close != k.Open {
					t.Fatalf("candle %d opens at %s, previous closed at %s", i, k.Open, all[i-1].Close)
				}
			}
			if last := all[len(all)-1]; last.OpenTime != forming || last.CloseTime < t0.UnixMilli() {
				t.Fatalf("last candle opens %d closes %d, want the forming one opening %d", last.OpenTime, last.CloseTime, forming)
			}
		})
	}
}

// TestKlinesFormingCandleMoves checks the forming candle changes with now
// while closed candles stay put, and that once closed it has its final values.
func TestKlinesFormingCandleMoves(t *testing.T) {
	t.Parallel()
	s := newServer(t, providertest.Config{Now: newClock(t0).Now})
	q := providertest.Query{Symbol: "ETHUSDT", Interval: "1h", Limit: 3}
	hour := t0.Truncate(time.Hour)
	a, _ := s.KlinesAt(hour.Add(10*time.Minute), q)
	b, _ := s.KlinesAt(hour.Add(50*time.Minute), q)
	c, _ := s.KlinesAt(hour.Add(70*time.Minute), q)
	if len(a) != 3 || len(b) != 3 || len(c) != 3 {
		t.Fatalf("lengths %d %d %d, want 3", len(a), len(b), len(c))
	}
	if a[:2][0] != b[0] || a[1] != b[1] {
		t.Fatalf("closed candles changed while the last one formed:\n%v\n%v", a[:2], b[:2])
	}
	if a[2].OpenTime != b[2].OpenTime || a[2].Open != b[2].Open {
		t.Fatalf("forming candle moved its open: %v vs %v", a[2], b[2])
	}
	if a[2].Close == b[2].Close || a[2].Volume == b[2].Volume || a[2].Trades >= b[2].Trades {
		t.Fatalf("forming candle did not move with now: %v vs %v", a[2], b[2])
	}
	if c[1].OpenTime != b[2].OpenTime || c[1].Close != c[2].Open {
		t.Fatalf("closed candle %v does not close at the next open %v", c[1], c[2])
	}
}

// TestKlinesWindows pins the start/end/limit semantics on one server.
func TestKlinesWindows(t *testing.T) {
	t.Parallel()
	now := t0 // 12:00:30.5; listed 30 days before midnight
	s := newServer(t, providertest.Config{Now: newClock(now).Now})
	minute := now.Truncate(time.Minute)
	at := func(m int) int64 { return minute.Add(time.Duration(m) * time.Minute).UnixMilli() }
	cases := []struct {
		name        string
		q           providertest.Query
		n           int
		first, last int64
	}{
		{"no start: most recent 500, forming last", providertest.Query{}, 500, at(-499), at(0)},
		{"limit 5 without start", providertest.Query{Limit: 5}, 5, at(-4), at(0)},
		{"end only: last limit up to end", providertest.Query{End: minute.Add(-10 * time.Minute), Limit: 3}, 3, at(-12), at(-10)},
		{"end inside a candle keeps it", providertest.Query{End: minute.Add(-10*time.Minute + time.Second), Limit: 1}, 1, at(-10), at(-10)},
		{"start and end inclusive", providertest.Query{Start: minute.Add(-5 * time.Minute), End: minute.Add(-2 * time.Minute)}, 4, at(-5), at(-2)},
		{"start inside a candle skips it", providertest.Query{Start: minute.Add(-5*time.Minute + time.Millisecond), Limit: 2}, 2, at(-4), at(-3)},
		{"start near now reaches forming", providertest.Query{Start: minute.Add(-time.Minute)}, 2, at(-1), at(0)},
		{"limit over 1000 capped", providertest.Query{Start: minute.Add(-24 * time.Hour), Limit: 5000}, 1000, at(-1440), at(-441)},
		{"start after now: empty", providertest.Query{Start: minute.Add(time.Minute)}, 0, 0, 0},
		{"end before listing: empty", providertest.Query{End: time.UnixMilli(0)}, 0, 0, 0},
	}
	for _, c := range cases {
		c.q.Symbol, c.q.Interval = "BTCUSDT", "1m"
		ks, err := s.KlinesAt(now, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ks == nil || len(ks) != c.n {
			t.Fatalf("%s: got %d candles (nil=%v), want %d", c.name, len(ks), ks == nil, c.n)
		}
		if c.n > 0 && (ks[0].OpenTime != c.first || ks[len(ks)-1].OpenTime != c.last) {
			t.Fatalf("%s: got [%d, %d], want [%d, %d]", c.name, ks[0].OpenTime, ks[len(ks)-1].OpenTime, c.first, c.last)
		}
	}
	// Over HTTP too: the limit cap and the empty array.
	ks := klines(t, s.Client(), url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}, "limit": {"1001"}})
	if len(ks) != 1000 {
		t.Fatalf("limit=1001 over HTTP: %d candles, want 1000", len(ks))
	}
	r := get(t, s.Client(), inMemory, "/api/v3/klines", url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}, "startTime": {ms(now.Add(time.Hour))}})
	if r.status != 200 || string(r.body) != "[]" {
		t.Fatalf("future start: %d %s, want 200 []", r.status, r.body)
	}
}

// TestKlinesErrors checks each bad request gets 400 (or 404/405) with
// Binance's code, and that unknown symbols get exactly Binance's body.
func TestKlinesErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t, providertest.Config{Now: newClock(t0).Now})
	ok := url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}}
	with := func(k, v string) url.Values {
		p := url.Values{}
		for kk, vv := range ok {
			p[kk] = vv
		}
		if v == "" {
			p.Del(k)
		} else {
			p.Set(k, v)
		}
		return p
	}
	cases := []struct {
		path   string
		params url.Values
		status int
		code   int
	}{
		{"/api/v3/klines", with("symbol", "NOPEUSDT"), 400, -1121},
		{"/api/v3/klines", with("symbol", ""), 400, -1102},
		{"/api/v3/klines", with("interval", ""), 400, -1102},
		{"/api/v3/klines", with("interval", "7m"), 400, -1120},
		{"/api/v3/klines", with("startTime", "yesterday"), 400, -1100},
		{"/api/v3/klines", with("endTime", "-5"), 400, -1100},
		{"/api/v3/klines", with("limit", "0"), 400, -1100},
		{"/api/v3/klines", with("limit", "ten"), 400, -1100},
		{"/api/v3/klines", url.Values{"symbol": {"BTCUSDT"}, "interval": {"1m"}, "startTime": {"2000"}, "endTime": {"1000"}}, 400, -1023},
		{"/api/v3/nope", nil, 404, -1000},
	}
	for i, c := range cases {
		r := get(t, s.Client(), inMemory, c.path, c.params)
		code, _ := apiError(t, r.body)
		if r.status != c.status || code != c.code {
			t.Fatalf("case %d %s?%s: got %d code %d (%s), want %d code %d", i, c.path, c.params.Encode(), r.status, code, r.body, c.status, c.code)
		}
	}
	r := get(t, s.Client(), inMemory, "/api/v3/klines", with("symbol", "NOPEUSDT"))
	if string(r.body) != `{"code":-1121,"msg":"Invalid symbol."}` || r.header.Get("Content-Type") != "application/json;charset=UTF-8" {
		t.Fatalf("unknown symbol body %s content type %q", r.body, r.header.Get("Content-Type"))
	}
	resp, err := s.Client().Post(inMemory+"/api/v3/klines", "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %v %v, want 405", resp, err)
	}
	if st := s.Stats(); st.BadRequests != int64(len(cases))+2 || st.Requests != st.BadRequests {
		t.Fatalf("stats %+v, want %d bad requests and nothing else", st, len(cases)+2)
	}
}

// TestKlinesIntervalAlignment checks each interval's open times: epoch
// multiples, and Monday 00:00 UTC for 1w.
func TestKlinesIntervalAlignment(t *testing.T) {
	t.Parallel()
	s := newServer(t, providertest.Config{Now: newClock(t0).Now})
	for _, iv := range []string{"1s", "1m", "3m", "5m", "15m", "30m", "1h", "2h", "4h", "6h", "8h", "12h", "1d", "3d", "1w"} {
		d, ok := intervalDuration(iv)
		if !ok {
			t.Fatalf("interval %s unsupported", iv)
		}
		ks, err := s.KlinesAt(t0, providertest.Query{Symbol: "BNBUSDT", Interval: iv, Limit: 2})
		if err != nil || len(ks) != 2 {
			t.Fatalf("%s: %v, %d candles", iv, err, len(ks))
		}
		open := time.UnixMilli(ks[1].OpenTime).UTC()
		if iv == "1w" {
			if open.Weekday() != time.Monday || open.Truncate(24*time.Hour) != open || t0.Sub(open) >= d || t0.Before(open) {
				t.Fatalf("1w forming candle opens %v, want the Monday 00:00 before %v", open, t0)
			}
			continue
		}
		// Epoch multiples (time.Truncate counts from year 1, which differs for 3d).
		want := t0.UnixMilli() - t0.UnixMilli()%d.Milliseconds()
		if ks[1].OpenTime != want || ks[1].OpenTime-ks[0].OpenTime != d.Milliseconds() {
			t.Fatalf("%s: opens %v and %v, want forming %v", iv, ks[0].OpenTime, ks[1].OpenTime, want)
		}
	}
	if _, ok := intervalDuration("1M"); ok {
		t.Fatal("1M (calendar month) must be unsupported")
	}
}

// TestKlinesNotYetListed: a symbol listed after now has no candles.
func TestKlinesNotYetListed(t *testing.T) {
	t.Parallel()
	s := newServer(t, providertest.Config{Symbols: []providertest.Symbol{{Name: "NEWUSDT", Listed: t0.Add(time.Hour)}}})
	ks, err := s.KlinesAt(t0, providertest.Query{Symbol: "NEWUSDT", Interval: "1m"})
	if err != nil || ks == nil || len(ks) != 0 {
		t.Fatalf("got %v %v, want an empty slice", ks, err)
	}
	ks, _ = s.KlinesAt(t0.Add(150*time.Minute), providertest.Query{Symbol: "NEWUSDT", Interval: "1h"})
	if len(ks) != 2 || ks[0].OpenTime != t0.Add(time.Hour).Truncate(time.Hour).UnixMilli() {
		t.Fatalf("after listing: %v", ks)
	}
}

// TestExchangeInfoAndTime checks the two other endpoints.
func TestExchangeInfoAndTime(t *testing.T) {
	t.Parallel()
	s := newServer(t, providertest.Config{Now: newClock(t0).Now})
	var info struct {
		ServerTime int64
		Symbols    []struct{ Symbol, Status, BaseAsset, QuoteAsset string }
	}
	r := get(t, s.Client(), inMemory, "/api/v3/exchangeInfo", nil)
	if err := json.Unmarshal(r.body, &info); err != nil || r.status != 200 {
		t.Fatalf("exchangeInfo %d %s: %v", r.status, r.body, err)
	}
	if len(info.Symbols) != 3 || info.Symbols[0].Symbol != "BTCUSDT" || info.Symbols[0].Status != "TRADING" ||
		info.Symbols[0].BaseAsset != "BTC" || info.Symbols[0].QuoteAsset != "USDT" || info.ServerTime != t0.UnixMilli() {
		t.Fatalf("exchangeInfo %s", r.body)
	}
	r = get(t, s.Client(), inMemory, "/api/v3/time", nil)
	if string(r.body) != `{"serverTime":`+ms(t0)+`}` {
		t.Fatalf("time %s", r.body)
	}
	first, err := s.KlinesAt(t0, providertest.Query{Symbol: "BTCUSDT", Interval: "1m", Start: time.UnixMilli(1), Limit: 1})
	if listed := t0.Truncate(24 * time.Hour).Add(-30 * 24 * time.Hour); err != nil || len(first) != 1 || first[0].OpenTime != listed.UnixMilli() {
		t.Fatalf("first candle = %v %v, want one at the default listing %v", first, err, listed)
	}
}
