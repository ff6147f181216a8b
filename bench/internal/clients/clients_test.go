package clients_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/bench/internal/clients"
	"github.com/forage-go/forage/providertest"
)

// url is what the workers request in these tests; the in-memory transport
// serves any host.
const url = "http://sim/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=1"

// drive runs f with 4 workers against a fresh server for cfg for run of
// simulated time, and returns the server's stats and how long f took to
// return after its context ended.
func drive(t *testing.T, cfg providertest.Config, f clients.Func, run time.Duration) (providertest.Stats, time.Duration) {
	t.Helper()
	var st providertest.Stats
	var late time.Duration
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), run)
		defer cancel()
		start := time.Now()
		f(ctx, srv.Client().Transport, url, 4)
		late = time.Since(start) - run
		st = srv.Stats()
	})
	return st, late
}

// TestEveryClientRunsAndStops runs each client against a 20/s burst-1 GCRA
// answering 429 with Retry-After for 20 simulated seconds: each gets
// requests through and returns when its context ends.
func TestEveryClientRunsAndStops(t *testing.T) {
	t.Parallel()
	cfg := providertest.Config{Limit: providertest.Limit{Rate: 20, Burst: 1}, Latency: 5 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}}
	for name, f := range map[string]clients.Func{
		"forage": clients.Forage, "crawl": clients.Crawl, "rate": clients.Rate(20), "aws": clients.AWS,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, late := drive(t, cfg, f, 20*time.Second)
			if st.OK < 100 || st.OK > 20*20+1 || late > time.Second {
				t.Fatalf("%s: %d ok of %d requests, returned %v after the end; want 100 to 401 ok, back within 1s", name, st.OK, st.Requests, late)
			}
		})
	}
}

// TestRatePacesAtItsGuess checks the x/time/rate client sends at its guess,
// whatever the worker count, against an unlimited provider.
func TestRatePacesAtItsGuess(t *testing.T) {
	t.Parallel()
	st, _ := drive(t, providertest.Config{}, clients.Rate(10), 10*time.Second)
	if st.Requests < 99 || st.Requests > 101 {
		t.Fatalf("10/s for 10s sent %d requests, want 100±1", st.Requests)
	}
}

// TestRateWaitsOutRetryAfter checks a refused worker sleeps the provider's
// Retry-After: at 2x a fixed window's pace, it sends little past the quota.
func TestRateWaitsOutRetryAfter(t *testing.T) {
	t.Parallel()
	cfg := providertest.Config{Limit: providertest.Limit{Count: 10, Window: 10 * time.Second}}
	st, _ := drive(t, cfg, clients.Rate(2), 30*time.Second)
	if st.OK < 30 || st.OK > 31 || st.Throttled > 4*3 {
		t.Fatalf("stats %+v: want 30 ok (3 windows of 10; 31 with one sent at the 30s edge) and at most one refusal per worker per window", st)
	}
}

// TestRefusalAndRetryAfter pins the statuses read as refusals and the
// parsing of Retry-After.
func TestRefusalAndRetryAfter(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]bool{429: true, 503: true, 418: true, 200: false, 500: false, 502: false} {
		if got := clients.Refusal(status); got != want {
			t.Errorf("Refusal(%d) = %v, want %v", status, got, want)
		}
	}
	for i, c := range []struct {
		header string
		want   time.Duration
	}{{"3", 3 * time.Second}, {"0", 0}, {"", time.Second}, {"-1", time.Second}, {"Wed, 21 Oct 2015 07:28:00 GMT", time.Second}} {
		resp := &http.Response{Header: http.Header{}}
		if c.header != "" {
			resp.Header.Set("Retry-After", c.header)
		}
		if got := clients.RetryAfter(resp, time.Second); got != c.want {
			t.Errorf("case %d: RetryAfter(%q) = %v, want %v", i, c.header, got, c.want)
		}
	}
}
