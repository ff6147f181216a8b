package budget_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// TestEchoesOfARefusalDoNotOpenTheBreaker: a provider with a window of a
// second, 80 ms away, called by 12 workers. Slow start overshoots the
// window with a dozen requests in flight; their 429s are one refusal and
// its echoes (sent before the pause the first one set), which the pause
// handles: the breaker does not count them as an outage and never opens,
// and the provider is served at 60% of its limit or more. Before, the
// echoes were a burst of failures that opened the breaker for 15 s, and
// the rate was then set from the time the breaker kept the caller idle:
// 8% of the limit over two minutes.
func TestEchoesOfARefusalDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(providertest.Config{Seed: 7, Limit: providertest.Limit{Count: 21, Window: time.Second},
			Latency: 80 * time.Millisecond, Jitter: 30 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		opened, cfg := countOpenings()
		p, err := budget.NewLocal("sim", cfg)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		ok := 0
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		drive(ctx, p, 12, simAttempt(srv.Client().Transport, func() { mu.Lock(); ok++; mu.Unlock() }))
		if got := float64(ok) / (21 * 60); opened.Load() > 0 || got < 0.6 {
			t.Fatalf("breaker opened %d times, %.0f%% of the limit served; want never, >= 60%%", opened.Load(), 100*got)
		}
	})
}

// TestAnOutageOf503sWithRetryAfterOpensTheBreaker: a provider down for
// maintenance answers every request 503 with Retry-After: 1, 400 ms away,
// to 12 workers, for a minute: the breaker opens. (Counting only each
// pause's first 503, the others being in flight when it came, the breaker
// saw about one failure a cycle and never opened.)
func TestAnOutageOf503sWithRetryAfterOpensTheBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		opened, cfg := countOpenings()
		p, err := budget.NewLocal("down", cfg)
		if err != nil {
			t.Fatal(err)
		}
		attempt := func(ctx context.Context) forage.Outcome {
			calls.Add(1)
			time.Sleep(400 * time.Millisecond)
			return forage.Outcome{Status: 503, RetryAfter: time.Second}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		drive(ctx, p, 12, attempt)
		if opened.Load() == 0 {
			t.Fatalf("a total outage of 503s never opened the breaker (%d calls)", calls.Load())
		}
	})
}

// TestBareRefusalsOfASpentWindowDoNotOpenTheBreaker: a fixed window of 24
// requests every 2 s that refuses with a bare 429 (no Retry-After, so no
// pause) refuses every request sent between its spending and its end, at
// any rate: a run of refusals the rate's cuts space out, from a provider
// that is up and says so. It is the controller's to pace, not an outage:
// the breaker never opens. (It opened for 15 s at the first window's end,
// in real time half of a 30 s run: 43% of the limit served.)
func TestBareRefusalsOfASpentWindowDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n       int
		w       time.Duration
		workers int
	}{{24, 2 * time.Second, 3}, {24, 2 * time.Second, 8}, {95, 5 * time.Second, 8}, {50, 5 * time.Second, 3}, {600, time.Minute, 8}} {
		workers := tc.workers
		synctest.Test(t, func(t *testing.T) {
			srv, err := providertest.New(providertest.Config{Seed: 11, Limit: providertest.Limit{Count: tc.n, Window: tc.w},
				Answer:  providertest.Answer{NoRetryAfter: true},
				Latency: 23 * time.Millisecond, Jitter: 7 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
			if err != nil {
				t.Fatal(err)
			}
			opened, cfg := countOpenings()
			p, err := budget.NewLocal("window", cfg)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			ok := 0
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			drive(ctx, p, workers, simAttempt(srv.Client().Transport, func() { mu.Lock(); ok++; mu.Unlock() }))
			if got := float64(ok) / (float64(tc.n) * max(1, 30/tc.w.Seconds())); opened.Load() > 0 || got < 0.6 {
				t.Errorf("%d/%v, %d workers: breaker opened %d times, %.0f%% of the limit served; want never, >= 60%%", tc.n, tc.w, workers, opened.Load(), 100*got)
			}
		})
	}
}

// countOpenings returns a Config whose breaker counts its openings in the
// counter returned beside it.
func countOpenings() (*atomic.Int64, budget.Config) {
	var opened atomic.Int64
	return &opened, budget.Config{Breaker: breaker.Config{OnTransition: func(tr breaker.Transition) {
		if tr.To == breaker.StateOpen {
			opened.Add(1)
		}
	}}}
}
