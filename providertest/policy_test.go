package providertest_test

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/providertest"
)

// ping sends one GET /api/v3/time through s's transport and returns the
// answer and how much (fake) time the round trip took.
func ping(tb fataler, s *providertest.Server) (result, time.Duration) {
	tb.Helper()
	start := time.Now()
	r := get(tb, s.Client(), inMemory, "/api/v3/time", nil)
	return r, time.Since(start)
}

// TestAnswers checks each rejecting Answer over a GCRA limit of 10/s burst 5:
// the burst is admitted, the next request gets the documented answer at once,
// and a request one emission interval later is admitted again.
func TestAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		answer     providertest.Answer
		status     int
		code       int
		retryAfter string
	}{
		{"429+retry-after", providertest.Answer{}, 429, -1003, "1"},
		{"429+retry-after, status given", providertest.Answer{Status: 429}, 429, -1003, "1"},
		{"bare-429", providertest.Answer{NoRetryAfter: true}, 429, -1003, ""},
		{"503", providertest.Answer{Status: 503}, 503, -1008, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := newServer(t, providertest.Config{Limit: providertest.Limit{Rate: 10, Burst: 5}, Answer: c.answer})
				for i := range 5 {
					if r, _ := ping(t, s); r.status != 200 {
						t.Fatalf("burst request %d: status %d", i, r.status)
					}
				}
				r, took := ping(t, s)
				code, _ := apiError(t, r.body)
				if r.status != c.status || code != c.code || r.header.Get("Retry-After") != c.retryAfter || took != 0 {
					t.Fatalf("over limit: %d code %d Retry-After %q took %v, want %d code %d Retry-After %q at once",
						r.status, code, r.header.Get("Retry-After"), took, c.status, c.code, c.retryAfter)
				}
				time.Sleep(100 * time.Millisecond)
				if r, _ := ping(t, s); r.status != 200 {
					t.Fatalf("after one interval: status %d", r.status)
				}
				st := s.Stats()
				rejected := st.Throttled + st.Unavailable
				if st.Requests != 7 || st.OK != 6 || rejected != 1 || st.MaxPerSecond != 6 || st.MaxArrivalsPerSecond != 7 {
					t.Fatalf("stats %+v", st)
				}
			})
		})
	}
}

// TestSlowDown checks Answer.SlowDown serves over-limit requests late, the
// delay growing with the excess, and counts them against the limit.
func TestSlowDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, providertest.Config{Limit: providertest.Limit{Rate: 10, Burst: 2}, Answer: providertest.Answer{SlowDown: true}, Latency: 5 * time.Millisecond})
		// Five requests at the same instant: two fit the burst, the rest are
		// served one emission interval (100ms) apart, all after the latency.
		took := make(chan time.Duration, 5)
		for range 5 {
			go func() {
				r, d := ping(t, s)
				if r.status != 200 {
					t.Errorf("status %d, want 200", r.status)
				}
				took <- d
			}()
		}
		got := map[time.Duration]int{}
		for range 5 {
			got[<-took]++
		}
		ms := time.Millisecond
		want := map[time.Duration]int{5 * ms: 2, 105 * ms: 1, 205 * ms: 1, 305 * ms: 1}
		for d, n := range want {
			if got[d] != n {
				t.Fatalf("round-trip times %v, want %v", got, want)
			}
		}
		st := s.Stats()
		if st.OK != 5 || st.SlowedDown != 3 || st.Throttled != 0 {
			t.Fatalf("stats %+v", st)
		}
		// At 305ms the slowed requests have pushed the theoretical arrival time
		// to 500ms: each further request, sent as soon as the last one returns,
		// still waits its turn (95ms) on top of the latency.
		for i := range 3 {
			if _, d := ping(t, s); d != 100*ms {
				t.Fatalf("follow-up %d took %v, want 100ms", i, d)
			}
		}
	})
}

