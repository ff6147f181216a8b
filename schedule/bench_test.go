package schedule_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// benchKinds spreads benchmark jobs over every kind.
var benchKinds = []schedule.Kind{schedule.KindIncremental, schedule.KindBackfill, schedule.KindGapFill, schedule.KindRefresh}

// fill adds n jobs over providers providers to store, all due at t0.
func fill(tb testing.TB, store schedule.JobStore, n, providers int) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		k := benchKinds[i%len(benchKinds)]
		_, err := store.Upsert(ctx, schedule.Job{
			Provider: fmt.Sprintf("provider-%04d", i%providers), Kind: k,
			Stream: fmt.Sprintf("SYM%06d-USDT/1h", i), Priority: k.DefaultPriority(),
			Interval: time.Hour, State: schedule.StateIdle, NextRun: t0,
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkDecision is the cost of one scheduling decision: ClaimAt with
// one free slot, over every due job of every provider, then FinishAt of
// the job it picked with a spent budget (so it is due again a second
// later and the due set never drains). Its cost grows with log(jobs), not
// with jobs.
func BenchmarkDecision(b *testing.B) {
	for _, size := range []struct{ jobs, providers int }{{1_000, 10}, {100_000, 1_000}} {
		b.Run(fmt.Sprintf("jobs=%d/providers=%d", size.jobs, size.providers), func(b *testing.B) {
			store := schedule.NewMemoryJobStore()
			fill(b, store, size.jobs, size.providers)
			s, err := schedule.New(schedule.Config{MaxRunning: 1, MaxPerProvider: 1}, store, idle)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			spent := &budget.Error{Reason: forage.ReasonRequestCap}
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				jobs, err := s.ClaimAt(ctx, now)
				if err != nil || len(jobs) != 1 {
					b.Fatalf("ClaimAt: %v, %d jobs", err, len(jobs))
				}
				if _, err := s.FinishAt(ctx, now, jobs[0], schedule.Result{}, spent); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStoreClaim is the memory store's part of a decision: Claim one
// job out of 100k on 1k providers, and release it due a second later.
func BenchmarkStoreClaim(b *testing.B) {
	store := schedule.NewMemoryJobStore()
	fill(b, store, 100_000, 1_000)
	ctx := context.Background()
	f := schedule.ClaimFilter{PerProvider: 2, Aging: time.Minute}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		jobs, err := store.Claim(ctx, now, "bench", time.Minute, 1, f)
		if err != nil || len(jobs) != 1 {
			b.Fatalf("Claim: %v, %d jobs", err, len(jobs))
		}
		j := jobs[0]
		j.Lease, j.State, j.NextRun = schedule.JobLease{}, schedule.StateQueued, now.Add(time.Second)
		if _, err := store.Update(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryPerJob measures the heap the memory store holds per job,
// indexes included, for 100k jobs on 1k providers: runtime.MemStats after
// a GC, before and after filling it.
func BenchmarkMemoryPerJob(b *testing.B) {
	const n = 100_000
	var perJob float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		store := schedule.NewMemoryJobStore()
		fill(b, store, n, 1_000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perJob = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		runtime.KeepAlive(store)
	}
	b.ReportMetric(perJob, "bytes/job")
}
