package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/schedule"
)

// BenchmarkUpdateShares is one lease renewal as a budget provider shared
// through the store makes it, about once a second per process: a read and
// a compare-and-swap write of a small document.
func BenchmarkUpdateShares(b *testing.B) {
	s := newStore(b, nil)
	ctx := context.Background()
	doc := []byte(`{"epoch":3,"rate":42.5,"ceiling":44,"leases":{"host-1-ab":{"share":0.5,"expires":"2030-01-01T00:00:00Z"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.UpdateShares(ctx, "bench.example.com", func([]byte) ([]byte, error) { return doc, nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommit is one fenced commit: lease check and compare-and-swap
// in one statement.
func BenchmarkCommit(b *testing.B) {
	s := newStore(b, nil)
	ctx := context.Background()
	l, err := s.Acquire(ctx, "s", "bench", 1<<40)
	if err != nil {
		b.Fatal(err)
	}
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.SteadyState}
	cursor := []byte("cursor-0123456789")
	var v int64
	b.ReportAllocs()
	for b.Loop() {
		cp, err := s.Commit(ctx, key, cursor, v, l)
		if err != nil {
			b.Fatal(err)
		}
		v = cp.Version
	}
}

// BenchmarkJobClaim measures job claims per second: 10,000 due jobs over
// 100 providers (a third of them backfills), 8 concurrent callers, each claiming one job at a time with the
// scheduler's defaults (2 per provider, aging 1m) and finishing it with an
// Update that releases the lease and leaves it due again, so the backlog
// stays at 10,000 due jobs: every claim ranks the whole backlog.
func BenchmarkJobClaim(b *testing.B) {
	s := newStore(b, nil)
	js := s.Jobs()
	ctx := context.Background()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	seedJobs(b, s, 10000, 100, now)
	f := schedule.ClaimFilter{PerProvider: 2, Aging: time.Minute}
	var owners atomic.Int64
	b.ReportAllocs()
	b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		owner := fmt.Sprint("bench-", owners.Add(1))
		for pb.Next() {
			jobs, err := js.Claim(ctx, now, owner, time.Minute, 1, f)
			if err != nil {
				b.Error(err)
				return
			}
			for _, j := range jobs {
				j.State, j.Lease, j.Stats.Runs = schedule.StateIdle, schedule.JobLease{}, j.Stats.Runs+1
				if _, err := js.Update(ctx, j); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// seedJobs inserts n jobs over providers, due at now, in one statement per
// thousand (through Upsert it takes seconds).
func seedJobs(tb testing.TB, s *pgstore.Store, n, providers int, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	q := `INSERT INTO "` + s.Schema() + `".jobs (provider, kind, stream, priority, interval_ns, state, next_run,
		runs, successes, failures, streak, last_error, version, created, updated)
	SELECT 'p' || (i % $2), k, 's' || i, CASE k WHEN 'backfill' THEN 40 ELSE 20 END, 60000000000, 'idle',
		$3::timestamptz - (i % 600) * interval '1 second', 0, 0, 0, 0, '', 1, $3, $3
	FROM generate_series(1, $1::int) i,
		LATERAL (SELECT CASE WHEN i % 3 = 0 THEN 'backfill' ELSE 'incremental' END AS k) kk`
	if _, err := s.Pool().Exec(ctx, q, n, providers, now); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO "`+s.Schema()+`".job_providers SELECT DISTINCT provider FROM "`+
		s.Schema()+`".jobs ON CONFLICT DO NOTHING`); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE "`+s.Schema()+`".jobs`); err != nil {
		tb.Fatal(err)
	}
}
