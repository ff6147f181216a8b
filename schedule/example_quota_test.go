package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// Example_spentQuota: a declared stream's backfill against a provider whose
// limit is known, one request per 500 ms, and who may not be made to wait
// longer than MaxWait in a call. Each run fetches one page and finds the
// quota spent: it stops at once, the job waits in waiting_rate_limit until
// the limit admits a request again, and the next run resumes after the
// committed cursor. TestSpentKnownQuotaWaitsForReset runs the same in fake
// time, over hours.
func Example_spentQuota() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg, _ := budget.NewRegistry(budget.RegistryConfig{Overrides: map[string]budget.Config{
		"api": {Limits: []budget.Limit{{Count: 1, Per: 500 * time.Millisecond}}, MaxWait: time.Millisecond},
	}})
	s, _ := schedule.New(schedule.Config{Budget: reg, Checkpoints: checkpoint.NewMemoryStore(checkpoint.Config{}),
		Requeue: 10 * time.Millisecond}, schedule.NewMemoryJobStore(), nil) // setup: Requeue, the shortest wait, cut to keep the example fast
	src := &pages{n: 3} // setup: a Source of 3 pages that logs each request
	_ = schedule.AddStream(ctx, s, schedule.Stream[int]{Name: "history", Provider: "api", Backfill: src, Sink: discard})
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()

	_ = s.Backfilled(ctx) // until the history is in
	cancel()
	<-ran // Run returns once every run ended and its outcome is written
	jobs, _ := s.Store().List(context.Background(), schedule.Query{})
	from, at := src.requests()
	fmt.Println(jobs[0].State, "after", jobs[0].Stats.Runs, "runs; requests after cursors", from)
	// Fetch times, not booking times: a few milliseconds of slack.
	apart := func(a, b time.Time) bool { return b.Sub(a) >= 500*time.Millisecond-20*time.Millisecond }
	fmt.Println("never sooner than the limit allows:", apart(at[0], at[1]), apart(at[1], at[2]))
	// Output:
	// success after 3 runs; requests after cursors [ 1 2]
	// never sooner than the limit allows: true true
}

// discard is a Sink that keeps nothing (setup).
var discard = slice.SinkFunc[int](func(context.Context, slice.Page[int]) error { return nil })
