package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

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
	fmt.Printf("attempts=%d retries=%d denied=%d tokens=%.1f\n", b.Attempts(), b.Retries(), b.Denied(), b.Tokens())
	// Output:
	// true true false
	// true true false
	// attempts=10 retries=4 denied=2 tokens=0.0
}

func ExampleBudget_TryWithdraw() {
	b, _ := retry.NewBudget(retry.BudgetConfig{MinRetries: retry.NoRetries})
	if err := b.TryWithdraw(); errors.Is(err, retry.ErrBudgetExhausted) {
		fmt.Println("defer the rest of the run:", err)
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

func ExampleBackoff_NextAfter() {
	b, _ := retry.NewBackoff(retry.BackoffConfig{Base: time.Second, Rand: func() float64 { return 0.25 }})
	// The server's Retry-After is a floor: the jitter applies when it is longer.
	fmt.Println(b.NextAfter(2 * time.Second)) // jitter 250ms < Retry-After
	fmt.Println(b.NextAfter(0))               // no Retry-After: jitter 500ms
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

func ExampleParseRetryAfter() {
	now := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Fri, 01 Mar 2024 12:00:30 GMT", "Fri, 01 Mar 2024 11:00:00 GMT", "1.5", "999999999"} {
		d, ok := retry.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "Fri, 01 Mar 2024 12:00:30 GMT": 30s true
	// "Fri, 01 Mar 2024 11:00:00 GMT": 0s true
	// "1.5": 0s false
	// "999999999": 72h0m0s true
}

func ExampleParseRateLimit() {
	now := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("X-MBX-USED-WEIGHT-1M", "1150") // Binance: weight used this minute
	rl, _ := retry.ParseRateLimit(h, now)
	fmt.Println(rl.Used, rl.Window, rl.Has(retry.FieldLimit))

	h = http.Header{}
	h.Set("RateLimit", "limit=100, remaining=3, reset=12")
	rl, _ = retry.ParseRateLimit(h, now)
	fmt.Println(rl.Limit, rl.Remaining, rl.Reset)
	// Output:
	// 1150 1m0s false
	// 100 3 12s
}

func ExampleClassify() {
	fmt.Println(retry.Classify(&http.Response{StatusCode: http.StatusTooManyRequests}, nil))
	fmt.Println(retry.Classify(&http.Response{StatusCode: http.StatusTeapot}, nil)) // Binance IP ban
	fmt.Println(retry.Classify(&http.Response{StatusCode: http.StatusServiceUnavailable}, nil))
	fmt.Println(retry.Classify(&http.Response{StatusCode: http.StatusBadGateway}, nil))
	fmt.Println(retry.Classify(&http.Response{StatusCode: http.StatusNotFound}, nil))
	fmt.Println(retry.Classify(nil, context.DeadlineExceeded)) // the attempt's own timeout
	fmt.Println(retry.Classify(nil, context.Canceled))
	c := retry.Classify(nil, errors.New("bad json"))
	fmt.Println(c, c.Retryable())
	// Output:
	// throttled
	// throttled
	// overloaded
	// transient
	// permanent
	// transient
	// canceled
	// permanent false
}

// One attempt's retry decision: classify, take a token, sleep the larger of
// full jitter and Retry-After.
func Example() {
	now := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	budget, _ := retry.NewBudget(retry.BudgetConfig{})
	bo, _ := retry.NewBackoff(retry.BackoffConfig{Rand: func() float64 { return 0.5 }})

	budget.Deposit() // a first attempt...
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3"}}}

	if c := retry.Classify(resp, nil); c.Retryable() && budget.Withdraw() {
		ra, _ := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), now)
		fmt.Println(c, "retry in", bo.NextAfter(ra))
	}
	// Output:
	// throttled retry in 3s
}
