package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// hour returns 2030-01-01 at h o'clock UTC (setup for the examples).
func hour(h int) time.Time { return time.Date(2030, 1, 1, h, 0, 0, 0, time.UTC) }

func ExampleCoverage() {
	var c checkpoint.Coverage // the zero value is empty and ready
	c.Add(checkpoint.Range{Start: hour(0), End: hour(2)})
	c.Add(checkpoint.Range{Start: hour(5), End: hour(6)})
	c.Add(checkpoint.Range{Start: hour(2), End: hour(3)}) // touches [0, 2): merged
	for _, r := range c.Ranges() {
		fmt.Println("covered", r.Start.Hour(), "-", r.End.Hour())
	}
	fmt.Println("covers 1-3:", c.Covers(checkpoint.Range{Start: hour(1), End: hour(3)}))
	// Output:
	// covered 0 - 3
	// covered 5 - 6
	// covers 1-3: true
}

func ExampleCoverage_Missing() {
	var c checkpoint.Coverage
	c.Add(checkpoint.Range{Start: hour(2), End: hour(4)})
	c.Add(checkpoint.Range{Start: hour(6), End: hour(7)})
	// What is left to fetch between 00:00 and 08:00?
	for _, r := range c.Missing(checkpoint.Range{Start: hour(0), End: hour(8)}) {
		fmt.Println("fetch", r.Start.Hour(), "-", r.End.Hour())
	}
	// Output:
	// fetch 0 - 2
	// fetch 4 - 6
	// fetch 7 - 8
}

func ExampleLocalStore_Commit() {
	ctx := context.Background()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	key := checkpoint.Key{Stream: "binance/BTC-USDT/1h", Mode: checkpoint.CatchUp}

	cp, _ := store.Load(ctx, key) // nothing committed yet: version 0
	// ... fetch a slice, write it to the sink, wait until it is durable ...
	cp, _ = store.Commit(ctx, key, []byte("page-2"), cp.Version, checkpoint.Lease{})
	fmt.Printf("committed %s at version %d\n", cp.Cursor, cp.Version)

	// A second writer that loaded version 0 loses the compare-and-swap.
	_, err := store.Commit(ctx, key, []byte("page-9"), 0, checkpoint.Lease{})
	fmt.Println("stale commit is a conflict:", errors.Is(err, checkpoint.ErrConflict))

	// The steady-state bookmark of the same stream is separate.
	head, _ := store.Load(ctx, checkpoint.Key{Stream: key.Stream, Mode: checkpoint.SteadyState})
	fmt.Println("steady-state version:", head.Version)
	// Output:
	// committed page-2 at version 1
	// stale commit is a conflict: true
	// steady-state version: 0
}

func ExampleLocalStore_Acquire() {
	ctx := context.Background()
	now := hour(0) // a fake clock, so the example runs instantly
	store := checkpoint.NewMemoryStore(checkpoint.Config{Now: func() time.Time { return now }})
	key := checkpoint.Key{Stream: "binance/BTC-USDT/1h", Mode: checkpoint.SteadyState}

	a, _ := store.Acquire(ctx, key.Stream, "worker-a", 30*time.Second)
	_, err := store.Acquire(ctx, key.Stream, "worker-b", 30*time.Second)
	var held *checkpoint.LeaseHeldError
	if errors.As(err, &held) { // errors.Is(err, checkpoint.ErrLeaseHeld) also holds
		fmt.Printf("b yields to %s until %s\n", held.Lease.Owner, held.Lease.Expires.Format(time.TimeOnly))
	}

	now = now.Add(time.Minute) // worker-a stalls past its TTL ...
	b, _ := store.Acquire(ctx, key.Stream, "worker-b", 30*time.Second)
	fmt.Println("b took over with a newer token:", b.Token > a.Token)

	// ... and wakes up: its commit is fenced off.
	_, err = store.Commit(ctx, key, []byte("late"), 0, a)
	fmt.Println("a is fenced:", errors.Is(err, checkpoint.ErrLeaseLost))
	cp, _ := store.Commit(ctx, key, []byte("fresh"), 0, b)
	fmt.Printf("b committed %s\n", cp.Cursor)
	_ = store.Release(ctx, b)
	// Output:
	// b yields to worker-a until 00:00:30
	// b took over with a newer token: true
	// a is fenced: true
	// b committed fresh
}

func ExampleLocalStore_ListGaps() {
	ctx := context.Background()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	key := checkpoint.Key{Stream: "binance/BTC-USDT/1h", Mode: checkpoint.CatchUp}
	for _, reason := range []string{"request_cap", "throttled", "deadline"} {
		_, _ = store.AddGap(ctx, checkpoint.Gap{Key: key, Cursor: []byte("c"), Reason: reason})
	}
	// Drain page by page; the page size is a transport batch, not a stop.
	q := checkpoint.GapQuery{Stream: key.Stream, Limit: 2}
	for {
		page, _ := store.ListGaps(ctx, q)
		if len(page) == 0 {
			break
		}
		for _, g := range page {
			fmt.Println("gap", g.ID, g.Reason)
			_ = store.ResolveGap(ctx, g.ID) // after collecting the remainder
		}
		q.After = page[len(page)-1].ID
	}
	left, _ := store.ListGaps(ctx, checkpoint.GapQuery{})
	fmt.Println("unresolved:", len(left))
	// Output:
	// gap 1 request_cap
	// gap 2 throttled
	// gap 3 deadline
	// unresolved: 0
}

func ExampleOpenFileStore() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "checkpoint-example-*") // setup
	defer os.RemoveAll(dir)
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}

	store, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = store.Commit(ctx, key, []byte("2019-03-01"), 0, checkpoint.Lease{})
	_ = store.Close() // or crash: the commit was on disk when it returned

	store, _ = checkpoint.OpenFileStore(dir, checkpoint.Config{})
	defer store.Close()
	cp, _ := store.Load(ctx, key)
	fmt.Printf("resume after %s (version %d)\n", cp.Cursor, cp.Version)
	// Output:
	// resume after 2019-03-01 (version 1)
}

// A run that died holding its lease (kill -9, here a Close without
// Release) does not block the restart: the directory lock proves the
// holder gone, so the lease is taken over at once and the dead run fenced.
func ExampleOpenFileStore_takeover() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "checkpoint-example-*") // setup
	defer os.RemoveAll(dir)

	store, _ := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	dead, _ := store.Acquire(ctx, "s", "run-1", time.Hour)
	_ = store.Close() // the run dies without releasing

	store, _ = checkpoint.OpenFileStore(dir, checkpoint.Config{})
	defer store.Close()
	l, err := store.Acquire(ctx, "s", "run-2", time.Hour)
	fmt.Println("restart acquired at once:", err == nil, "token", l.Token)
	_, err = store.Commit(ctx, checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}, []byte("x"), 0, dead)
	fmt.Println("dead run fenced:", errors.Is(err, checkpoint.ErrLeaseLost))
	// Output:
	// restart acquired at once: true token 2
	// dead run fenced: true
}

func ExampleCheckName() {
	for _, name := range []string{"binance/BTC-USDT/1h", "binance/BTC\xff", "a\nforged line"} {
		fmt.Println(checkpoint.CheckName("stream", name))
	}
	// Output:
	// <nil>
	// checkpoint: invalid argument: stream must be valid UTF-8 (invalid byte 0xff at byte 11) (got "binance/BTC\xff")
	// checkpoint: invalid argument: stream must not contain control characters (U+000A at byte 1) (got "a\nforged line")
}
