package checkpoint_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// BenchmarkMemoryStoreCommit measures a commit, each goroutine on its own
// stream, all through the store's one mutex.
func BenchmarkMemoryStoreCommit(b *testing.B) {
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	benchCommit(b, store)
}

// BenchmarkFileStoreCommit measures a durable commit: a file rewrite with
// two fsyncs. Expect the disk's fsync latency, not CPU time.
func BenchmarkFileStoreCommit(b *testing.B) {
	store, err := checkpoint.OpenFileStore(b.TempDir(), checkpoint.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	benchCommit(b, store)
}

func benchCommit(b *testing.B, store checkpoint.Store) {
	ctx := context.Background()
	cursor := []byte("2030-01-01T00:00:00Z/page-42")
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := checkpoint.Key{Stream: fmt.Sprint("s", next.Add(1)), Mode: checkpoint.CatchUp}
		var version int64
		for pb.Next() {
			cp, err := store.Commit(ctx, key, cursor, version, checkpoint.Lease{})
			if err != nil {
				b.Fatal(err)
			}
			version = cp.Version
		}
	})
}

// BenchmarkCoverageMissing measures the planner's question on a coverage
// of 1000 ranges.
func BenchmarkCoverageMissing(b *testing.B) {
	var c checkpoint.Coverage
	for i := range 1000 {
		c.Add(checkpoint.Range{Start: t0.Add(time.Duration(2*i) * time.Hour), End: t0.Add(time.Duration(2*i+1) * time.Hour)})
	}
	within := checkpoint.Range{Start: t0.Add(500 * time.Hour), End: t0.Add(520 * time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Missing(within)
	}
}
