package schedule_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
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

func ExampleScheduler_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 10)
	s, _ := schedule.New(schedule.Config{MaxRunning: 4, MaxPerProvider: 2}, schedule.NewMemoryJobStore(),
		schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			started <- fmt.Sprintf("%s %s %s", j.Provider, j.Kind, j.Stream)
			<-ctx.Done() // each run lasts until Run stops
			return schedule.Result{}, context.Cause(ctx)
		}))
	for _, spec := range []schedule.Spec{
		{Provider: "binance", Kind: schedule.KindBackfill, Stream: "BTC-USDT/1h"},
		{Provider: "binance", Kind: schedule.KindIncremental, Stream: "BTC-USDT/1h", Interval: time.Hour},
		{Provider: "binance", Kind: schedule.KindIncremental, Stream: "ETH-USDT/1h", Interval: time.Hour},
		{Provider: "binance", Kind: schedule.KindGapFill, Stream: "BTC-USDT/1h"},
		{Provider: "kraken", Kind: schedule.KindBackfill, Stream: "XBT-USD/1h"},
		{Provider: "kraken", Kind: schedule.KindRefresh, Stream: "markets", Interval: 12 * time.Hour},
	} {
		_, _ = s.Upsert(ctx, spec)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	// One decision: gap fills first, then fresh data, at most two per
	// provider, never two jobs of one stream at once (the gap fill holds
	// BTC-USDT/1h); backfills only for providers with no head work left.
	runs := []string{<-started, <-started, <-started}
	cancel()
	<-done // every run has returned and its outcome is written
	close(started)
	for r := range started { // none: nothing else could start
		runs = append(runs, r)
	}
	slices.Sort(runs)
	for _, r := range runs {
		fmt.Println(r)
	}
	// Output:
	// binance gap_fill BTC-USDT/1h
	// binance incremental ETH-USDT/1h
	// kraken refresh markets
}

func ExampleScheduler_Run_outcomes() {
	ctx, cancel := context.WithCancel(context.Background())
	var ran sync.WaitGroup
	ran.Add(2)
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryJobStore(),
		schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			defer ran.Done()
			if j.Stream == "BTC-USDT/1m" {
				// This run spent its request cap: re-queued, no cool-down.
				return schedule.Result{}, &budget.Error{Reason: forage.ReasonRequestCap}
			}
			// This one met a 429 with Retry-After: 30s: it waits for the
			// reset, and so does every other job of binance.
			return schedule.Result{}, &budget.Error{Reason: forage.ReasonThrottled, Until: time.Now().Add(30 * time.Second)}
		}))
	_, _ = s.Upsert(ctx, schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "BTC-USDT/1m"})
	_, _ = s.Upsert(ctx, schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "ETH-USDT/1m"})
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	ran.Wait()
	cancel()
	<-done // the outcomes are written

	jobs, _ := s.Store().List(context.Background(), schedule.Query{})
	for _, j := range jobs {
		fmt.Println(j.Stream, j.State, "again in", j.NextRun.Sub(j.Stats.LastRun).Truncate(time.Second))
	}
	snap, _ := s.SnapshotPage(context.Background(), time.Now(), "", 10) // the first 10 providers
	fmt.Println("binance cooling:", !snap.Providers[0].CoolingUntil.IsZero())
	// Output:
	// BTC-USDT/1m queued again in 1s
	// ETH-USDT/1m waiting_rate_limit again in 30s
	// binance cooling: true
}

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
