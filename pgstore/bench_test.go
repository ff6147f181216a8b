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

// BenchmarkPacerAdmit measures shared-pacer admissions per second: 8
// concurrent callers (b.SetParallelism rounds up to a multiple of
// GOMAXPROCS) WaitN on one key at a rate high enough never to wait, so
// every admission is one locking statement on the shared row.
func BenchmarkPacerAdmit(b *testing.B) {
	s := newStore(b, nil)
	p := newPacer(b, s, pgstore.PacerConfig{Rate: 1e9, Burst: 1 << 30})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.WaitN(ctx, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admits/s")
}

// BenchmarkPacerAdmitSerial is one caller's admission latency.
func BenchmarkPacerAdmitSerial(b *testing.B) {
	s := newStore(b, nil)
	p := newPacer(b, s, pgstore.PacerConfig{Rate: 1e9, Burst: 1 << 30})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.WaitN(ctx, 1); err != nil {
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

// BenchmarkPacerSetRate is one proposal through the rate policy, as a
// budget provider makes after a response that moved its controller: cuts
// and climbs by 10% in turn (the cuts write the row; most climbs find the
// growth budget spent and leave it).
func BenchmarkPacerSetRate(b *testing.B) {
	s := newStore(b, nil)
	p := newPacer(b, s, pgstore.PacerConfig{Rate: 100})
	b.ReportAllocs()
	rates := [2]float64{100, 90}
	i := 0
	for b.Loop() {
		if err := p.SetRate(rates[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkJobClaim measures job claims per second: 10,000 due jobs over
// 100 providers (a third of them backfills), 8 concurrent callers (as
// BenchmarkPacerAdmit), each claiming one job at a time with the
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
