package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// ExampleRecordStore keeps a provider's record across a restart: the
// first process learns a rate and is told "429, Retry-After: 120"; the
// next one, built on the same store (a checkpoint file store in production),
// starts at the learned rate rather than the conservative start, and does
// not call the provider until the two minutes are over.
func ExampleRecordStore() {
	store := checkpoint.NewMemoryStore(checkpoint.Config{}) // setup: a file store survives a real restart
	cfg := budget.RegistryConfig{Records: store}

	first, _ := budget.NewRegistry(cfg)
	start := time.Now()
	api, _ := first.Get("api.example.com")
	_ = api.Do(context.Background(), nil, func(context.Context) forage.Outcome {
		return forage.Outcome{Status: 429, RetryAfter: 120 * time.Second}
	})
	learned := api.Snapshot()

	// The process restarts: a new registry, the same store.
	next, _ := budget.NewRegistry(cfg)
	api, _ = next.Get("api.example.com")
	restarted := api.Snapshot()
	fmt.Println("same rate and ceiling:", restarted.Rate == learned.Rate && restarted.Ceiling == learned.Ceiling)
	err := api.Do(context.Background(), nil, func(context.Context) forage.Outcome {
		panic("never called during the pause")
	})
	var stop *budget.Error
	if errors.As(err, &stop) {
		fmt.Println(stop.Reason, "for", stop.Until.Sub(start).Round(time.Minute))
	}
	// Output:
	// same rate and ceiling: true
	// throttled for 2m0s
}

// ExampleConfig_maxPause: a hostile or garbled header cannot park a caller
// for days; the pause is clamped to MaxPause (1 hour unless set).
func ExampleConfig_maxPause() {
	p, _ := budget.NewLocal("api.example.com", budget.Config{MaxPause: 10 * time.Minute})
	start := time.Now()
	err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
		return forage.Outcome{Status: 429, RetryAfter: 72 * time.Hour} // "Retry-After: 99999999999999999999"
	})
	var stop *budget.Error
	if errors.As(err, &stop) {
		fmt.Println(stop.Reason, "for", stop.Until.Sub(start).Round(time.Minute))
	}
	// Output: throttled for 10m0s
}

// ExampleConfig_banPause: a ban (418) that says nothing of how long it
// lasts still pauses the provider, for BanPause (1 minute unless set),
// twice as long for each further ban in a row; calls in the meantime stop
// as banned without a request, since calling early only extends a ban.
func ExampleConfig_banPause() {
	p, _ := budget.NewLocal("api.example.com", budget.Config{MaxWait: time.Second})
	start := time.Now()
	err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
		return forage.Outcome{Status: 418} // no Retry-After
	})
	var stop *budget.Error
	if errors.As(err, &stop) {
		fmt.Println(stop.Reason, "for", stop.Until.Sub(start).Round(time.Minute))
	}
	err = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
		panic("never called during the ban")
	})
	if errors.As(err, &stop) {
		fmt.Println("next call:", stop.Reason)
	}
	// Output:
	// banned for 1m0s
	// next call: banned
}
