package budget_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// TestPacerCatchesUpWhereTheProviderAllowsIt: once the controller has
// measured a burst allowance at the provider (50/s with a burst of 10), the
// default pacer lets a second request go right behind the first after an
// idle spell, so a slot its timer woke late for is made up at the next one
// (paced one interval apart, a busy machine's late timers cost about 4% of
// a 50/s rate, real time); against a provider that allows no burst, or with
// a Burst the host set, it never does.
func TestPacerCatchesUpWhereTheProviderAllowsIt(t *testing.T) {
	for _, c := range []struct {
		rate     float64
		burst    int
		cfgBurst int
		together bool
	}{
		{50, 10, 0, true},
		{17, 1, 0, false},
		{50, 10, 1, false}, // the host's 1 holds: one interval apart
		{50, 10, 3, true},  // the host's 3 holds
	} {
		t.Run(fmt.Sprintf("%.0f/s burst %d, Burst %d", c.rate, c.burst, c.cfgBurst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, err := providertest.New(providertest.Config{Seed: 1, Limit: providertest.Limit{Rate: c.rate, Burst: c.burst},
					Latency: 3 * time.Millisecond, Jitter: 3 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
				if err != nil {
					t.Fatal(err)
				}
				p, err := budget.NewLocal("sim", budget.Config{Burst: c.cfgBurst})
				if err != nil {
					t.Fatal(err)
				}
				attempt := simAttempt(srv.Client().Transport, nil)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				drive(ctx, p, 4, attempt)
				cancel()
				time.Sleep(5 * time.Second) // idle: the pacer and the provider refill
				var starts [2]time.Time
				done := make(chan int, 2)
				for i := range 2 {
					go func() {
						_ = p.Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
							starts[i] = time.Now()
							return attempt(ctx)
						})
						done <- i
					}()
				}
				<-done
				<-done
				gap := starts[1].Sub(starts[0]).Abs()
				if together := gap == 0; together != c.together {
					t.Errorf("after an idle spell, the second request went %v after the first; want together %v", gap, c.together)
				}
			})
		})
	}
}
