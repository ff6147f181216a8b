package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"
)

// recordsTable creates the host's own table beside the store's, and
// returns its quoted name.
func recordsTable(t testing.TB, s *pgstore.Store) string {
	t.Helper()
	name := `"` + s.Schema() + `".records`
	_, err := s.Pool().Exec(context.Background(), `CREATE TABLE `+name+` (seq bigint PRIMARY KEY, writer text NOT NULL)`)
	if err != nil {
		t.Fatalf("create records table: %v", err)
	}
	return name
}

// fataler is what the helpers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// records returns the host's records as seq → writer.
func records(t fataler, s *pgstore.Store, table string) map[int64]string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT seq, writer FROM `+table)
	if err != nil {
		t.Fatalf("read records: %v", err)
	}
	out := map[int64]string{}
	for rows.Next() {
		var seq int64
		var w string
		if err := rows.Scan(&seq, &w); err != nil {
			t.Fatal(err)
		}
		out[seq] = w
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func insertRecord(ctx context.Context, tx pgx.Tx, table string, seq int64, writer string) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+table+` (seq, writer) VALUES ($1, $2)`, seq, writer)
	return err
}

var errSinkFull = errors.New("sink full")

// TestCommitWithFailingWriteCommitsNothing: a record write that fails rolls
// the checkpoint back with it.
func TestCommitWithFailingWriteCommitsNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	table := recordsTable(t, s)
	ctx := t.Context()
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
	_, err := s.CommitWith(ctx, key, []byte("c1"), 0, checkpoint.Lease{}, func(ctx context.Context, tx pgx.Tx) error {
		if err := insertRecord(ctx, tx, table, 1, "w"); err != nil {
			return err
		}
		return errSinkFull // the second record fails
	})
	if !errors.Is(err, errSinkFull) {
		t.Fatalf("CommitWith: %v, want the write's error", err)
	}
	if cp, _ := s.Load(ctx, key); cp.Version != 0 {
		t.Fatalf("checkpoint moved to version %d although the write failed", cp.Version)
	}
	if r := records(t, s, table); len(r) != 0 {
		t.Fatalf("records %v landed although the write failed", r)
	}
	// A failing SQL write (duplicate key) aborts the transaction the same way.
	_, err = s.CommitWith(ctx, key, []byte("c1"), 0, checkpoint.Lease{}, func(ctx context.Context, tx pgx.Tx) error {
		if err := insertRecord(ctx, tx, table, 1, "w"); err != nil {
			return err
		}
		return insertRecord(ctx, tx, table, 1, "w")
	})
	if err == nil {
		t.Fatal("CommitWith with a duplicate record: no error")
	}
	if cp, _ := s.Load(ctx, key); cp.Version != 0 {
		t.Fatalf("checkpoint moved to version %d although the SQL write failed", cp.Version)
	}
}

// TestCommitTxLostRaceRollsBackRecords: when the compare-and-swap or the
// fence fails inside the host's transaction, the host rolls back and its
// records never land.
func TestCommitTxLostRaceRollsBackRecords(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	table := recordsTable(t, s)
	ctx := t.Context()
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.SteadyState}
	a, err := s.Acquire(ctx, "s", "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, key, []byte("v1"), 0, a); err != nil {
		t.Fatal(err)
	}
	forged := a
	forged.Owner = "b"
	cases := []struct {
		name   string
		expect int64
		lease  checkpoint.Lease
		want   error
	}{
		{"stale version", 0, a, checkpoint.ErrConflict},
		{"lost lease", 1, forged, checkpoint.ErrLeaseLost},
		{"unfenced on a leased stream", 1, checkpoint.Lease{}, checkpoint.ErrLeaseHeld},
	}
	for i, c := range cases {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := insertRecord(ctx, tx, table, int64(i), c.name); err != nil {
			t.Fatal(err)
		}
		_, err = s.CommitTx(ctx, tx, key, []byte("late"), c.expect, c.lease)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: CommitTx: %v, want %v", c.name, err, c.want)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if r := records(t, s, table); len(r) != 0 {
		t.Fatalf("records %v landed after lost commits", r)
	}
	if cp, _ := s.Load(ctx, key); cp.Version != 1 || string(cp.Cursor) != "v1" {
		t.Fatalf("checkpoint %q at version %d, want v1 at 1", cp.Cursor, cp.Version)
	}
}

// TestCommitTxInvisibleUntilHostCommits: the checkpoint written in the
// host's transaction is not visible, and blocks no reader, until the host
// commits; then records and checkpoint appear together.
func TestCommitTxInvisibleUntilHostCommits(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	table := recordsTable(t, s)
	ctx := t.Context()
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := insertRecord(ctx, tx, table, 1, "w"); err != nil {
		t.Fatal(err)
	}
	cp, err := s.CommitTx(ctx, tx, key, []byte("after-1"), 0, checkpoint.Lease{})
	if err != nil || cp.Version != 1 {
		t.Fatalf("CommitTx: %+v, %v", cp, err)
	}
	if got, _ := s.Load(ctx, key); got.Version != 0 {
		t.Fatalf("Load before the host commits: version %d, want 0", got.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, key); got.Version != 1 || string(got.Cursor) != "after-1" {
		t.Fatalf("Load after the host commits: %+v", got)
	}
	if r := records(t, s, table); r[1] != "w" {
		t.Fatalf("records after the host commits: %v", r)
	}
}

// TestCommitWithExactlyOnce is the exactly-once property: writers race to
// write slices with CommitWith, some of their writes fail, and afterwards
// the records are exactly those of the winning commits, one per version,
// and the checkpoint is the last winner's.
func TestCommitWithExactlyOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	table := recordsTable(t, s)
	ctx := t.Context()
	var stream int
	rapid.Check(t, func(rt *rapid.T) {
		stream++
		key := checkpoint.Key{Stream: fmt.Sprint("s", stream), Mode: checkpoint.CatchUp}
		base := int64(stream) * 1000 // this run's record numbers
		rounds := rapid.IntRange(1, 3).Draw(rt, "rounds")
		var want []string // the winning writer of each version
		for round := range rounds {
			racers := rapid.IntRange(1, 6).Draw(rt, "racers")
			fail := rapid.SliceOfN(rapid.Bool(), racers, racers).Draw(rt, "write fails")
			expect := int64(len(want))
			var (
				mu      sync.Mutex
				winners []string
				wg      sync.WaitGroup
			)
			for i := range racers {
				wg.Go(func() {
					w := fmt.Sprintf("r%d-g%d", round, i)
					_, err := s.CommitWith(ctx, key, []byte(w), expect, checkpoint.Lease{}, func(ctx context.Context, tx pgx.Tx) error {
						if err := insertRecord(ctx, tx, table, base+expect+1, w); err != nil {
							return err
						}
						if fail[i] {
							return errSinkFull
						}
						return nil
					})
					switch {
					case err == nil:
						mu.Lock()
						winners = append(winners, w)
						mu.Unlock()
					case errors.Is(err, checkpoint.ErrConflict) || errors.Is(err, errSinkFull):
					default:
						rt.Errorf("round %d racer %d: %v", round, i, err)
					}
				})
			}
			wg.Wait()
			if len(winners) > 1 {
				rt.Fatalf("round %d: %d winners %v at version %d", round, len(winners), winners, expect)
			}
			want = append(want, winners...)
		}
		cp, err := s.Load(ctx, key)
		if err != nil {
			rt.Fatal(err)
		}
		if cp.Version != int64(len(want)) {
			rt.Fatalf("checkpoint at version %d after %d winning commits", cp.Version, len(want))
		}
		got := records(rt, s, table)
		for v, w := range want {
			if got[base+int64(v)+1] != w {
				rt.Fatalf("version %d: record written by %q, want the winner %q", v+1, got[base+int64(v)+1], w)
			}
		}
		for seq := range got {
			if seq > base && seq < base+1000 && seq > base+int64(len(want)) {
				rt.Fatalf("record %d landed without a winning commit (checkpoint at %d)", seq-base, len(want))
			}
		}
		if len(want) > 0 && string(cp.Cursor) != want[len(want)-1] {
			rt.Fatalf("cursor %q, want the last winner %q", cp.Cursor, want[len(want)-1])
		}
	})
}
