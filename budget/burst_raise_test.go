package budget_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// TestARaisedBurstIsEarnedNotGranted: the default pacer lets two requests
// go back to back once the controller has measured a burst allowance (see
// budget.Config.Burst), and the controller measures it at a refusal, when
// the provider has next to none of it left. The raised burst is earned by
// idling, not granted at once: with workers always waiting at the pacer,
// no two requests go out closer than an interval of the rate. (Granted at
// once, the pacer let a second request go right behind the first: three
// streams 34 ms from 47.4/s with an allowance of 24, refusing with a bare
// 429 and banning at five, drew their fifth refused request so, and a ban,
// in 3 runs of 6.)
func TestARaisedBurstIsEarnedNotGranted(t *testing.T) {
	for _, k := range []struct {
		rate  float64
		burst int
		bare  bool
	}{
		{50, 10, false},
		{47.4, 24, true},
		{35.9, 12, true},
	} {
		t.Run(fmt.Sprintf("%g/s burst %d, bare %v", k.rate, k.burst, k.bare), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv, err := providertest.New(providertest.Config{Seed: 1, Limit: providertest.Limit{Rate: k.rate, Burst: k.burst},
					Answer: providertest.Answer{NoRetryAfter: k.bare}, Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond,
					Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
				if err != nil {
					t.Fatal(err)
				}
				p, err := budget.NewLocal("sim", budget.Config{})
				if err != nil {
					t.Fatal(err)
				}
				type send struct {
					at   time.Time
					rate float64
				}
				var mu sync.Mutex
				var sends []send
				inner := simAttempt(srv.Client().Transport, nil)
				attempt := func(ctx context.Context) forage.Outcome {
					mu.Lock()
					sends = append(sends, send{time.Now(), p.Snapshot().Rate})
					mu.Unlock()
					return inner(ctx)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				drive(ctx, p, 8, attempt)
				for i := 1; i < len(sends); i++ {
					gap := sends[i].at.Sub(sends[i-1].at)
					if iv := time.Duration(float64(time.Second) / max(sends[i].rate, sends[i-1].rate)); gap < iv*9/10 {
						t.Errorf("request %d sent %v after the one before, at %.1f/s (interval %v)", i, gap, sends[i].rate, iv)
					}
				}
			})
		})
	}
}
