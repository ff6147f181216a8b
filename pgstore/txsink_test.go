package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/slice"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seqSource serves the records 1..n of a stream, page per slice; the
// cursor is the last record served. It makes no request.
type seqSource struct{ n, page int64 }

func (s seqSource) Next(_ context.Context, cursor []byte, _ checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, seqAt(cursor) < s.n, nil
}

func (s seqSource) Fetch(_ context.Context, sl slice.Slice) (slice.Page[int64], forage.Outcome) {
	from := seqAt(sl.After)
	to := min(from+s.page, s.n)
	p := slice.Page[int64]{Next: []byte(strconv.FormatInt(to, 10))}
	for i := from + 1; i <= to; i++ {
		p.Records = append(p.Records, i)
	}
	return p, forage.Outcome{Status: 200}
}

func seqAt(cursor []byte) int64 {
	n, _ := strconv.ParseInt(string(cursor), 10, 64)
	return n
}

// insertPage inserts a page's records into table as written by writer with
// a plain INSERT, so that a record written twice fails on the primary key:
// a replay cannot pass unseen.
func insertPage(table, writer string) func(context.Context, pgx.Tx, slice.Page[int64]) error {
	return func(ctx context.Context, tx pgx.Tx, p slice.Page[int64]) error {
		for _, seq := range p.Records {
			if err := insertRecord(ctx, tx, table, seq, writer); err != nil {
				return err
			}
		}
		return nil
	}
}

func TestNewTxSinkRejectsNil(t *testing.T) {
	t.Parallel()
	if _, err := pgstore.NewTxSink[int64](nil, insertPage("t", "w")); !errors.Is(err, pgstore.ErrInvalidConfig) {
		t.Fatalf("NewTxSink(nil store) = %v, want ErrInvalidConfig", err)
	}
	pool, err := pgxpool.New(context.Background(), "postgres://collector@db.internal:5432/forage") // connects lazily: no I/O
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.NewTxSink[int64](s, nil); !errors.Is(err, pgstore.ErrInvalidConfig) {
		t.Fatalf("NewTxSink(nil write) = %v, want ErrInvalidConfig", err)
	}
}

