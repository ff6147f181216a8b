package checkpoint_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/checkpoint/checkpointtest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	checkpointtest.Run(t, func(t *testing.T, now func() time.Time) checkpoint.Store {
		return checkpoint.NewMemoryStore(checkpoint.Config{Now: now})
	})
}

// TestMemoryStoreClosed: a store kept in memory closes as a file store
// does: every later call fails with ErrClosed, and closing again is a
// no-op.
func TestMemoryStoreClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := checkpoint.NewMemoryStore(checkpoint.Config{})
	for i := range 2 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close %d: %v", i, err)
		}
	}
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
	if _, err := s.Load(ctx, key); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("Load after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.LoadRecord(ctx, "p"); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("LoadRecord after Close: %v, want ErrClosed", err)
	}
}
