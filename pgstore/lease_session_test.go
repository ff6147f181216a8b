package pgstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// takeoverWithin is how soon a restart must take over a dead process's
// lease: far below the lease's TTL (an hour here), and below the "few
// seconds" a restarting collector may wait.
const takeoverWithin = 5 * time.Second

// leaseChild leases stream for an hour, prints the lease and waits to be
// killed.
func leaseChild(t *testing.T, s *pgstore.Store, stream string) {
	l, err := s.Acquire(context.Background(), stream, "child", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("leased %d\n", l.Token)
	time.Sleep(2 * time.Minute) // killed long before
	os.Exit(3)
}

// TestLeaseEndsWhenHolderIsKilled: a process holding an hour's lease is
// killed with SIGKILL. While it lives its lease excludes everyone, and the
// refusal names it; once it is dead, a restart acquires the stream within
// a few seconds, with a higher token, and the dead process's lease is
// refused. (Regression: the restart yielded for the rest of the hour.)
func TestLeaseEndsWhenHolderIsKilled(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	const stream = "binance/BTC-USDT/1m"
	cmd, out := startChild(t, "lease", s.Schema(), stream)
	sc := bufio.NewScanner(out)
	var token int64
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "leased "); ok {
			token, _ = strconv.ParseInt(v, 10, 64)
			break
		}
	}
	if token <= 0 {
		_ = cmd.Process.Kill()
		t.Fatalf("the child never leased the stream (%v, %v)", sc.Err(), cmd.Wait())
	}
	var held *checkpoint.LeaseHeldError
	_, err := s.Acquire(ctx, stream, "restart", time.Hour)
	if !errors.As(err, &held) || held.Lease.Owner != "child" || held.Lease.Token != token {
		_ = cmd.Process.Kill()
		t.Fatalf("Acquire while the holder lives: %v, want a LeaseHeldError naming the child's token %d", err, token)
	}
	if time.Until(held.Lease.Expires) < 50*time.Minute {
		t.Errorf("LeaseHeldError expiry %v, want the child's hour", held.Lease.Expires)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error is the signal
	killed := time.Now()

	l := acquireWithin(t, s, stream, "restart", takeoverWithin)
	t.Logf("the stream was taken over %v after the holder was killed", time.Since(killed).Round(time.Millisecond))
	if l.Token <= token {
		t.Fatalf("takeover token %d, want > %d (the killed holder's)", l.Token, token)
	}
	dead := checkpoint.Lease{Stream: stream, Owner: "child", Token: token}
	key := checkpoint.Key{Stream: stream, Mode: checkpoint.CatchUp}
	if _, err := s.Commit(ctx, key, []byte("zombie"), 0, dead); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Commit with the killed holder's lease: %v, want ErrLeaseLost", err)
	}
	if _, err := s.Commit(ctx, key, []byte("c1"), 0, l); err != nil {
		t.Fatalf("Commit by the new holder: %v", err)
	}
	// The new holder is alive: its lease excludes others.
	if _, err := s.Acquire(ctx, stream, "third", time.Hour); !errors.Is(err, checkpoint.ErrLeaseHeld) {
		t.Fatalf("Acquire while the new holder lives: %v, want ErrLeaseHeld", err)
	}
}

// acquireWithin retries Acquire until it succeeds, failing the test if
// that takes longer than within. The dead session's end is asynchronous
// (the server notices the closed socket), hence a retry, not one call.
func acquireWithin(t *testing.T, s *pgstore.Store, stream, owner string, within time.Duration) checkpoint.Lease {
	t.Helper()
	start := time.Now()
	for {
		l, err := s.Acquire(t.Context(), stream, owner, time.Hour)
		if err == nil {
			return l
		}
		if !errors.Is(err, checkpoint.ErrLeaseHeld) || time.Since(start) > within {
			t.Fatalf("Acquire %v after the holder died: %v, want the lease taken over within %v", time.Since(start), err, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// otherPool returns a pool of its own, as another process would have,
// closed when t ends.
func otherPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestLeaseEndsWhenHolderStoreCloses: the holder's store (the last on its
// pool) closes without releasing, as a run whose host gives up does: its
// session ends and another store takes the stream over at once. Until
// then a second store on the same pool shares the session, so the live
// lease still excludes it.
func TestLeaseEndsWhenHolderStoreCloses(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	pool := otherPool(t)
	a, err := pgstore.New(pool, pgstore.Config{Schema: s.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := pgstore.New(pool, pgstore.Config{Schema: s.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	old, err := a.Acquire(ctx, "s", "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Acquire(ctx, "s", "a2", time.Hour); !errors.Is(err, checkpoint.ErrLeaseHeld) {
		t.Fatalf("Acquire by a store sharing the holder's session: %v, want ErrLeaseHeld", err)
	}
	a.Close()
	if _, err := s.Acquire(ctx, "s", "b", time.Hour); !errors.Is(err, checkpoint.ErrLeaseHeld) {
		t.Fatalf("Acquire while a store on the holder's pool is open: %v, want ErrLeaseHeld (the session lives)", err)
	}
	a2.Close() // the last store on the pool: the session ends
	l := acquireWithin(t, s, "s", "b", takeoverWithin)
	if l.Token != old.Token+1 {
		t.Fatalf("takeover token %d, want %d", l.Token, old.Token+1)
	}
}

// TestNoLeaseSessionWaitsForExpiry: with Config.NoLeaseSession a lease
// records no session, so it excludes others until released or expired,
// even after its holder's store and pool are gone.
func TestNoLeaseSessionWaitsForExpiry(t *testing.T) {
	t.Parallel()
	clock := time.Now().Truncate(time.Microsecond)
	now := func() time.Time { return clock }
	s := newStore(t, now)
	ctx := t.Context()
	pool := otherPool(t)
	a, err := pgstore.New(pool, pgstore.Config{Schema: s.Schema(), Now: now, NoLeaseSession: true})
	if err != nil {
		t.Fatal(err)
	}
	old, err := a.Acquire(ctx, "s", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	pool.Close()
	if _, err := s.Acquire(ctx, "s", "b", time.Minute); !errors.Is(err, checkpoint.ErrLeaseHeld) {
		t.Fatalf("Acquire of a sessionless lease after its holder closed: %v, want ErrLeaseHeld until it expires", err)
	}
	clock = clock.Add(time.Minute)
	l, err := s.Acquire(ctx, "s", "b", time.Minute)
	if err != nil || l.Token != old.Token+1 {
		t.Fatalf("Acquire after expiry: %+v, %v; want token %d", l, err, old.Token+1)
	}
}
