package pgstore_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
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
