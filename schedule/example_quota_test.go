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

// Example_spentQuota: a backfill against a provider whose known quota (3
// requests an hour: one every 30 minutes) is spent after the first page.
// The run stops at once instead of blocking, the job waits in
// waiting_rate_limit until the limit admits a request again, it is not
// claimed before then, and the run claimed then resumes after the
// committed cursor. Scheduler.Run makes the ClaimAt, Runner.Run and
// FinishAt calls itself; they are spelled out at explicit times so the
// example runs at once (TestSpentKnownQuotaWaitsForReset runs the same
// under Run, in fake time, to the end of the stream).
func Example_spentQuota() {
	ctx := context.Background()
	api, _ := budget.NewLocal("api", budget.Config{Limits: []budget.Limit{{Count: 3, Per: time.Hour}}})
	stream, _ := slice.New(slice.Config[int]{Stream: "history", Mode: checkpoint.CatchUp, Provider: api,
		Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Source: &pages{n: 4}, Sink: discard}) // setup: a Source of 4 pages
	runner := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
		rep, err := stream.Run(ctx, nil)
		if err == nil && rep.Reason != "" { // a planned stop: the scheduler decides when to go on
			fmt.Printf("run stopped after cursor %s: %s\n", rep.Cursor, rep.Reason)
			err = &budget.Error{Provider: j.Provider, Reason: rep.Reason, Until: rep.Until}
		}
		return schedule.Result{Done: err == nil}, err
	})
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryStore(), runner)
	now := time.Now()
	_, _ = s.UpsertAt(ctx, now, schedule.Spec{Provider: "api", Kind: schedule.KindBackfill, Stream: "history"})

	jobs, _ := s.ClaimAt(ctx, now)
	res, err := runner.Run(ctx, jobs[0])
	j, _ := s.FinishAt(ctx, now, jobs[0], res, err)
	fmt.Println(j.State, "until +"+j.NextRun.Sub(now).Round(time.Minute).String())
	fmt.Println("claimed at +10m:", len(must(s.ClaimAt(ctx, now.Add(10*time.Minute)))))
	fmt.Println("claimed at +30m:", len(must(s.ClaimAt(ctx, j.NextRun))))
	// Output:
	// run stopped after cursor 1: quota
	// waiting_rate_limit until +30m0s
	// claimed at +10m: 0
	// claimed at +30m: 1
}

// discard is a Sink that keeps nothing (setup).
var discard = slice.SinkFunc[int](func(context.Context, slice.Page[int]) error { return nil })