// TestFixedWindow checks a window limit: aligned windows, Retry-After to the
// window's end, a fresh count in the next window, and slow-down into the
// window where the request fits.
func TestFixedWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, providertest.Config{Limit: providertest.Limit{Count: 3, Window: 10 * time.Second}, Headers: providertest.Headers{IETF: true}})
		time.Sleep(7 * time.Second) // the bubble starts at 2000-01-01T00:00:00Z: 3s left in the window
		for i := range 3 {
			r, _ := ping(t, s)
			if r.status != 200 || r.header.Get("RateLimit-Remaining") != []string{"2", "1", "0"}[i] || r.header.Get("RateLimit-Reset") != "3" {
				t.Fatalf("request %d: %d %v", i, r.status, r.header)
			}
		}
		r, _ := ping(t, s)
		if r.status != 429 || r.header.Get("Retry-After") != "3" || r.header.Get("RateLimit-Limit") != "3" {
			t.Fatalf("over window: %d %v", r.status, r.header)
		}
		time.Sleep(3 * time.Second)
		if r, _ := ping(t, s); r.status != 200 || r.header.Get("RateLimit-Remaining") != "2" {
			t.Fatalf("next window: %d %v", r.status, r.header)
		}

		slow := newServer(t, providertest.Config{Limit: providertest.Limit{Count: 2, Window: time.Second}, Answer: providertest.Answer{SlowDown: true}})
		time.Sleep(500 * time.Millisecond) // mid-window
		var took []time.Duration
		for range 2 {
			_, d := ping(t, slow)
			took = append(took, d)
		}
		_, d := ping(t, slow) // third in a window of 2: served at the next window's start
		if took[0] != 0 || took[1] != 0 || d != 500*time.Millisecond {
			t.Fatalf("slow-down took %v then %v, want 0 0 500ms", took, d)
		}
	})
}

// TestAdmitsAtTheRate checks a client pacing exactly at the limit is never
// rejected, for both algorithms.
func TestAdmitsAtTheRate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit providertest.Limit
		every time.Duration
	}{{providertest.Limit{Rate: 20, Burst: 1}, time.Second / 20}, {providertest.Limit{Count: 5, Window: time.Second}, time.Second / 5}} {
		synctest.Test(t, func(t *testing.T) {
			s := newServer(t, providertest.Config{Limit: c.limit})
			for i := range 200 {
				if r, _ := ping(t, s); r.status != 200 {
					t.Fatalf("%v: request %d at %v: status %d", c.limit, i, time.Now(), r.status)
				}
				time.Sleep(c.every)
			}
			if st := s.Stats(); st.OK != 200 || st.MaxPerSecond > int64(time.Second/c.every) {
				t.Fatalf("%v: stats %+v", c.limit, st)
			}
		})
	}
}

// TestBan checks Answer.BanAfter: 429s until BanAfter refusals within
// BanWindow, then 418 on everything for BanFor, then service again.
func TestBan(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, providertest.Config{Limit: providertest.Limit{Rate: 1, Burst: 1}, Answer: providertest.Answer{BanAfter: 3, BanWindow: time.Minute, BanFor: 2 * time.Minute}})
		for i, w := range []int{200, 429, 429, 418, 418} {
			if r, _ := ping(t, s); r.status != w {
				t.Fatalf("request %d: status %d, want %d", i, r.status, w)
			}
		}
		time.Sleep(time.Minute)
		r, _ := ping(t, s)
		code, _ := apiError(t, r.body)
		if r.status != 418 || code != -1003 || r.header.Get("Retry-After") != "60" {
			t.Fatalf("a minute into the ban: %d code %d Retry-After %q", r.status, code, r.header.Get("Retry-After"))
		}
		time.Sleep(time.Minute)
		if r, _ := ping(t, s); r.status != 200 {
			t.Fatalf("after the ban: status %d", r.status)
		}
		st := s.Stats()
		if st.Bans != 1 || st.Banned != 3 || st.Throttled != 2 || st.OK != 2 || st.Requests != 7 {
			t.Fatalf("stats %+v", st)
		}
		// Refusals spread wider than BanWindow never ban.
		for i := range 10 {
			time.Sleep(31 * time.Second)
			ping(t, s)
			if r, _ := ping(t, s); r.status != 429 {
				t.Fatalf("spread violation %d: status %d, want 429", i, r.status)
			}
		}
		if st := s.Stats(); st.Bans != 1 {
			t.Fatalf("spread violations banned: %+v", st)
		}
	})
}

