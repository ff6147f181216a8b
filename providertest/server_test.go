package providertest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/providertest"
)

// TestFaults checks each fault kind's answer through the in-memory transport
// and that faults are counted, not served.
func TestFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fault  providertest.Fault
		status int
	}{{http.StatusInternalServerError, 500}, {http.StatusBadGateway, 502}, {http.StatusServiceUnavailable, 503}, {http.StatusGatewayTimeout, 504}, {599, 599}, {providertest.FaultReset, 0}}
	for _, c := range cases {
		s := newServer(t, providertest.Config{Now: newClock(t0).Now, FaultRate: 1, Faults: []providertest.Fault{c.fault}})
		r, err := tryGet(context.Background(), s.Client(), inMemory, "/api/v3/time", nil)
		if c.fault == providertest.FaultReset {
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("reset: got %v, want an error wrapping ECONNRESET", err)
			}
		} else if err != nil || r.status != c.status {
			t.Fatalf("%v: got %d %v, want %d", c.fault, r.status, err, c.status)
		}
		if c.fault == http.StatusServiceUnavailable && string(r.body) != "503 Service Unavailable\n" {
			t.Fatalf("503 fault: body %q, want a plain-text one (not the JSON refusal of Answer{Status: 503})", r.body)
		}
		if st := s.Stats(); st.Faults != 1 || st.OK != 0 || st.Requests != 1 || st.MaxPerSecond != 1 {
			t.Fatalf("%v: stats %+v", c.fault, st)
		}
	}
}

// TestDeterministicGivenSeed checks the same seed and the same requests give
// the same faults and latencies, and another seed gives others.
func TestDeterministicGivenSeed(t *testing.T) {
	t.Parallel()
	run := func(seed uint64) (trace []any) {
		synctest.Test(t, func(t *testing.T) {
			s := newServer(t, providertest.Config{Seed: seed, FaultRate: 0.3, Jitter: 50 * time.Millisecond})
			for range 100 {
				start := time.Now()
				r, err := tryGet(context.Background(), s.Client(), inMemory, "/api/v3/time", nil)
				trace = append(trace, r.status, err != nil, time.Since(start))
			}
		})
		return trace
	}
	a, b, c := run(7), run(7), run(8)
	same := func(x, y []any) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatalf("seed 7 twice differs:\n%v\n%v", a, b)
	}
	if same(a, c) {
		t.Fatal("seeds 7 and 8 gave identical traces")
	}
}

// TestLatencyHonoursContext checks latency is waited out on the (fake) clock
// and that a context ending first ends the request with its error.
func TestLatencyHonoursContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, providertest.Config{Latency: 50 * time.Millisecond, Jitter: 10 * time.Millisecond})
		for i := range 20 {
			if _, d := ping(t, s); d < 50*time.Millisecond || d >= 60*time.Millisecond {
				t.Fatalf("request %d took %v, want [50ms, 60ms)", i, d)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := tryGet(ctx, s.Client(), inMemory, "/api/v3/time", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want deadline exceeded", err)
		}
		cancel()
		if _, err := tryGet(ctx, s.Client(), inMemory, "/api/v3/time", nil); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ended context: got %v", err)
		}
		if st := s.Stats(); st.Requests != 21 {
			t.Fatalf("a request with an ended context reached the server: %+v", st)
		}
	})
}

// TestLoopback serves real HTTP on 127.0.0.1: candles, a Binance error, the
// usage header, and an injected reset arriving as a transport error.
func TestLoopback(t *testing.T) {
	t.Parallel()
	s := newServer(t, providertest.Config{Headers: providertest.Headers{Binance: true}})
	l := httptest.NewServer(s)
	defer l.Close()
	c := &http.Client{Timeout: 10 * time.Second}
	r := get(t, c, l.URL, "/api/v3/klines", url.Values{"symbol": {"BTCUSDT"}, "interval": {"1h"}, "limit": {"3"}})
	ks, err := parseKlines(r.body)
	if r.status != 200 || err != nil || len(ks) != 3 || r.header.Get("X-Mbx-Used-Weight-1m") == "" {
		t.Fatalf("klines over loopback: %d %v %d candles %v", r.status, err, len(ks), r.header)
	}
	r = get(t, c, l.URL, "/api/v3/klines", url.Values{"symbol": {"XUSDT"}, "interval": {"1h"}})
	if r.status != 400 || string(r.body) != `{"code":-1121,"msg":"Invalid symbol."}` {
		t.Fatalf("unknown symbol over loopback: %d %s", r.status, r.body)
	}

	faulty := newServer(t, providertest.Config{FaultRate: 1, Faults: []providertest.Fault{providertest.FaultReset}})
	fl := httptest.NewServer(faulty)
	defer fl.Close()
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if _, err := tryGet(context.Background(), fresh, fl.URL, "/api/v3/time", nil); err == nil {
		t.Fatal("reset over loopback: no error")
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Logf("reset arrived as %v (not ECONNRESET; platform-dependent)", err)
	}
	if st := faulty.Stats(); st.Faults != 1 || st.Requests != 1 {
		t.Fatalf("faulty stats %+v", st)
	}
}

// BenchmarkTransportKlines measures one full klines page (1000 candles)
// served in memory: the cost a simulation pays per page.
func BenchmarkTransportKlines(b *testing.B) {
	s := newServer(b, providertest.Config{Now: newClock(t0).Now})
	c := s.Client()
	u := inMemory + "/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=1000"
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(u)
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(resp, err)
		}
		resp.Body.Close()
	}
}

// BenchmarkTransportLimited measures the admission path under contention: a
// GCRA limit and the time endpoint from parallel clients.
func BenchmarkTransportLimited(b *testing.B) {
	s := newServer(b, providertest.Config{Now: newClock(t0).Now, Limit: providertest.Limit{Rate: 1e6, Burst: 1000}, Headers: providertest.Headers{Binance: true, IETF: true}})
	c := s.Client()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(inMemory + "/api/v3/time")
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
}

// TestDateIsTheServersClock: every answer carries a Date from the server's
// clock (Config.Now), in memory and over HTTP, as a real server's says its
// own: a client reads from it how far behind the provider runs.
func TestDateIsTheServersClock(t *testing.T) {
	t.Parallel()
	behind := time.Now().Add(-15 * time.Minute).UTC().Truncate(time.Second)
	s, err := providertest.New(providertest.Config{Now: func() time.Time { return behind }})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Get("http://sim/api/v3/time")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v3/time", nil))
	for path, h := range map[string]http.Header{"in memory": resp.Header, "ServeHTTP": rec.Result().Header} {
		if d, err := http.ParseTime(h.Get("Date")); err != nil || !d.Equal(behind) {
			t.Errorf("%s: Date %q (%v), want the server's clock %v", path, h.Get("Date"), err, behind)
		}
	}
}
