package aimd_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

func ExampleNew() {
	c, err := aimd.New(aimd.Config{}) // the zero Config: all defaults
	if err != nil {
		panic(err)
	}
	s := c.Snapshot()
	fmt.Println("rate", s.Rate, "phase", s.Phase) // Config.Initial until the first response

	_, err = aimd.New(aimd.Config{Decrease: 1.5})
	fmt.Println(err)
	fmt.Println(errors.Is(err, aimd.ErrInvalidConfig))
	// Output:
	// rate 4 phase start
	// aimd: Config.Decrease must be in (0, 1) (got 1.5)
	// true
}

// A conservative start, slow start on success, then one decrease for a whole
// burst of 429s: the requests in flight when the first 429 arrived.
func ExampleController_ObserveAt() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := aimd.New(aimd.Config{})
	fmt.Printf("before any response: %.0f/s\n", c.Snapshot().Rate)

	// A second of successes, each request sent 1/rate after the last: the
	// rate doubles per 250ms of success, at most x1.5 per response.
	now := start
	for now.Before(start.Add(time.Second)) {
		now = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: 30 * time.Millisecond})
	}
	fmt.Printf("after 1s of success: %.1f/s (%s)\n", c.Snapshot().Rate, c.Snapshot().Phase)

	// Four 429s for requests all sent before the first 429 came back: one
	// decrease (leaving slow start: x0.6), from the rate the first of them
	// was sent at, just under which the ceiling is set; the other three
	// (echoes) confirm it was a real overshoot.
	sent := now.Add(-30 * time.Millisecond)
	for i := range 4 {
		at := now.Add(time.Duration(i) * 10 * time.Millisecond)
		c.ObserveAt(at, aimd.Signal{Class: forage.Throttled, Sent: sent.Add(time.Duration(i) * 10 * time.Millisecond)})
	}
	s := c.Snapshot()
	fmt.Printf("after the burst: %.1f/s, ceiling %.1f/s, %d decrease (%s)\n", s.Rate, s.Ceiling, s.Decreases, s.Phase)
	// Output:
	// before any response: 4/s
	// after 1s of success: 24.3/s (slow-start)
	// after the burst: 12.8/s, ceiling 20.3/s, 1 decrease (recover)
}

// A Retry-After pauses the provider; a later, shorter one never shortens the
// pause.
func ExampleController_Snapshot_pause() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := aimd.New(aimd.Config{})

	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, RetryAfter: 30 * time.Second})
	fmt.Println("paused for", c.Snapshot().PausedUntil.Sub(now))

	c.ObserveAt(now.Add(time.Second), aimd.Signal{Class: forage.Throttled, RetryAfter: 5 * time.Second})
	fmt.Println("still paused for", c.Snapshot().PausedUntil.Sub(now))
	// Output:
	// paused for 30s
	// still paused for 30s
}

// Rate-limit headers of a fixed window pace directly: the rest of the window
// spread evenly, over Limit/Window only to spend what is left by the reset
// (a window entered late), and a pause when it is spent.
func ExampleSignal_quota() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := aimd.New(aimd.Config{})

	c.ObserveAt(now, aimd.Signal{Class: forage.Success, Quota: forage.Quota{
		Limit: 1200, Remaining: 600, Reset: 40 * time.Second, Window: time.Minute,
		HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true,
	}})
	fmt.Printf("%.0f/s\n", c.Snapshot().Rate) // 600 left over 40s

	c.ObserveAt(now, aimd.Signal{Class: forage.Success, Quota: forage.Quota{
		Limit: 1200, Remaining: 600, Reset: 10 * time.Second, Window: time.Minute,
		HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true,
	}})
	fmt.Printf("%.0f/s\n", c.Snapshot().Rate) // 600 left with 10s to go: spent by the reset, over 1200/min

	c.ObserveAt(now, aimd.Signal{Class: forage.Success, Quota: forage.Quota{
		Limit: 1200, Remaining: 0, Reset: 7 * time.Second, Window: time.Minute,
		HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true,
	}})
	fmt.Println("paused for", c.Snapshot().PausedUntil.Sub(now))
	// Output:
	// 15/s
	// 63/s
	// paused for 7s
}

// Snapshot reports the state for metrics. A refusal leaving slow start cuts
// the rate to 0.6 of the rate it was sent at and sets the ceiling just under
// that rate, unconfirmed, so the climb back is fast (it may have been a
// fluke); a second refusal of a request sent before the cut confirms the
// overshoot, and the climb back slows to a Recovery.
func ExampleController_Snapshot() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := aimd.New(aimd.Config{Initial: 10})
	fmt.Println(c.Snapshot().Phase)

	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	fmt.Println(c.Snapshot().Phase)

	sent := now.Add(time.Second)
	c.ObserveAt(sent.Add(50*time.Millisecond), aimd.Signal{Class: forage.Throttled, Sent: sent})
	s := c.Snapshot()
	fmt.Printf("%s rate=%.0f ceiling=%.0f decreases=%d\n", s.Phase, s.Rate, s.Ceiling, s.Decreases)

	c.ObserveAt(sent.Add(60*time.Millisecond), aimd.Signal{Class: forage.Throttled, Sent: sent.Add(time.Millisecond)})
	s = c.Snapshot()
	fmt.Printf("%s rate=%.0f ceiling=%.0f decreases=%d\n", s.Phase, s.Rate, s.Ceiling, s.Decreases)
	// Output:
	// start
	// slow-start
	// recover rate=6 ceiling=10 decreases=1
	// recover rate=6 ceiling=10 decreases=1
}

// A controller's learned state outlives the process: export it with State
// (it encodes to JSON), and a new controller for the same provider resumes
// from it with Restore instead of climbing again from the conservative
// start.
func ExampleController_Restore() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	before, _ := aimd.New(aimd.Config{Initial: 40})
	before.ObserveAt(now, aimd.Signal{Class: forage.Success})
	before.ObserveAt(now.Add(time.Second), aimd.Signal{Class: forage.Throttled, Sent: now.Add(990 * time.Millisecond)})
	saved := before.State()
	fmt.Printf("saved: rate %.1f/s, ceiling %.1f/s\n", saved.Rate, saved.Ceiling)

	after, _ := aimd.New(aimd.Config{}) // a restart
	if err := after.Restore(saved); err != nil {
		fmt.Println(err)
	}
	s := after.Snapshot()
	fmt.Printf("restored: rate %.1f/s, ceiling %.1f/s (%s)\n", s.Rate, s.Ceiling, s.Phase)
	// Output:
	// saved: rate 24.0/s, ceiling 38.0/s
	// restored: rate 24.0/s, ceiling 38.0/s (recover)
}
