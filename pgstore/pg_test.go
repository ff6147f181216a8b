package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dsnVar names the environment variable holding the test server's DSN;
// scripts/pg-test.sh sets it.
const dsnVar = "FORAGE_PG_DSN"

var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.pool != nil {
		shared.pool.Close()
	}
	os.Exit(code)
}

// testDSN returns the test server's DSN. Without one the test is skipped,
// except in CI (CI set and not "false"), where a missing server must fail
// the run rather than pass it vacuously.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(dsnVar)
	if dsn != "" {
		return dsn
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatalf("%s is not set but CI=%s: run the pgstore tests through scripts/pg-test.sh; they are never skipped in CI", dsnVar, ci)
	}
	t.Skipf("%s is not set: run through scripts/pg-test.sh to test against PostgreSQL", dsnVar)
	return ""
}

// testPool returns the pool every test shares (one per test binary).
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := testDSN(t)
	shared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			shared.err = err
			return
		}
		cfg.MaxConns = 24
		shared.pool, shared.err = pgxpool.NewWithConfig(context.Background(), cfg)
		if shared.err == nil {
			shared.err = shared.pool.Ping(context.Background())
		}
	})
	if shared.err != nil {
		t.Fatalf("connect to %s: %v", dsnVar, shared.err)
	}
	return shared.pool
}

// freshSchema returns a new schema name, dropped with everything in it
// when t ends.
func freshSchema(t testing.TB) string {
	t.Helper()
	pool := testPool(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "forage_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// newStore returns a migrated store in a fresh schema, on the clock now
// (nil: time.Now).
func newStore(t testing.TB, now func() time.Time) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(testPool(t), pgstore.Config{Schema: freshSchema(t), Now: now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close) // the pool's lease session closes with its last store
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}
