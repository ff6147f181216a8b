package retry_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/retry"
)

func ExampleNewBudget() {
	b, err := retry.NewBudget(retry.BudgetConfig{Ratio: 0.2, MinRetries: 2})
	if err != nil {
		panic(err)
	}
	// A fresh run may retry twice (the floor) before any success.
	fmt.Println(b.Withdraw(), b.Withdraw(), b.Withdraw())
	// Ten first attempts at ratio 0.2 earn two more retries.
	for range 10 {
		b.Deposit()
	}
	fmt.Println(b.Withdraw(), b.Withdraw(), b.Withdraw())
	s := b.Stats()
	fmt.Printf("attempts=%d retries=%d denied=%d tokens=%.1f\n", s.Attempts, s.Retries, s.Denied, s.Tokens)
	// Output:
	// true true false
	// true true false
	// attempts=10 retries=4 denied=2 tokens=0.0
}

func ExampleBudget_Withdraw() {
	b, _ := retry.NewBudget(retry.BudgetConfig{MinRetries: retry.NoRetries})
	if !b.Withdraw() {
		fmt.Println("defer the rest of the run:", retry.ErrBudgetExhausted)
	}
	// Output:
	// defer the rest of the run: retry: retry budget exhausted
}

func ExampleNewBackoff() {
	b, err := retry.NewBackoff(retry.BackoffConfig{
		Base: 100 * time.Millisecond,
		Cap:  time.Second,
		Rand: func() float64 { return 0.5 }, // deterministic for the example: always mid-range
	})
	if err != nil {
		panic(err)
	}
	for range 6 {
		fmt.Println(b.NextBackOff())
	}
	// Output:
	// 50ms
	// 100ms
	// 200ms
	// 400ms
	// 500ms
	// 500ms
}

func ExampleFloor() {
	b, _ := retry.NewBackoff(retry.BackoffConfig{Base: time.Second, Rand: func() float64 { return 0.25 }})
	// The server's Retry-After is a floor: the jitter applies when it is longer.
	fmt.Println(retry.Floor(b.NextBackOff(), 2*time.Second)) // jitter 250ms < Retry-After
	fmt.Println(retry.Floor(b.NextBackOff(), 0))             // no Retry-After: jitter 500ms
	// Output:
	// 2s
	// 500ms
}

// The Backoff plugs into cenkalti/backoff's retry loop and wrappers.
func ExampleBackoff_withMaxRetries() {
	b, _ := retry.NewBackoff(retry.BackoffConfig{Base: time.Second, Rand: func() float64 { return 0.5 }})
	calls := 0
	op := func() error {
		calls++
		return errors.New("503")
	}
	notify := func(err error, d time.Duration) { fmt.Println("retry after", d) }
	err := backoff.RetryNotifyWithTimer(op, backoff.WithMaxRetries(b, 2), notify, instantTimer{})
	fmt.Println(calls, "calls:", err)
	// Output:
	// retry after 500ms
	// retry after 1s
	// 3 calls: 503
}

// instantTimer is a backoff.Timer that fires at once, so the example does
// not sleep.
type instantTimer struct{}

func (instantTimer) Start(time.Duration) {}
func (instantTimer) Stop()               {}
func (instantTimer) C() <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

// One attempt's retry decision: classify, take a token, sleep the larger of
// full jitter and Retry-After.
func Example() {
	budget, _ := retry.NewBudget(retry.BudgetConfig{})
	bo, _ := retry.NewBackoff(retry.BackoffConfig{Rand: func() float64 { return 0.5 }})

	budget.Deposit() // a first attempt...
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3"}}}

	out := forage.FromHTTP(resp, nil)
	if c := out.Class(); c.Retryable() && budget.Withdraw() {
		fmt.Println(c, "retry in", retry.Floor(bo.NextBackOff(), out.RetryAfter))
	}
	// Output:
	// throttled retry in 3s
}
