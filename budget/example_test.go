package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

// Example_composition shows the whole gate: one Provider per provider key,
// a run envelope, and an attempt that the gate paces, classifies and
// retries.
func Example_composition() {
	reg, _ := budget.NewRegistry(budget.RegistryConfig{
		// A known limit for one exchange; others are discovered.
		Overrides: map[string]budget.Config{
			"binance": {Limits: []budget.Limit{{Name: "weight/1m", Count: 6000, Per: time.Minute, Weighted: true}}},
		},
		Defaults: budget.Config{Adaptive: aimd.Config{Initial: 1000}}, // setup: keep the example fast
	})
	run, _ := budget.NewRun(budget.Envelope{MaxRequests: 3})

	kraken, _ := reg.Get("kraken") // made on first use, the same Provider ever after
	answers := []int{503, 200}     // the provider fails once, then answers
	calls := 0
	err := kraken.Do(context.Background(), run, func(ctx context.Context) forage.Outcome {
		calls++
		return forage.Outcome{Status: answers[calls-1]} // one outbound request here
	})
	fmt.Println("err:", err, "attempts:", calls, "run attempts:", run.Attempts())

	// The run allows one more attempt; the one after that stops the run.
	_ = kraken.Do(context.Background(), run, func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} })
	err = kraken.Do(context.Background(), run, func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} })
	var stop *budget.Error
	if errors.As(err, &stop) {
		fmt.Println("stopped:", stop.Reason, "exhausted:", stop.Reason.Exhausted(), "source pressure:", stop.Reason.SourcePressure())
	}
	// Output:
	// err: <nil> attempts: 2 run attempts: 2
	// stopped: request_cap exhausted: true source pressure: false
}

// ExampleNewRun shows a run envelope: a request cap and a deadline, checked
// at slice boundaries with ExhaustedAt.
func ExampleNewRun() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run, err := budget.NewRun(budget.Envelope{MaxRequests: 100, Deadline: start.Add(time.Minute)})
	if err != nil {
		panic(err)
	}
	for _, now := range []time.Time{start, start.Add(time.Minute)} {
		reason, spent := run.ExhaustedAt(now)
		fmt.Printf("spent=%v reason=%q\n", spent, reason)
	}
	// Output:
	// spent=false reason=""
	// spent=true reason="deadline"
}
