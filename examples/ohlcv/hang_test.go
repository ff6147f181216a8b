package main

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// hungStore is a checkpoint store whose commits after the first few wait
// for their context to end: a database host that hangs, or a connection a
// dropped network left open.
type hungStore struct {
	checkpoint.Store
	left atomic.Int64 // commits still answered
}

func (h *hungStore) Commit(ctx context.Context, key checkpoint.Key, cursor []byte, expect int64, lease checkpoint.Lease) (checkpoint.Checkpoint, error) {
	if h.left.Add(-1) < 0 {
		<-ctx.Done()
		return checkpoint.Checkpoint{}, ctx.Err()
	}
	return h.Store.Commit(ctx, key, cursor, expect, lease)
}

// hungBackend is a backend whose checkpoint store hangs (see hungStore).
type hungBackend struct {
	backend
	store *hungStore
}

func (h hungBackend) checkpoints() checkpoint.Store { return h.store }

// TestHungStoreEndsAtTheDeadline: a store that stops answering without
// closing its connections (PostgreSQL frozen, a network that drops
// packets) does not hold the command past -timeout: a few seconds after
// it the command is over, deferred, never done, and what it committed
// before the hang stays. Before, it waited for as long as the store hung
// (95 s for a 15 s -timeout, until the database came back).
func TestHungStoreEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := failingFirst(t, 0)
		e.wrap = func(b backend) backend {
			h := hungBackend{backend: b, store: &hungStore{Store: b.checkpoints()}}
			h.store.left.Store(3)
			return h
		}
		start := time.Now()
		r := cliIn(e, "-store", t.TempDir(), "-json", "-page", "100", "-timeout", "20s")
		el := time.Since(start)
		s := decodeSummary(t, r.stdout)
		if s.Status == "done" || el > 20*time.Second+storeGrace+2*time.Second {
			t.Fatalf("exit %d after %v, summary %+v, stderr %q: want over by -timeout + %v, not done", r.code, el, s, r.stderr, storeGrace)
		}
		t.Logf("exit %d after %v, status %s, %d candles", r.code, el, s.Status, s.Candles)
	})
}
