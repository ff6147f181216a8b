package budget_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

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

	answers := []int{503, 200} // the provider fails once, then answers
	calls := 0
	err := reg.Provider("kraken").Do(context.Background(), run, func(ctx context.Context) budget.Outcome {
		calls++
		return budget.Outcome{Status: answers[calls-1]} // one outbound request here
	})
	fmt.Println("err:", err, "attempts:", calls, "run attempts:", run.Attempts())

	// The run allows one more attempt; the one after that stops the run.
	_ = reg.Provider("kraken").Do(context.Background(), run, func(context.Context) budget.Outcome { return budget.Outcome{Status: 200} })
	err = reg.Provider("kraken").Do(context.Background(), run, func(context.Context) budget.Outcome { return budget.Outcome{Status: 200} })
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

// ExampleReason shows the two families of stop reasons.
func ExampleReason() {
	for _, r := range []budget.Reason{budget.ReasonRequestCap, budget.ReasonThrottled, budget.ReasonPermanent} {
		fmt.Printf("%-12s exhausted=%-5v source_pressure=%v\n", r, r.Exhausted(), r.SourcePressure())
	}
	// Output:
	// request_cap  exhausted=true  source_pressure=false
	// throttled    exhausted=false source_pressure=true
	// permanent    exhausted=false source_pressure=false
}

// ExampleFromHTTP builds an Outcome from a response: status, Retry-After and
// rate-limit headers.
func ExampleFromHTTP() {
	resp := httpResponse(429, map[string]string{"Retry-After": "2", "X-MBX-USED-WEIGHT-1M": "1180"})
	out := budget.FromHTTP(resp, nil)
	fmt.Println(out.Status, out.RetryAfter, out.Limit.Used, out.Limit.Window)
	// Output:
	// 429 2s 1180 1m0s
}

// httpResponse is example setup: a response with the given status and
// headers and an empty body.
func httpResponse(code int, headers map[string]string) *http.Response {
	h := http.Header{}
	for k, v := range headers {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody}
}
