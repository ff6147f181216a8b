package budget_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
)

// tally is a budget.Metrics that counts attempts by class and stops by
// reason; github.com/forage-go/forage/metrics has real ones.
type tally struct {
	mu       sync.Mutex
	attempts map[forage.Class]int
	stops    map[forage.Reason]int
}

func (t *tally) Begin(key string, retry bool, wait time.Duration) {}
func (t *tally) End(key string, class forage.Class, latency time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.attempts[class]++
}
func (t *tally) Stop(key string, reason forage.Reason) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stops[reason]++
}
func (t *tally) Pause(key string, reason forage.Reason, d time.Duration) {}
func (t *tally) Rate(key string, rate, ceiling, share float64, cut bool) {}
func (t *tally) Breaker(key string, to breaker.State)                    {}
func (t *tally) Forget(key string)                                       {}

// ExampleMetrics gives every provider of a registry one Metrics, which
// hears of each attempt and of each call that ended without success.
func ExampleMetrics() {
	m := &tally{attempts: map[forage.Class]int{}, stops: map[forage.Reason]int{}}
	reg, _ := budget.NewRegistry(budget.RegistryConfig{
		Metrics:  m,
		Defaults: budget.Config{Adaptive: aimd.Config{Initial: 100}}, // setup: the second call need not wait
	})
	api, _ := reg.Get("api.example.com")
	for _, code := range []int{200, 404} {
		_ = api.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: code}
		})
	}
	fmt.Println("attempts:", m.attempts)
	fmt.Println("stops:", m.stops)
	// Output:
	// attempts: map[success:1 permanent:1]
	// stops: map[permanent:1]
}
