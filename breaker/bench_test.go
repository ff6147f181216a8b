package breaker_test

import (
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
)

// BenchmarkAllowDone is the admit path of a closed breaker: Allow, then
// done(Success).
func BenchmarkAllowDone(b *testing.B) {
	br := mustNew(b, breaker.Config{}, nil)
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(forage.Success)
	}
}

// BenchmarkAllowDoneParallel is the same path under contention.
func BenchmarkAllowDoneParallel(b *testing.B) {
	br := mustNew(b, breaker.Config{}, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := br.Allow()
			if err != nil {
				b.Error(err)
				return
			}
			done(forage.Success)
		}
	})
}

// BenchmarkAllowOpen is the fast-fail path of an open breaker.
func BenchmarkAllowOpen(b *testing.B) {
	br := mustNew(b, breaker.Config{MinRequests: 1}, nil)
	report(b, br, forage.Transient)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err != breaker.ErrOpen {
			b.Fatal(err)
		}
	}
}
