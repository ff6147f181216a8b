package providertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/forage-go/forage/providertest"
)

// t0 is a fixed instant in the middle of a minute, for tests on a fixed clock.
var t0 = time.Date(2024, 3, 1, 12, 0, 30, 500e6, time.UTC)

// clock is a settable clock for tests outside synctest that never wait.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// fataler is the part of testing.TB the helpers need; *rapid.T has it too.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// newServer builds a server or fails the test.
func newServer(tb fataler, cfg providertest.Config) *providertest.Server {
	tb.Helper()
	s, err := providertest.New(cfg)
	if err != nil {
		tb.Fatalf("providertest.New: %v", err)
	}
	return s
}

// result is one answered request.
type result struct {
	status int
	header http.Header
	body   []byte
}

// get sends GET path?params through c and reads the whole answer.
func get(tb fataler, c *http.Client, base, path string, params url.Values) result {
	tb.Helper()
	r, err := tryGet(context.Background(), c, base, path, params)
	if err != nil {
		tb.Fatalf("GET %s?%s: %v", path, params.Encode(), err)
	}
	return r
}

// tryGet is get returning the transport error instead of failing.
func tryGet(ctx context.Context, c *http.Client, base, path string, params url.Values) (result, error) {
	u := base + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return result{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, body}, err
}

// inMemory is the base URL used with the in-memory transport (any host works).
const inMemory = "http://sim.test"

// klines fetches and parses one klines page through c, failing on non-200.
func klines(tb fataler, c *http.Client, params url.Values) []providertest.Kline {
	tb.Helper()
	r := get(tb, c, inMemory, "/api/v3/klines", params)
	if r.status != http.StatusOK {
		tb.Fatalf("klines %s: status %d body %s", params.Encode(), r.status, r.body)
	}
	ks, err := parseKlines(r.body)
	if err != nil {
		tb.Fatalf("klines %s: %v", params.Encode(), err)
	}
	return ks
}

// apiError decodes a Binance error body, failing if it is not one.
func apiError(tb fataler, body []byte) (code int, msg string) {
	tb.Helper()
	var e struct {
		Code *int   `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code == nil {
		tb.Fatalf("not a Binance error body: %s (%v)", body, err)
	}
	return *e.Code, e.Msg
}

// ms formats t as a Binance millisecond parameter.
func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// parseKlines decodes a klines response body (Binance's array of arrays).
func parseKlines(body []byte) ([]providertest.Kline, error) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal(body, &rows); err != nil {
		return nil, fmt.Errorf("parse klines: %w", err)
	}
	out := make([]providertest.Kline, len(rows))
	for i, row := range rows {
		if len(row) < 11 {
			return nil, fmt.Errorf("parse klines: row %d has %d fields, want 12", i, len(row))
		}
		k := &out[i]
		dst := []any{&k.OpenTime, &k.Open, &k.High, &k.Low, &k.Close, &k.Volume,
			&k.CloseTime, &k.QuoteVolume, &k.Trades, &k.TakerBase, &k.TakerQuote}
		for j, d := range dst {
			if err := json.Unmarshal(row[j], d); err != nil {
				return nil, fmt.Errorf("parse klines: row %d field %d: %w", i, j, err)
			}
		}
	}
	return out, nil
}

// intervalDuration returns the length of a Binance interval name the server
// supports, such as "1m" or "1d", and false for any other.
func intervalDuration(name string) (time.Duration, bool) {
	d, ok := map[string]time.Duration{
		"1s": time.Second, "1m": time.Minute, "3m": 3 * time.Minute, "5m": 5 * time.Minute,
		"15m": 15 * time.Minute, "30m": 30 * time.Minute, "1h": time.Hour, "2h": 2 * time.Hour,
		"4h": 4 * time.Hour, "6h": 6 * time.Hour, "8h": 8 * time.Hour, "12h": 12 * time.Hour,
		"1d": 24 * time.Hour, "3d": 72 * time.Hour, "1w": 7 * 24 * time.Hour,
	}[name]
	return d, ok
}

// maxKlineLimit is the most candles one klines answer holds, as Binance
// caps them (see Query.Limit).
const maxKlineLimit = 1000

// binanceWeight is a Config.Weight with Binance spot's weights: klines 2,
// exchangeInfo 20, everything else 1.
func binanceWeight(path string) int {
	switch path {
	case "/api/v3/klines":
		return 2
	case "/api/v3/exchangeInfo":
		return 20
	}
	return 1
}
