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
// limit is known, one request a second, and who may not be made to wait
// longer than MaxWait in a call. Each run fetches one page and finds the
// quota spent: it stops at once, the job waits in waiting_rate_limit until
// the limit admits a request again, and the next run resumes after the
// committed cursor. TestSpentKnownQuotaWaitsForReset runs the same in fake
// time, over hours.
func Example_spentQuota() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg, _ := budget.NewRegistry(budget.RegistryConfig{Overrides: map[string]budget.Config{
		"api": {Limits: []budget.Limit{{Count: 1, Per: time.Second}}, MaxWait: 10 * time.Millisecond},
	}})
	s, _ := schedule.New(schedule.Config{Budget: reg, Checkpoints: checkpoint.NewMemoryStore(checkpoint.Config{})}, schedule.NewMemoryJobStore(), nil)
	src := &pages{n: 3} // setup: a Source of 3 pages that logs each request
	_ = schedule.AddStream(ctx, s, schedule.Stream[int]{Name: "history", Provider: "api", Backfill: src, Sink: discard})
	go s.Run(ctx)

	waitForBackfills(ctx, s, 1) // setup: until the history is in
	jobs, _ := s.Jobs(ctx, schedule.Query{})
	from, at := src.requests()
	fmt.Println(jobs[0].State, "after", jobs[0].Stats.Runs, "runs; requests after cursors", from)
	fmt.Println("one a second:", at[1].Sub(at[0]).Round(time.Second), at[2].Sub(at[1]).Round(time.Second))
	// Output:
	// success after 3 runs; requests after cursors [ 1 2]
	// one a second: 1s 1s
}

// discard is a Sink that keeps nothing (setup).
var discard = slice.SinkFunc[int](func(context.Context, slice.Page[int]) error { return nil })