// TestBanAfterAnyRefusal checks a ban counts the refusals of any Answer:
// bare 429s and 503s lead to the same 418 (with Retry-After) as 429s with
// Retry-After do, and each is counted as what it was.
func TestBanAfterAnyRefusal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		answer     providertest.Answer
		status     int
		retryAfter string
	}{
		{providertest.Answer{NoRetryAfter: true, BanAfter: 2}, 429, ""},
		{providertest.Answer{Status: 503, BanAfter: 2, BanFor: time.Minute}, 503, ""},
	} {
		synctest.Test(t, func(t *testing.T) {
			s := newServer(t, providertest.Config{Limit: providertest.Limit{Rate: 1, Burst: 1}, Answer: c.answer})
			ping(t, s)
			if r, _ := ping(t, s); r.status != c.status || r.header.Get("Retry-After") != c.retryAfter {
				t.Fatalf("%+v: first refusal %d Retry-After %q, want %d %q", c.answer, r.status, r.header.Get("Retry-After"), c.status, c.retryAfter)
			}
			want := retryAfterOf(c.answer.BanFor, 2*time.Minute)
			if r, _ := ping(t, s); r.status != 418 || r.header.Get("Retry-After") != want {
				t.Fatalf("%+v: second refusal %d Retry-After %q, want 418 %q", c.answer, r.status, r.header.Get("Retry-After"), want)
			}
			st := s.Stats()
			if st.Bans != 1 || st.Banned != 1 || st.Throttled+st.Unavailable != 1 || (c.status == 503) != (st.Unavailable == 1) {
				t.Fatalf("%+v: stats %+v", c.answer, st)
			}
		})
	}
}

// retryAfterOf is the Retry-After of a ban of d, or of def when d is zero.
func retryAfterOf(d, def time.Duration) string {
	if d == 0 {
		d = def
	}
	return strconv.Itoa(int(d / time.Second))
}

// TestLimitChanges checks the Schedule and SetLimit change the true limit
// mid-run and that Stats reports the limit in force.
func TestLimitChanges(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, providertest.Config{Limit: providertest.Limit{Rate: 100, Burst: 10}, Schedule: map[time.Duration]providertest.Limit{10 * time.Second: {Rate: 1, Burst: 1}}})
		burst := func() (ok int) {
			for range 10 {
				if r, _ := ping(t, s); r.status == 200 {
					ok++
				}
			}
			return ok
		}
		if n := burst(); n != 10 {
			t.Fatalf("before the change: %d of 10 admitted", n)
		}
		time.Sleep(10 * time.Second)
		if l := s.Stats().Limit; l != (providertest.Limit{Rate: 1, Burst: 1}) {
			t.Fatalf("limit at 10s: %v", l)
		}
		if n := burst(); n != 1 {
			t.Fatalf("after the change: %d of 10 admitted, want 1", n)
		}
		if err := s.SetLimit(providertest.Limit{Count: 4, Window: time.Second}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if n := burst(); n != 4 {
			t.Fatalf("after SetLimit: %d of 10 admitted, want 4", n)
		}
		if err := s.SetLimit(providertest.Limit{}); err != nil {
			t.Fatal(err)
		}
		if n := burst(); n != 10 {
			t.Fatalf("unlimited: %d of 10 admitted", n)
		}
	})
}

// TestWeightsAndBinanceHeaders checks per-path weights count against the
// limit and in X-MBX-USED-WEIGHT-1M, which resets each UTC minute.
func TestWeightsAndBinanceHeaders(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, providertest.Config{Limit: providertest.Limit{Count: 25, Window: time.Minute}, Weight: binanceWeight, Headers: providertest.Headers{Binance: true}})
		used := func(path string) (int, string) {
			r := get(t, s.Client(), inMemory, path, nil)
			return r.status, r.header.Get("X-Mbx-Used-Weight-1m")
		}
		steps := []struct {
			path   string
			status int
			used   string
		}{
			{"/api/v3/klines", 400, "2"}, // missing symbol: still weighed
			{"/api/v3/exchangeInfo", 200, "22"},
			{"/api/v3/time", 200, "23"},
			{"/api/v3/exchangeInfo", 429, "43"}, // rejected requests count too, as on Binance
			{"/api/v3/klines", 400, "45"},
		}
		for i, st := range steps {
			if status, u := used(st.path); status != st.status || u != st.used {
				t.Fatalf("step %d %s: %d used %s, want %d used %s", i, st.path, status, u, st.status, st.used)
			}
		}
		time.Sleep(time.Minute)
		if status, u := used("/api/v3/time"); status != 200 || u != "1" {
			t.Fatalf("next minute: %d used %s", status, u)
		}
	})
}

