package aimd_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// BenchmarkObserveAt is the per-response cost: mostly successes, a refusal
// every hundredth response.
func BenchmarkObserveAt(b *testing.B) {
	c := mustNew(b, aimd.Config{LatencyTarget: time.Second})
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		s := aimd.Signal{Class: forage.Success, Latency: 30 * time.Millisecond}
		if i++; i%100 == 0 {
			s.Class = forage.Throttled
		}
		c.ObserveAt(now, s)
	}
}

// BenchmarkSnapshot is the pacer's read of the rate.
func BenchmarkSnapshot(b *testing.B) {
	c := mustNew(b, aimd.Config{})
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Snapshot().Rate
	}
}

// BenchmarkObserveParallel is many goroutines reporting responses and
// reading the rate at once: the contention on the mutex.
func BenchmarkObserveParallel(b *testing.B) {
	c := mustNew(b, aimd.Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := t0
		for pb.Next() {
			now = now.Add(time.Millisecond)
			c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-time.Millisecond)})
			_ = c.Snapshot().Rate
		}
	})
}
