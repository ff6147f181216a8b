package gcra_test

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/forage-go/forage/gcra"
)

func ExampleNew() {
	lim, err := gcra.New(gcra.Config{Rate: 20, Burst: 5})
	if err != nil {
		panic(err)
	}
	fmt.Println(lim.Rate(), lim.Burst(), lim.Interval())

	_, err = gcra.New(gcra.Config{Rate: -3})
	fmt.Println(err)
	// Output:
	// 20 5 50ms
	// gcra: Config.Rate must be > 0 and finite (got -3)
}

func ExampleLimiter_AllowNAt() {
	lim, _ := gcra.New(gcra.Config{Rate: 20, Burst: 3})
	t0 := time.Unix(0, 0) // explicit times: any base works

	for range 4 {
		r := lim.AllowNAt(t0, 1)
		fmt.Printf("allowed=%v remaining=%d retry=%v reset=%v\n", r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter)
	}
	r := lim.AllowNAt(t0.Add(50*time.Millisecond), 1) // one interval later
	fmt.Printf("allowed=%v remaining=%d\n", r.Allowed, r.Remaining)

	r = lim.AllowNAt(t0, 4) // a cost above Burst can never conform
	fmt.Println(r.Allowed, r.RetryAfter == gcra.Never)
	// Output:
	// allowed=true remaining=2 retry=0s reset=50ms
	// allowed=true remaining=1 retry=0s reset=100ms
	// allowed=true remaining=0 retry=0s reset=150ms
	// allowed=false remaining=0 retry=50ms reset=150ms
	// allowed=true remaining=0
	// false true
}

func ExampleLimiter_WaitN() {
	lim, _ := gcra.New(gcra.Config{Rate: 1, Burst: 2})
	ctx := context.Background()

	// The burst is available, so these return at once; a third would wait
	// a second for its slot.
	for i := range 2 {
		if err := lim.WaitN(ctx, 1); err != nil {
			panic(err)
		}
		fmt.Println("request", i, "may go")
	}

	// A deadline before the next slot fails at once and books nothing.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	fmt.Println(lim.WaitN(short, 1) != nil)
	// Output:
	// request 0 may go
	// request 1 may go
	// true
}

func ExampleLimiter_ReserveNAt() {
	lim, _ := gcra.New(gcra.Config{Rate: 10, Burst: 1})
	t0 := time.Unix(0, 0)

	// A pacer that must send every request books them all and sleeps.
	for range 3 {
		fmt.Println(lim.ReserveNAt(t0, 1))
	}
	lim.UnreserveNAt(t0, 1) // the last one was abandoned: give it back
	fmt.Println(lim.ReserveNAt(t0, 1))
	// Output:
	// 0s
	// 100ms
	// 200ms
	// 200ms
}

func ExampleLimiter_SetRateAt() {
	lim, _ := gcra.New(gcra.Config{Rate: 10, Burst: 1})
	t0 := time.Unix(0, 0)
	lim.AllowNAt(t0, 1)
	fmt.Println("retry at 10/s:", lim.AllowNAt(t0, 1).RetryAfter)

	// Halving the rate doubles the booked backlog: the request already sent
	// now costs a 5/s interval, and no credit appears or vanishes.
	if err := lim.SetRateAt(t0, 5); err != nil {
		panic(err)
	}
	fmt.Println("retry at 5/s:", lim.AllowNAt(t0, 1).RetryAfter)
	// Output:
	// retry at 10/s: 100ms
	// retry at 5/s: 200ms
}

func ExampleLimiter_PauseUntil() {
	lim, _ := gcra.New(gcra.Config{Rate: 10, Burst: 3})
	t0 := time.Unix(0, 0)

	// The provider answered 429 with Retry-After: 2.
	lim.PauseUntil(t0.Add(2 * time.Second))

	fmt.Println(lim.AllowNAt(t0.Add(time.Second), 1).RetryAfter)
	at := t0.Add(2 * time.Second)
	fmt.Println(lim.AllowNAt(at, 1).Allowed, lim.AllowNAt(at, 1).RetryAfter) // paced, not bursted
	// Output:
	// 1s
	// true 100ms
}

func ExampleDecide() {
	// A store that keeps the theoretical arrival time in a database row runs
	// the same arithmetic as Limiter, in nanoseconds.
	tat := int64(math.MinInt64) // never used
	interval := int64(100 * time.Millisecond)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

	for range 3 {
		var r gcra.Result
		tat, r = gcra.Decide(tat, now, interval, 2, 1)
		fmt.Println(r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 100ms
}