// TestConfigValidation checks bad configs fail with ErrInvalidConfig and a
// message naming the field, the rule and the value.
func TestConfigValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cfg  providertest.Config
		want string
	}{
		{providertest.Config{FaultRate: 1.5}, "providertest: Config.FaultRate must be in [0, 1] (got 1.5)"},
		{providertest.Config{Latency: -1}, "providertest: Config.Latency must be >= 0 (got -1ns)"},
		{providertest.Config{Jitter: -1}, "providertest: Config.Jitter must be >= 0 (got -1ns)"},
		{providertest.Config{Limit: providertest.Limit{Rate: 0, Burst: 1}}, "providertest: Config.Limit.Rate must be in (0, 1e9] for a GCRA limit (got 0)"},
		{providertest.Config{Limit: providertest.Limit{Count: 0, Window: time.Second}}, "providertest: Config.Limit.Count must be > 0 for a fixed-window limit (got 0)"},
		{providertest.Config{Limit: providertest.Limit{Rate: 5, Count: 3}}, "providertest: Config.Limit.Count must be zero, as must Window, when Rate is set (a GCRA or a fixed window, not both) (got 3)"},
		{providertest.Config{Limit: providertest.Limit{Burst: 5}}, "providertest: Config.Limit.Rate must be in (0, 1e9] for a GCRA limit (got 0)"},
		{providertest.Config{Limit: providertest.Limit{Window: time.Minute}}, "providertest: Config.Limit.Count must be > 0 for a fixed-window limit (got 0)"},
		{providertest.Config{Schedule: map[time.Duration]providertest.Limit{-time.Second: {}}}, "providertest: Config.Schedule must have offsets >= 0 (got -1s)"},
		{providertest.Config{Schedule: map[time.Duration]providertest.Limit{time.Second: {Rate: -1}}}, "providertest: Config.Schedule[1s].Rate must be in (0, 1e9] for a GCRA limit (got -1)"},
		{providertest.Config{Answer: providertest.Answer{Status: 418}}, "providertest: Config.Answer.Status must be 429 or 503 (got 418)"},
		{providertest.Config{Answer: providertest.Answer{Status: -1}}, "providertest: Config.Answer.Status must be 429 or 503 (got -1)"},
		{providertest.Config{Answer: providertest.Answer{BanAfter: -1}}, "providertest: Config.Answer.BanAfter must be >= 0 (got -1)"},
		{providertest.Config{Answer: providertest.Answer{BanAfter: 5, BanWindow: -time.Second}}, "providertest: Config.Answer.BanWindow must be >= 0 (got -1s)"},
		{providertest.Config{Answer: providertest.Answer{BanAfter: 5, BanFor: -time.Second}}, "providertest: Config.Answer.BanFor must be >= 0 (got -1s)"},
		{providertest.Config{Answer: providertest.Answer{BanWindow: time.Minute}}, "providertest: Config.Answer.BanWindow must be 0 when BanAfter is 0 (no ban) (got 1m0s)"},
		{providertest.Config{Answer: providertest.Answer{BanFor: time.Minute}}, "providertest: Config.Answer.BanFor must be 0 when BanAfter is 0 (no ban) (got 1m0s)"},
		{providertest.Config{Answer: providertest.Answer{Status: 503, NoRetryAfter: true}}, "providertest: Config.Answer.NoRetryAfter must be false with Status 503 (a 503 sends no Retry-After) (got true)"},
		{providertest.Config{Answer: providertest.Answer{SlowDown: true, Status: 429}}, "providertest: Config.Answer.Status must be 0 with SlowDown (a slow-down refuses nothing) (got 429)"},
		{providertest.Config{Answer: providertest.Answer{SlowDown: true, NoRetryAfter: true}}, "providertest: Config.Answer.NoRetryAfter must be false with SlowDown (a slow-down refuses nothing) (got true)"},
		{providertest.Config{Answer: providertest.Answer{SlowDown: true, BanAfter: 5}}, "providertest: Config.Answer.BanAfter must be 0 with SlowDown (a slow-down refuses nothing) (got 5)"},
		{providertest.Config{Answer: providertest.Answer{SlowDown: true, BanFor: time.Minute}}, "providertest: Config.Answer.BanFor must be 0 when BanAfter is 0 (no ban) (got 1m0s)"},
		{providertest.Config{Faults: []providertest.Fault{7}}, "providertest: Config.Faults[0] must be an HTTP status in [500, 599] or FaultReset (got 7)"},
		{providertest.Config{Symbols: []providertest.Symbol{{Name: "btc"}}}, `providertest: Config.Symbols[0].Name must be 1-20 of A-Z 0-9 - _ . (got "btc")`},
		{providertest.Config{Symbols: []providertest.Symbol{{Name: "A"}, {Name: "A"}}}, "providertest: Config.Symbols[1].Name must be unique (got A)"},
		{providertest.Config{Faults: []providertest.Fault{600}}, "providertest: Config.Faults[0] must be an HTTP status in [500, 599] or FaultReset (got 600)"},
		{providertest.Config{Faults: []providertest.Fault{0}}, "providertest: Config.Faults[0] must be an HTTP status in [500, 599] or FaultReset (got 0)"},
		{providertest.Config{Uplink: -1}, "providertest: Config.Uplink must be >= 0 (got -1ns)"},
		{providertest.Config{UplinkJitter: -time.Millisecond}, "providertest: Config.UplinkJitter must be >= 0 (got -1ms)"},
		{providertest.Config{UplinkTail: -time.Millisecond}, "providertest: Config.UplinkTail must be >= 0 (got -1ms)"},
		{providertest.Config{UplinkTail: time.Millisecond, UplinkTailShare: 1.5}, "providertest: Config.UplinkTailShare must be in [0, 1] (got 1.5)"},
		{providertest.Config{UplinkTail: time.Millisecond, UplinkTailShare: math.NaN()}, "providertest: Config.UplinkTailShare must be in [0, 1] (got NaN)"},
		{providertest.Config{UplinkTailShare: 0.1}, "providertest: Config.UplinkTailShare must be 0 when UplinkTail is 0 (got 0.1)"},
	}
	for i, c := range cases {
		_, err := providertest.New(c.cfg)
		if err == nil || err.Error() != c.want || !errors.Is(err, providertest.ErrInvalidConfig) {
			t.Fatalf("case %d: got %v, want %q wrapping ErrInvalidConfig", i, err, c.want)
		}
	}
	s := newServer(t, providertest.Config{})
	if err := s.SetLimit(providertest.Limit{Rate: -1, Burst: 0}); err == nil || !errors.Is(err, providertest.ErrInvalidConfig) {
		t.Fatalf("SetLimit(-1): %v", err)
	}
}

