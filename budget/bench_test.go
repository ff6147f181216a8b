package budget_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/checkpoint"
)

// unlimited is a provider config whose pacer never waits, so a benchmark
// measures the gate's own overhead.
func unlimited() budget.Config {
	return budget.Config{
		Adaptive:       aimd.Config{Initial: 1e9, Max: 1e9},
		Burst:          1 << 20,
		Breaker:        breaker.Config{MinRequests: 1 << 20},
		AttemptTimeout: budget.NoTimeout,
	}
}

func ok(context.Context) forage.Outcome { return forage.Outcome{Status: 200} }

// BenchmarkDo is the overhead of Provider.Do on the success path: admit,
// breaker, bulkhead, pacing, classification and feedback around an attempt
// that does nothing.
func BenchmarkDo(b *testing.B) { benchDo(b, unlimited()) }

// BenchmarkDoWithRecords is BenchmarkDo for a provider that keeps its
// record in a store: the success path makes no store call (a save runs in
// the background at most every few seconds), so it costs what Do costs.
func BenchmarkDoWithRecords(b *testing.B) {
	cfg := unlimited()
	cfg.Records = checkpoint.NewMemoryStore(checkpoint.Config{})
	benchDo(b, cfg)
}

// BenchmarkDoShared is BenchmarkDo on a provider shared among processes
// (Config.Shares, a memory store): the lease is renewed in the background
// about once a second, so a call pays only the bookkeeping of its demand.
func BenchmarkDoShared(b *testing.B) {
	cfg := unlimited()
	cfg.Shares = budgettest.NewShareStore()
	benchDo(b, cfg)
}

// benchDo times Do on a provider made with cfg, one call at a time.
func benchDo(b *testing.B, cfg budget.Config) {
	p, err := budget.NewLocal("bench", cfg)
	if err != nil {
		b.Fatal(err)
	}
	run, _ := budget.NewRun(budget.Envelope{}) // unbounded, with a retry budget of its own
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Do(ctx, run, ok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDoParallel is BenchmarkDo from many goroutines on one provider.
func BenchmarkDoParallel(b *testing.B) {
	cfg := unlimited()
	cfg.MaxInFlight = 1 << 16
	p, _ := budget.NewLocal("bench", cfg)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.Do(ctx, nil, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRegistryLookup looks up existing keys among 100,000 from many
// goroutines: the cost every request pays to find its provider.
func BenchmarkRegistryLookup(b *testing.B) {
	reg, keys := registry100k()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := reg.Lookup(keys[i%len(keys)]); !ok {
				b.Fatal("missing key")
			}
			i += 7919
		}
	})
}

// BenchmarkRegistryProvider is the get-or-create path for existing keys.
func BenchmarkRegistryProvider(b *testing.B) {
	reg, keys := registry100k()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_ = provider(reg, keys[i%len(keys)])
			i += 7919
		}
	})
}

// registry100k returns a registry holding 100,000 providers, and their keys.
func registry100k() (*budget.Registry, []string) {
	reg, _ := budget.NewRegistry(budget.RegistryConfig{MaxProviders: 200_000})
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("host-%d.example.com", i)
		provider(reg, keys[i])
	}
	return reg, keys
}
