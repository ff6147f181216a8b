package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
	"github.com/jackc/pgx/v5/pgxpool"
)

// These tests need a PostgreSQL server: scripts/pg-test.sh starts a
// throwaway one and sets FORAGE_PG_DSN. They run on the wall clock (the
// providers are shared by leases in the database) against the loopback exchange.

// dsnVar names the environment variable holding the test server's DSN.
const dsnVar = "FORAGE_PG_DSN"

// testDSN returns the test server's DSN. Without one the test is skipped,
// except in CI (CI set and not "false" or "0"), where it fails.
func testDSN(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv(dsnVar); dsn != "" {
		return dsn
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatalf("%s is not set but CI=%s: run these tests through scripts/pg-test.sh; they are never skipped in CI", dsnVar, ci)
	}
	t.Skipf("%s is not set: run through scripts/pg-test.sh to test against PostgreSQL", dsnVar)
	return ""
}

// freshSchema returns the DSN and a new schema name, dropped with
// everything in it when t ends, and a pool for the test's own queries.
func freshSchema(t testing.TB) (dsn, schema string, pool *pgxpool.Pool) {
	t.Helper()
	dsn = testDSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "ohlcv_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		pool.Close()
	})
	return dsn, schema, pool
}

// count runs a counting query.
func count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// loopbackRun runs the command as main does, with -json.
func loopbackRun(args ...string) result {
	var out, errOut strings.Builder
	code := run(context.Background(), append(args, "-json"), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// summaryOK fails t unless r exited 0, and returns its summary.
func summaryOK(t testing.TB, r result) summary {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	return decodeSummary(t, r.stdout)
}

// runLoopback runs the command as main does, and fails t unless it exits 0.
func runLoopback(t testing.TB, args ...string) summary {
	t.Helper()
	return summaryOK(t, loopbackRun(args...))
}

// checkDay checks an export of the default run: 1440 one-minute candles in
// a row, ending at or after the ones a first run stored.
func checkDay(t testing.TB, lines []string, extra int) {
	t.Helper()
	ms, _, _ := strings.Cut(lines[0], ",")
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		t.Fatalf("line 0 = %q: %v", lines[0], err)
	}
	first := time.UnixMilli(v).UTC()
	checkSeries(t, lines, first, first.Add(time.Duration(1440+extra)*time.Minute), time.Minute)
}

// TestPostgresCollectsExactlyOnce: a run into PostgreSQL stores the day's
// candles once, the export reads them back ascending, and a restart
// resumes from the checkpoint committed with them.
func TestPostgresCollectsExactlyOnce(t *testing.T) {
	t.Parallel()
	dsn, schema, pool := freshSchema(t)
	s := runLoopback(t, "-store", dsn, "-pg-schema", schema)
	if s.Status != "done" || s.Store != "postgres" || s.Candles != 1440 || s.Requests != 2 {
		t.Fatalf("summary %+v, want 1440 candles in 2 requests into postgres", s)
	}
	again := runLoopback(t, "-store", dsn, "-pg-schema", schema)
	if again.Requests > 1 || again.Status != "done" {
		t.Fatalf("restart: %+v, want at most one request (a minute may have closed)", again)
	}
	lines := exportOf(t, "-store", dsn, "-pg-schema", schema)
	checkDay(t, lines, again.Candles)
	if n := count(t, pool, `SELECT count(*) FROM "`+schema+`".candles`); n != len(lines) {
		t.Fatalf("%d rows, %d exported", n, len(lines))
	}
	if n := count(t, pool, `SELECT count(*) FROM "`+schema+`".checkpoints WHERE stream = 'ohlcv/BTCUSDT/1m'`); n != 1 {
		t.Fatalf("%d checkpoints of the stream, want 1 (catch-up)", n)
	}
}

// TestPostgresProcessesShareOneBudget: two collectors with different
// symbols run at once against one store: both finish, every series is
// complete, and they shared the provider by leases in one document.
func TestPostgresProcessesShareOneBudget(t *testing.T) {
	t.Parallel()
	dsn, schema, pool := freshSchema(t)
	runLoopback(t, "-store", dsn, "-pg-schema", schema, "-max-requests", "1") // migrate before the race
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i, syms := range []string{"ETHUSDT", "SOLUSDT,XRPUSDT"} {
		wg.Go(func() {
			results[i] = loopbackRun("-store", dsn, "-pg-schema", schema, "-symbols", syms, "-page", "360")
		})
	}
	wg.Wait()
	for i, r := range results {
		if s := summaryOK(t, r); s.Status != "done" {
			t.Fatalf("process %d: %+v", i, s)
		}
	}
	for _, sym := range []string{"ETHUSDT", "SOLUSDT", "XRPUSDT"} {
		checkDay(t, exportOf(t, "-store", dsn, "-pg-schema", schema, "-symbol", sym), 0)
	}
	if n := count(t, pool, `SELECT count(*) FROM "`+schema+`".provider_shares WHERE key = 'sim'`); n != 1 {
		t.Fatalf("%d share documents for provider sim, want the 1 both processes share", n)
	}
}

// TestPostgresCandlesAndCheckpointCommitTogether: the PostgreSQL backend
// gives the runner pgstore's TxSink, whose commit lands a page's candles
// with the checkpoint after them, in one transaction, or not at all: a lost
// compare-and-swap or a lost lease leaves no row, a page without candles
// moves the checkpoint alone, and a failing upsert leaves the checkpoint.
func TestPostgresCandlesAndCheckpointCommitTogether(t *testing.T) {
	t.Parallel()
	dsn, schema, pool := freshSchema(t)
	ctx := context.Background()
	be, err := openPG(ctx, dsn, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	var st schedule.Stream[klines.Candle]
	if err := be.sink(&st, "BTCUSDT", "1m"); err != nil {
		t.Fatal(err)
	}
	store, sink := be.checkpoints(), st.TxSink
	if sink == nil || st.Sink != nil {
		t.Fatalf("the PostgreSQL backend set Sink %v and TxSink %v: want its TxSink alone", st.Sink, st.TxSink)
	}
	key := checkpoint.Key{Stream: "ohlcv/BTCUSDT/1m", Mode: checkpoint.CatchUp}
	lease, err := store.Acquire(ctx, key.Stream, "test", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	page := slice.Page[klines.Candle]{Next: plainCursor(t0.Add(time.Minute)), Records: []klines.Candle{
		{OpenTime: t0, Open: "1.50000000", High: "2", Low: "1", Close: "1.75", Volume: "10.00000001"},
		{OpenTime: t0.Add(time.Minute), Open: "1.75", High: "1.8", Low: "1.7", Close: "1.7", Volume: "3"},
	}}
	rows := func() int { return count(t, pool, `SELECT count(*) FROM "`+schema+`".candles`) }

	if _, err := sink.Commit(ctx, key, page, 7, lease); !errors.Is(err, checkpoint.ErrConflict) || rows() != 0 {
		t.Fatalf("commit at the wrong version: %v, %d rows; want ErrConflict and no row", err, rows())
	}
	bad := page
	bad.Records = []klines.Candle{{OpenTime: t0, Open: "not a number", High: "2", Low: "1", Close: "1", Volume: "1"}}
	if _, err := sink.Commit(ctx, key, bad, 0, lease); err == nil || rows() != 0 {
		t.Fatalf("commit of a candle the upsert refuses: %v, %d rows; want an error and no row", err, rows())
	}
	if cp, err := store.Load(ctx, key); err != nil || cp.Version != 0 {
		t.Fatalf("checkpoint %+v, %v after a failed upsert: want version 0", cp, err)
	}
	cp, err := sink.Commit(ctx, key, slice.Page[klines.Candle]{Next: []byte("other")}, 0, lease)
	if err != nil || rows() != 0 || cp.Version != 1 {
		t.Fatalf("commit of a page without candles: %+v, %v, %d rows; want the checkpoint alone", cp, err, rows())
	}
	if cp, err = sink.Commit(ctx, key, page, cp.Version, lease); err != nil || rows() != 2 {
		t.Fatalf("commit: %v, %d rows; want both candles", err, rows())
	}
	if got := exportOf(t, "-store", dsn, "-pg-schema", schema); len(got) != 2 || got[0] != "1704067200000,1.50000000,2,1,1.75,10.00000001" {
		t.Fatalf("export %q: want the provider's decimals verbatim", got)
	}
	if err := store.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Acquire(ctx, key.Stream, "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	later := slice.Page[klines.Candle]{Next: plainCursor(t0.Add(2 * time.Minute)), Records: []klines.Candle{
		{OpenTime: t0.Add(2 * time.Minute), Open: "1", High: "1", Low: "1", Close: "1", Volume: "1"},
	}}
	if _, err := sink.Commit(ctx, key, later, cp.Version, lease); !errors.Is(err, checkpoint.ErrLeaseLost) || rows() != 2 {
		t.Fatalf("commit under a lost lease: %v, %d rows; want ErrLeaseLost and no new row", err, rows())
	}
}