// TestHeaderFamilies checks each usage-header flag sends its own family
// only: the IETF policy names a fixed window's length in whole seconds
// (rounded up) and is absent for GCRA, and mixing families sends both.
func TestHeaderFamilies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		limit   providertest.Limit
		headers providertest.Headers
		want    map[string]string // header -> value; "" means absent
	}{
		{providertest.Limit{Count: 600, Window: 30 * time.Second}, providertest.Headers{IETFPolicy: true},
			map[string]string{"RateLimit-Policy": "600;w=30", "RateLimit-Limit": "", "X-Mbx-Used-Weight-1m": ""}},
		{providertest.Limit{Count: 5, Window: 1500 * time.Millisecond}, providertest.Headers{IETFPolicy: true, IETF: true},
			map[string]string{"RateLimit-Policy": "5;w=2", "RateLimit-Limit": "5", "RateLimit-Remaining": "4"}},
		{providertest.Limit{Rate: 17, Burst: 1}, providertest.Headers{IETFPolicy: true, IETF: true},
			map[string]string{"RateLimit-Policy": "", "RateLimit-Limit": "1", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"}},
		{providertest.Limit{Count: 600, Window: 30 * time.Second}, providertest.Headers{IETF: true, Binance: true},
			map[string]string{"RateLimit-Limit": "600", "RateLimit-Remaining": "599", "X-Mbx-Used-Weight-1m": "1", "RateLimit-Policy": ""}},
	}
	for i, c := range cases {
		s := newServer(t, providertest.Config{Now: newClock(t0).Now, Limit: c.limit, Headers: c.headers})
		r := get(t, s.Client(), inMemory, "/api/v3/time", nil)
		for k, v := range c.want {
			if got := r.header.Get(k); got != v {
				t.Fatalf("case %d (%v, headers %+v): %s = %q, want %q", i, c.limit, c.headers, k, got, v)
			}
		}
	}
}