// TestTxSinkCommitsRecordsAndCheckpointTogether: a page's records land
// with the checkpoint after them, or not at all. A write that fails leaves
// the checkpoint where it was; a lost compare-and-swap or a lost lease
// leaves no record (the write never runs); Write alone lands the records
// without touching the checkpoint.
func TestTxSinkCommitsRecordsAndCheckpointTogether(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	table := recordsTable(t, s)
	ctx := t.Context()
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
	lease, err := s.Acquire(ctx, key.Stream, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := pgstore.NewTxSink(s, insertPage(table, "a"))
	if err != nil {
		t.Fatal(err)
	}
	rows := func() int { return len(records(t, s, table)) }
	version := func() int64 {
		cp, err := s.Load(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return cp.Version
	}
	page := slice.Page[int64]{Records: []int64{1, 2}, Next: []byte("2")}

	if _, err := sink.Commit(ctx, key, page, 7, lease); !errors.Is(err, checkpoint.ErrConflict) || rows() != 0 || version() != 0 {
		t.Fatalf("commit at the wrong version: %v, %d rows, version %d; want ErrConflict, no row, version 0", err, rows(), version())
	}
	failing, err := pgstore.NewTxSink(s, func(ctx context.Context, tx pgx.Tx, p slice.Page[int64]) error {
		if err := insertPage(table, "a")(ctx, tx, p); err != nil {
			return err
		}
		return errSinkFull // after the rows were inserted in tx
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failing.Commit(ctx, key, page, 0, lease); !errors.Is(err, errSinkFull) || rows() != 0 || version() != 0 {
		t.Fatalf("commit with a failing write: %v, %d rows, version %d; want the write's error, no row, version 0", err, rows(), version())
	}
	cp, err := sink.Commit(ctx, key, page, 0, lease)
	if err != nil || cp.Version != 1 || string(cp.Cursor) != "2" || rows() != 2 || version() != 1 {
		t.Fatalf("commit = %+v, %v, %d rows; want version 1 at 2 with both rows", cp, err, rows())
	}
	empty := slice.Page[int64]{Next: []byte("3")}
	if cp, err = sink.Commit(ctx, key, empty, cp.Version, lease); err != nil || cp.Version != 2 || rows() != 2 {
		t.Fatalf("commit of a page without records = %+v, %v, %d rows; want the checkpoint alone to move", cp, err, rows())
	}

	if err := sink.Write(ctx, slice.Page[int64]{Records: []int64{100}, Next: []byte("x")}); err != nil || rows() != 3 || version() != 2 {
		t.Fatalf("Write = %v, %d rows, version %d; want the row alone, version 2", err, rows(), version())
	}
	if err := failing.Write(ctx, slice.Page[int64]{Records: []int64{101}, Next: []byte("x")}); !errors.Is(err, errSinkFull) || rows() != 3 {
		t.Fatalf("failing Write = %v, %d rows; want the write's error and no new row", err, rows())
	}

	if err := s.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, key.Stream, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	later := slice.Page[int64]{Records: []int64{4}, Next: []byte("4")}
	if _, err := sink.Commit(ctx, key, later, cp.Version, lease); !errors.Is(err, checkpoint.ErrLeaseLost) || rows() != 3 || version() != 2 {
		t.Fatalf("commit under a lost lease: %v, %d rows, version %d; want ErrLeaseLost, no new row, version 2", err, rows(), version())
	}
}

// TestTxSinkRunsAStreamExactlyOnce: a slice runner with pgstore's TxSink
// writes every record once (a plain INSERT: a replay would fail on the
// primary key) with the checkpoint after it; a run whose write fails
// midway stops with the checkpoint at the last page that landed and
// nothing of the failed one, and the next run resumes there.
func TestTxSinkRunsAStreamExactlyOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	table := recordsTable(t, s)
	ctx := t.Context()
	provider, err := budget.NewLocal("seq", budget.Config{Burst: 100, Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	write, writes := insertPage(table, "run"), 0
	sink, err := pgstore.NewTxSink(s, func(ctx context.Context, tx pgx.Tx, p slice.Page[int64]) error {
		if writes++; writes == 3 {
			if err := write(ctx, tx, p); err != nil {
				return err
			}
			return errSinkFull // the third page fails after its rows were inserted
		}
		return write(ctx, tx, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := slice.New(slice.Config[int64]{
		Stream: "seq", Mode: checkpoint.CatchUp, Store: s, Provider: provider,
		Source: seqSource{n: 95, page: 10}, TxSink: sink,
	})
	if err != nil {
		t.Fatal(err)
	}
	key := checkpoint.Key{Stream: "seq", Mode: checkpoint.CatchUp}
	rep, err := r.Run(ctx, nil)
	if !errors.Is(err, errSinkFull) || rep.Commits != 2 || string(rep.Cursor) != "20" {
		t.Fatalf("run with a failing write = %+v, %v; want the write's error after 2 commits, at 20", rep, err)
	}
	if got := records(t, s, table); len(got) != 20 {
		t.Fatalf("%d records after the failed run, want the 20 of the two pages committed", len(got))
	}
	if cp, _ := s.Load(ctx, key); string(cp.Cursor) != "20" || cp.Version != 2 {
		t.Fatalf("checkpoint %+v, want version 2 at 20", cp)
	}
	rep, err = r.Run(ctx, nil)
	if err != nil || rep.Slices != 8 || rep.Records != 75 || string(rep.Cursor) != "95" {
		t.Fatalf("second run = %+v, %v; want 8 slices, 75 records, at 95", rep, err)
	}
	got := records(t, s, table)
	for i := int64(1); i <= 95; i++ {
		if got[i] != "run" {
			t.Fatalf("record %d: %q; want every record 1..95 once", i, got[i])
		}
	}
	if len(got) != 95 {
		t.Fatalf("%d records, want 95", len(got))
	}
}
