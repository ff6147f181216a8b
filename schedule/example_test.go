package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

func ExampleNew() {
	ctx := context.Background()
	runner := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
		// Run one stream: fetch pages through the provider's budget, write
		// them, commit the cursor; stop when ctx ends.
		return schedule.Result{}, nil
	})
	s, err := schedule.New(schedule.Config{MaxRunning: 16, MaxPerProvider: 2}, schedule.NewMemoryJobStore(), runner)
	if err != nil {
		panic(err)
	}
	spec := schedule.Spec{Provider: "binance", Kind: schedule.KindIncremental, Stream: "BTC-USDT/1h", Interval: time.Hour}
	a, _ := s.Upsert(ctx, spec)
	b, _ := s.Upsert(ctx, spec) // adding it again changes nothing
	fmt.Println("same job:", a.ID == b.ID, "- priority", a.Priority, "- state", a.State)
	// go s.Run(ctx) would now run it every hour, ±5%.
	// Output:
	// same job: true - priority 20 - state idle
}

func ExampleScheduler_ClaimAt() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := schedule.New(schedule.Config{MaxRunning: 4, MaxPerProvider: 2}, schedule.NewMemoryJobStore(),
		schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	for _, spec := range []schedule.Spec{
		{Provider: "binance", Kind: schedule.KindBackfill, Stream: "BTC-USDT/1h"},
		{Provider: "binance", Kind: schedule.KindIncremental, Stream: "BTC-USDT/1h", Interval: time.Hour},
		{Provider: "binance", Kind: schedule.KindIncremental, Stream: "ETH-USDT/1h", Interval: time.Hour},
		{Provider: "binance", Kind: schedule.KindGapFill, Stream: "BTC-USDT/1h"},
		{Provider: "kraken", Kind: schedule.KindBackfill, Stream: "XBT-USD/1h"},
		{Provider: "kraken", Kind: schedule.KindRefresh, Stream: "markets", Interval: 12 * time.Hour},
	} {
		spec.NextRun = now
		_, _ = s.Upsert(ctx, spec)
	}
	// One decision: gap fills first, then fresh data, at most two per
	// provider, never two jobs of one stream at once (the gap fill holds
	// BTC-USDT/1h); backfills only for providers with no head work left.
	jobs, _ := s.ClaimAt(ctx, now)
	for _, j := range jobs {
		fmt.Println(j.Provider, j.Kind, j.Stream)
	}
	// Output:
	// binance gap_fill BTC-USDT/1h
	// binance incremental ETH-USDT/1h
	// kraken refresh markets
}

func ExampleScheduler_FinishAt() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryJobStore(),
		schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	_, _ = s.Upsert(ctx, schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "BTC-USDT/1m", NextRun: now})
	_, _ = s.Upsert(ctx, schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "ETH-USDT/1m", NextRun: now})
	jobs, _ := s.ClaimAt(ctx, now)

	// The first run spent its request cap: re-queued, no cool-down.
	j, _ := s.FinishAt(ctx, now, jobs[0], schedule.Result{}, &budget.Error{Reason: forage.ReasonRequestCap})
	fmt.Println(j.Stream, j.State, "again in", j.NextRun.Sub(now))
	// The second met a 429 with Retry-After: 30s: it waits for the reset,
	// and so does every other job of binance.
	j, _ = s.FinishAt(ctx, now, jobs[1], schedule.Result{}, &budget.Error{Reason: forage.ReasonThrottled, Until: now.Add(30 * time.Second)})
	fmt.Println(j.Stream, j.State, "again in", j.NextRun.Sub(now))
	fmt.Println("claimed at +10s:", len(must(s.ClaimAt(ctx, now.Add(10*time.Second)))))
	fmt.Println("claimed at +30s:", len(must(s.ClaimAt(ctx, now.Add(30*time.Second)))))
	// Output:
	// BTC-USDT/1m queued again in 1s
	// ETH-USDT/1m waiting_rate_limit again in 30s
	// claimed at +10s: 0
	// claimed at +30s: 2
}

// must drops the error (setup for the examples).
func must[T any](v T, _ error) T { return v }

func ExampleNewMemoryJobStore() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	store := schedule.NewMemoryJobStore()
	add := func(k schedule.Kind, stream string, due time.Time) {
		_, _ = store.Upsert(ctx, schedule.Job{Provider: "p", Kind: k, Stream: stream, Priority: k.DefaultPriority(),
			Interval: time.Minute, State: schedule.StateIdle, NextRun: due})
	}
	add(schedule.KindBackfill, "history", now.Add(-time.Hour)) // due for an hour
	add(schedule.KindIncremental, "head", now)
	add(schedule.KindIncremental, "later", now.Add(time.Minute)) // not due yet

	f := schedule.ClaimFilter{PerProvider: 2, Aging: time.Minute}
	jobs, _ := store.Claim(ctx, now, "worker-1", time.Minute, 10, f)
	for _, j := range jobs {
		fmt.Println("claimed", j.Stream, j.State, "lease until +"+j.Lease.Until.Sub(now).String())
	}
	// The backfill waits while its provider's head job runs, however long
	// it has been due.
	jobs, _ = store.Claim(ctx, now, "worker-2", time.Minute, 10, f)
	fmt.Println("then", len(jobs))
	// Output:
	// claimed head running lease until +1m0s
	// then 0
}
