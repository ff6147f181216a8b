package budget_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// ExampleNewTransport puts the gate under an http.Client: every host is
// paced at its learned rate, with its own breaker, and a request that is
// safe to replay is retried within the retry budget. A POST without an
// Idempotency-Key is sent once, whatever the answer.
func ExampleNewTransport() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // setup: the provider sheds load once
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	reg, _ := budget.NewRegistry(budget.RegistryConfig{})
	client := &http.Client{Transport: budget.NewTransport(reg, nil)}
	// Bound requests with their context, not http.Client.Timeout (which
	// also counts the wait for a pacing slot).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/ticker", nil)
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), "after", hits.Load(), "requests")

	hits.Store(0)
	post, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/orders", strings.NewReader("buy 1"))
	resp, err = client.Do(post)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", hits.Load(), "request")
	// Output:
	// 200 ok after 2 requests
	// 503 after 1 request
}
