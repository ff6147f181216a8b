package budget_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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
		srv, err := providertest.New(providertest.Config{Seed: 7, Limit: providertest.WindowLimit(21, time.Second), Answer: providertest.Answer429,
			Latency: 80 * time.Millisecond, Jitter: 30 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		var opened atomic.Int64
		p, err := budget.NewLocal("sim", budget.Config{Breaker: breaker.Config{OnTransition: func(tr breaker.Transition) {
			if tr.To == breaker.StateOpen {
				opened.Add(1)
			}
		}}})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		ok := 0
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		drive(ctx, p, 12, simAttempt(srv.Transport(), func() { mu.Lock(); ok++; mu.Unlock() }))
		if got := float64(ok) / (21 * 60); opened.Load() > 0 || got < 0.6 {
			t.Fatalf("breaker opened %d times, %.0f%% of the limit served; want never, >= 60%%", opened.Load(), 100*got)
		}
	})
}
