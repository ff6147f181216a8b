package gcra_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage/gcra"
	"golang.org/x/time/rate"
)

// The benchmarks pair each gcra call with the same call on
// golang.org/x/time/rate: 1M events/s, Burst 1000, request times advancing by
// one interval per call, so every decision is an admit that writes the state.
const (
	benchRate  = 1e6
	benchBurst = 1000
	benchStep  = time.Microsecond
)

func newBenchLimiter(b *testing.B) *gcra.Limiter {
	b.Helper()
	lim, err := gcra.New(gcra.Config{Rate: benchRate, Burst: benchBurst})
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

func BenchmarkAllowNAt(b *testing.B) {
	lim := newBenchLimiter(b)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(benchStep)
		lim.AllowNAt(now, 1)
	}
}

func BenchmarkRateAllowN(b *testing.B) {
	lim := rate.NewLimiter(benchRate, benchBurst)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(benchStep)
		lim.AllowN(now, 1)
	}
}

func BenchmarkAllowNAtParallel(b *testing.B) {
	lim := newBenchLimiter(b)
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := start
		for pb.Next() {
			now = now.Add(benchStep)
			lim.AllowNAt(now, 1)
		}
	})
}

func BenchmarkRateAllowNParallel(b *testing.B) {
	lim := rate.NewLimiter(benchRate, benchBurst)
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := start
		for pb.Next() {
			now = now.Add(benchStep)
			lim.AllowN(now, 1)
		}
	})
}

func BenchmarkAllow(b *testing.B) {
	lim := newBenchLimiter(b)
	b.ReportAllocs()
	for b.Loop() {
		lim.Allow()
	}
}

func BenchmarkRateAllow(b *testing.B) {
	lim := rate.NewLimiter(benchRate, benchBurst)
	b.ReportAllocs()
	for b.Loop() {
		lim.Allow()
	}
}

func BenchmarkAllowParallel(b *testing.B) {
	lim := newBenchLimiter(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			lim.Allow()
		}
	})
}

func BenchmarkRateAllowParallel(b *testing.B) {
	lim := rate.NewLimiter(benchRate, benchBurst)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			lim.Allow()
		}
	})
}

// BenchmarkSetRateAt measures a rate change that rescales a backlog, what
// aimd does on every response.
func BenchmarkSetRateAt(b *testing.B) {
	lim := newBenchLimiter(b)
	now := time.Now()
	lim.AllowNAt(now, benchBurst/2)
	rates := [2]float64{benchRate, benchRate * 1.01}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		_ = lim.SetRateAt(now, rates[i&1])
	}
}

func BenchmarkDecide(b *testing.B) {
	tat, now := int64(0), int64(0)
	b.ReportAllocs()
	for b.Loop() {
		now += int64(benchStep)
		tat, _ = gcra.Decide(tat, now, int64(benchStep), benchBurst, 1)
	}
}
