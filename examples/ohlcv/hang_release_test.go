package main

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// frozenStore is a hungStore whose lease releases hang too once its
// commits do: a database frozen mid-run (SIGSTOP, a host that hangs, a
// network that drops packets) answers no statement, the release at the
// end of a stream's run included, and closing its pool waits too.
type frozenStore struct{ *hungStore }

func (f frozenStore) Release(ctx context.Context, lease checkpoint.Lease) error {
	if f.left.Load() < 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.Store.Release(ctx, lease)
}

// frozenBackend is a backend whose checkpoint store freezes (see frozenStore).
type frozenBackend struct {
	backend
	store frozenStore
}

func (f frozenBackend) checkpoints() checkpoint.Store { return f.store }

// Close, once frozen, takes as long as pgx's close of a pool whose
// queries were cancelled: it sends each cancel request over a connection
// of its own, which the frozen server never answers, for up to 15 s.
func (f frozenBackend) Close() error {
	if f.store.left.Load() < 0 {
		time.Sleep(15 * time.Second)
	}
	return f.backend.Close()
}

func frozenEnv(t *testing.T) env {
	e := failingFirst(t, 0)
	e.wrap = func(b backend) backend {
		h := &hungStore{Store: b.checkpoints()}
		h.left.Store(3)
		return frozenBackend{backend: b, store: frozenStore{h}}
	}
	return e
}

// TestFrozenStoreEndsAtTheDeadline: a store that freezes, the release of
// the run's lease included, holds the command no longer past -timeout
// than one that hangs only its commits: over within storeGrace of it,
// deferred. (It ended 10 s later: the release, made on a context of its
// own, waited out slice's whole release timeout on the frozen store; a
// PostgreSQL frozen for 15 s held a -timeout 20s command until it thawed.)
func TestFrozenStoreEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		r := cliIn(frozenEnv(t), "-store", t.TempDir(), "-json", "-page", "100", "-timeout", "20s")
		el := time.Since(start)
		s := decodeSummary(t, r.stdout)
		if s.Status == "done" || el > 20*time.Second+storeGrace+2*time.Second {
			t.Fatalf("exit %d after %v, summary %+v, stderr %q: want over by -timeout + %v, not done", r.code, el, s, r.stderr, storeGrace)
		}
		t.Logf("exit %d after %v, status %s, %d candles", r.code, el, s.Status, s.Candles)
		time.Sleep(time.Minute) // what was left on the frozen store ends
	})
}

// TestFrozenStoreInterruptEndsWithinGrace: SIGINT or SIGTERM while the
// store is frozen ends the command, interrupted, within storeGrace, as
// -timeout does. (It took 10 s: the frozen release of the run's lease.)
func TestFrozenStoreInterruptEndsWithinGrace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var sig time.Time
		go func() {
			time.Sleep(30 * time.Second) // the store froze after its third commit, long before
			sig = time.Now()
			cancel()
		}()
		var out, errOut bytes.Buffer
		code := runEnv(ctx, frozenEnv(t), []string{"-store", t.TempDir(), "-json", "-page", "100"}, &out, &errOut)
		el := time.Since(sig)
		s := decodeSummary(t, out.String())
		if sig.IsZero() || s.Status != "interrupted" || el > storeGrace+2*time.Second {
			t.Fatalf("exit %d %v after the signal, summary %+v, stderr %q: want interrupted within %v", code, el, s, errOut.String(), storeGrace)
		}
		t.Logf("exit %d %v after the signal, %d candles", code, el, s.Candles)
		time.Sleep(time.Minute) // what was left on the frozen store ends
	})
}
