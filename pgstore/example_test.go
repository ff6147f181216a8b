package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Store wraps the host's pool; New does no I/O and checks the Config.
func ExampleNew() {
	// Setup: pgxpool connects lazily, so nothing here touches the network.
	pool, err := pgxpool.New(context.Background(), "postgres://collector@db.internal:5432/forage")
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	store, err := pgstore.New(pool, pgstore.Config{Schema: "collector"})
	fmt.Println(store.Schema(), err)

	_, err = pgstore.New(pool, pgstore.Config{Schema: "collector-eu"})
	fmt.Println(errors.Is(err, pgstore.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// collector <nil>
	// true
	// pgstore: Config.Schema must be 1 to 63 ASCII letters, digits or underscores, not starting with a digit (got "collector-eu")
}

// A budget registry whose providers are shared with every other process
// that uses the same database: each process holds a lease on a share of
// each provider's rate, renewed about once a second, and paces locally at
// it, so the processes together stay under the provider's limit with no
// database round trip per request. The provider records (learned rate,
// pauses, an operator's status) live in the same database. Making the
// registry does no I/O; a provider joins the others when it is first used.
func ExampleStore_UpdateShares() {
	// Setup: a store on a lazily connecting pool.
	pool, err := pgxpool.New(context.Background(), "postgres://collector@db.internal:5432/forage")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		panic(err)
	}

	_, err = budget.NewRegistry(budget.RegistryConfig{
		Defaults: budget.Config{Shares: store, Records: store},
	})
	fmt.Println(err)
	// Output:
	// <nil>
}

// One stream run that writes its records and its checkpoint in one
// transaction, so each slice lands exactly once. This example needs a
// server, so it is compiled but not run; the package tests run the same
// steps against a throwaway PostgreSQL.
func Example_exactlyOnce() {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, "postgres://collector@db.internal:5432/forage", pgstore.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		panic(err)
	}

	key := checkpoint.Key{Stream: "binance/BTC-USDT/1h", Mode: checkpoint.CatchUp}
	lease, err := store.Acquire(ctx, key.Stream, "host-7/worker-2", time.Minute)
	if errors.Is(err, checkpoint.ErrLeaseHeld) {
		return // another collector runs the stream: yield
	} else if err != nil {
		panic(err)
	}
	defer store.Release(ctx, lease) //nolint:errcheck

	cp, err := store.Load(ctx, key)
	if err != nil {
		panic(err)
	}
	candles := []struct{ open, close float64 }{{42000, 42100}} // fetched after cp.Cursor
	err = pgx.BeginFunc(ctx, store.Pool(), func(tx pgx.Tx) error {
		// The fence and the compare-and-swap first: a stale holder or a
		// lost race writes nothing.
		cp, err = store.CommitTx(ctx, tx, key, []byte("2024-01-01T01:00:00Z"), cp.Version, lease)
		if err != nil {
			return err
		}
		for _, c := range candles {
			if _, err := tx.Exec(ctx, `INSERT INTO candles (open, close) VALUES ($1, $2)`, c.open, c.close); err != nil {
				return err // rolled back: nothing lands, the checkpoint included
			}
		}
		return nil // BeginFunc commits: the candles and the checkpoint land together
	})
	switch {
	case errors.Is(err, checkpoint.ErrLeaseLost):
		return // taken over: stop without retrying
	case errors.Is(err, checkpoint.ErrConflict):
		return // another commit won: Load and decide
	case err != nil:
		panic(err)
	}
	fmt.Println("committed version", cp.Version)
}

// A slice runner whose sink writes each page and commits the cursor after
// it in one PostgreSQL transaction: exactly once, with no staging between
// the write and the commit. The host writes its rows in the transaction;
// the TxSink runs the lease fence and the checkpoint's compare-and-swap in
// it too. This example needs a server, so it is compiled but not run; the
// package tests run a stream through a TxSink against a throwaway
// PostgreSQL.
func ExampleNewTxSink() {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, "postgres://collector@db.internal:5432/forage", pgstore.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		panic(err)
	}

	type candle struct {
		Open  time.Time
		Close float64
	}
	sink, err := pgstore.NewTxSink(store, func(ctx context.Context, tx pgx.Tx, p slice.Page[candle]) error {
		for _, c := range p.Records { // an upsert on the natural key
			_, err := tx.Exec(ctx, `INSERT INTO candles (open_time, close) VALUES ($1, $2) ON CONFLICT (open_time) DO NOTHING`, c.Open, c.Close)
			if err != nil {
				return err // nothing lands, the checkpoint included
			}
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	var source slice.Source[candle] // Setup: the host's klines source.
	var provider budget.Provider    // Setup: a budget.Registry's provider for the exchange.
	runner, err := slice.New(slice.Config[candle]{
		Stream:   "binance/BTC-USDT/1m",
		Mode:     checkpoint.CatchUp,
		Store:    store, // the same store: the TxSink commits the checkpoint it loads
		Provider: provider,
		Source:   source,
		TxSink:   sink,
	})
	if err != nil {
		panic(err)
	}
	rep, err := runner.Run(ctx, nil)
	fmt.Println(rep.Commits, "pages committed with their candles, err:", err)
}

// Schedulers in many processes share one set of jobs: each claims due
// jobs from the database, so a job runs in one place at a time, and the
// jobs of a process that crashed run again once their leases expire. This
// example needs a server, so it is compiled but not run.
func ExampleStore_Jobs() {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, "postgres://collector@db.internal:5432/forage", pgstore.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		panic(err)
	}

	runner := schedule.WorkerFunc(func(ctx context.Context, job schedule.Job) (schedule.Result, error) {
		return schedule.Result{}, nil // Setup: one run of job.Stream, through the provider's budget.
	})
	sched, err := schedule.New(schedule.Config{MaxRunning: 8, MaxPerProvider: 2}, store.Jobs(), runner)
	if err != nil {
		panic(err)
	}
	// Every process may upsert the same jobs: (provider, kind, stream) is
	// the identity, so the second upsert only updates the definition.
	_, err = sched.Upsert(ctx, schedule.Spec{
		Provider: "binance", Kind: schedule.KindIncremental, Stream: "BTC-USDT/1h", Interval: time.Hour,
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	_ = sched.Run(ctx) // until interrupted
}
