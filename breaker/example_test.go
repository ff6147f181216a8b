package breaker_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
)

func ExampleNew() {
	b, err := breaker.New(breaker.Config{Name: "exchange-x", MinRequests: 4})
	if err != nil {
		panic(err)
	}
	// Fewer than MinRequests outcomes: even all failures do not open it.
	for range 3 {
		done, err := b.Allow()
		if err != nil {
			panic(err)
		}
		done(forage.Transient)
	}
	fmt.Printf("%v %+v\n", b.State(), b.Counts())

	// The fourth failure in a row meets the floor, and four failures are at
	// least a sixth of the window's four outcomes: the burst rule opens it.
	done, _ := b.Allow()
	done(forage.Transient)
	_, err = b.Allow()
	fmt.Println(b.State(), errors.Is(err, breaker.ErrOpen))
	// Output:
	// closed {Requests:3 Successes:0 Failures:3 ConsecutiveSuccesses:0 ConsecutiveFailures:3}
	// open true
}

func ExampleBreaker_Allow() {
	b, _ := breaker.New(breaker.Config{})

	done, err := b.Allow()
	if err != nil {
		fmt.Println("fail fast:", err) // no request, no retry budget spent
		return
	}
	status := 404 // what the provider answered
	switch {
	case status == 429 || status >= 500:
		done(forage.Transient) // source pressure or transient
	default:
		done(forage.Success) // 2xx, and permanent 4xx: the provider is up
	}
	fmt.Printf("%+v\n", b.Counts())
	// Output:
	// {Requests:1 Successes:1 Failures:0 ConsecutiveSuccesses:1 ConsecutiveFailures:0}
}

func ExampleBreaker_Do() {
	b, _ := breaker.New(breaker.Config{})

	var body string
	err := b.Do(func() forage.Class {
		body = "page 1" // one request attempt through the host's fetcher
		return forage.Success
	})
	fmt.Println(body, err)

	// A cancelled attempt says nothing about the provider: it is not counted.
	_ = b.Do(func() forage.Class { return forage.Canceled })
	fmt.Println(b.Counts().Requests)
	// Output:
	// page 1 <nil>
	// 1
}

func ExampleConfig_onTransition() {
	b, _ := breaker.New(breaker.Config{
		Name:        "exchange-x",
		MinRequests: 2,
		OnTransition: func(t breaker.Transition) {
			// Safe to call back into the breaker from here.
			fmt.Println(t)
		},
	})
	// A partial outage: every other request fails, never two in a row. The
	// ratio rule opens the breaker once the window holds 6 × MinRequests
	// outcomes, half of them failures.
	for i := range 20 {
		o := forage.Success
		if i%2 == 1 {
			o = forage.Transient
		}
		_ = b.Do(func() forage.Class { return o })
	}
	// Output:
	// exchange-x: closed -> open (failure_ratio; requests=12 successes=6 failures=6 consecutive_successes=0 consecutive_failures=1)
}

func ExampleConfig_logger() {
	// Setup: a text logger without timestamps, so the output is stable.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))

	b, _ := breaker.New(breaker.Config{Name: "exchange-x", MinRequests: 1, Logger: logger})
	_ = b.Do(func() forage.Class { return forage.Transient })
	// Output:
	// level=WARN msg="breaker transition" breaker=exchange-x from=closed to=open reason=consecutive_failures requests=1 successes=0 failures=1 consecutive_failures=1
}
