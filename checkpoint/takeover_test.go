package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// TestFileStoreTakesOverALeaseFoundOnOpening: a run acquires a stream for
// an hour and its store goes away without releasing (Close drops the
// directory lock as a dead process's kernel does). Reopened at the same
// moment, the stream is taken over at once, with a higher token, and the
// old lease is fenced: its commit, renewal and release are refused.
// (Regression: a restart within the lease's TTL yielded and the stream
// stayed blocked until the dead run's lease expired.)
func TestFileStoreTakesOverALeaseFoundOnOpening(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	now := func() time.Time { return t0 }
	s := openFile(t, dir, now)
	key := checkpoint.Key{Stream: "binance/BTC-USDT/1m", Mode: checkpoint.CatchUp}
	old := must[checkpoint.Lease](t, "Acquire")(s.Acquire(ctx, key.Stream, "dead-run", time.Hour))
	cp := must[checkpoint.Checkpoint](t, "Commit")(s.Commit(ctx, key, []byte("c1"), 0, old))
	if err := s.Close(); err != nil { // the run dies holding its lease
		t.Fatal(err)
	}

	s = openFile(t, dir, now)
	l, err := s.Acquire(ctx, key.Stream, "restart", time.Hour)
	if err != nil {
		t.Fatalf("Acquire at once after reopening: %v, want the dead run's lease taken over", err)
	}
	if l.Token <= old.Token {
		t.Fatalf("takeover token %d, want > %d (the dead run's)", l.Token, old.Token)
	}
	if _, err := s.Commit(ctx, key, []byte("zombie"), cp.Version, old); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Commit with the dead run's lease: %v, want ErrLeaseLost", err)
	}
	if _, err := s.Renew(ctx, old, time.Hour); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Renew of the dead run's lease: %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, old); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Release of the dead run's lease: %v, want ErrLeaseLost", err)
	}
	got := must[checkpoint.Checkpoint](t, "Load")(s.Load(ctx, key))
	if string(got.Cursor) != "c1" || got.Version != 1 {
		t.Fatalf("checkpoint after the takeover: %+v, want the dead run's commit c1 at version 1", got)
	}
	must[checkpoint.Checkpoint](t, "Commit by the new holder")(s.Commit(ctx, key, []byte("c2"), 1, l))
	// The new holder's lease is live: nobody else gets the stream.
	var held *checkpoint.LeaseHeldError
	if _, err := s.Acquire(ctx, key.Stream, "third", time.Hour); !errors.As(err, &held) || held.Lease != l {
		t.Fatalf("Acquire while the new holder runs: %v, want a LeaseHeldError naming %+v", err, l)
	}
}

// TestFileStoreReopenEndsEveryLeaseProperty: whatever state the streams'
// leases were in when the store went away (live for any TTL, expired,
// released, renewed, taken over, never leased), after reopening at the same
// moment every stream is acquired at once, each with the next token after
// every token granted before, and every lease granted before is refused.
func TestFileStoreReopenEndsEveryLeaseProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		dir, err := os.MkdirTemp(shmOrTemp(t), "reopen-*")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		clock := t0
		now := func() time.Time { return clock }
		s, err := checkpoint.OpenFileStore(dir, checkpoint.Config{Now: now})
		if err != nil {
			rt.Fatal(err)
		}
		streams := []string{"a", "b", "c", "d"}
		last := map[string]int64{} // the highest token granted per stream
		var grants []checkpoint.Lease
		for i := range rapid.IntRange(0, 12).Draw(rt, "ops") {
			stream := rapid.SampledFrom(streams).Draw(rt, fmt.Sprint("stream", i))
			switch rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("op", i)) {
			case 0, 1:
				ttl := time.Duration(rapid.IntRange(1, 7200).Draw(rt, fmt.Sprint("ttl", i))) * time.Second
				if l, err := s.Acquire(ctx, stream, fmt.Sprint("o", i), ttl); err == nil {
					grants = append(grants, l)
					last[stream] = l.Token
				} else if !errors.Is(err, checkpoint.ErrLeaseHeld) {
					rt.Fatalf("op %d: Acquire(%s): %v", i, stream, err)
				}
			case 2:
				if len(grants) > 0 {
					_ = s.Release(ctx, grants[len(grants)-1]) // may be lost already
				}
			case 3:
				clock = clock.Add(time.Duration(rapid.IntRange(0, 3600).Draw(rt, fmt.Sprint("advance", i))) * time.Second)
			}
		}
		if err := s.Close(); err != nil {
			rt.Fatal(err)
		}
		s, err = checkpoint.OpenFileStore(dir, checkpoint.Config{Now: now})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		for _, stream := range streams {
			l, err := s.Acquire(ctx, stream, "restart", time.Hour)
			if err != nil {
				rt.Fatalf("Acquire(%s) at once after reopening: %v", stream, err)
			}
			if l.Token != last[stream]+1 {
				rt.Fatalf("Acquire(%s) after reopening: token %d, want %d", stream, l.Token, last[stream]+1)
			}
		}
		for i, g := range grants {
			key := checkpoint.Key{Stream: g.Stream, Mode: checkpoint.SteadyState}
			if _, err := s.Commit(ctx, key, []byte("zombie"), 0, g); !errors.Is(err, checkpoint.ErrLeaseLost) {
				rt.Fatalf("grant %d %+v: Commit after the takeover: %v, want ErrLeaseLost", i, g, err)
			}
		}
	})
}

// shmOrTemp returns a directory for many short-lived stores: tmpfs when
// there is one (fsync is free there), else the test's temp directory.
func shmOrTemp(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return t.TempDir()
}
