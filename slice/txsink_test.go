package slice_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// txSink makes a rig's sink and store one transaction, as a database does:
// Commit writes the page with write (the sink under test: the memSink, a
// writeLog, a delayed sink, with their injected faults), then commits the
// cursor with the faultStore (with its faults and checks); if either fails
// before the commit is applied, the records written are rolled back. A
// commit applied and then reported failed (an I/O error after the fact)
// keeps both, as a database commit whose answer was lost does. Write alone
// is the plain sink write (fills, pages that made no progress).
//
// Transactions run one at a time: lock is a channel, so waiting for it is
// durably blocking under synctest (a mutex wait is not).
type txSink struct {
	write slice.Sink[rec]
	mem   *memSink
	store *faultStore
	lock  chan struct{}
	// log, if the write is a writeLog, has its entry of each committed
	// page marked lost when the transaction returned an error.
	log *writeLog
	// commits counts the calls to Commit.
	commits int
}

var _ slice.TxSink[rec] = (*txSink)(nil)

func (x *txSink) Write(ctx context.Context, p slice.Page[rec]) error {
	x.lock <- struct{}{}
	defer func() { <-x.lock }()
	return x.write.Write(ctx, p)
}

func (x *txSink) Commit(ctx context.Context, key checkpoint.Key, p slice.Page[rec], expect int64, l checkpoint.Lease) (checkpoint.Checkpoint, error) {
	x.lock <- struct{}{}
	defer func() { <-x.lock }()
	x.commits++
	undo := x.mem.snapshot()
	applied := len(x.store.commitLog())
	if len(p.Records) > 0 { // as the runner does with a Sink: no empty write
		if err := x.write.Write(ctx, p); err != nil {
			undo()
			x.lost()
			return checkpoint.Checkpoint{}, err
		}
	}
	cp, err := x.store.Commit(ctx, key, p.Next, expect, l)
	if err != nil && len(x.store.commitLog()) == applied {
		undo() // the commit did not happen: neither do the records
	}
	if err != nil && len(p.Records) > 0 {
		x.lost()
	}
	return cp, err
}

// lost marks the last logged write as part of a transaction that failed.
func (x *txSink) lost() {
	if x.log != nil && len(x.log.log) > 0 {
		x.log.log[len(x.log.log)-1].lost = true
	}
}

// snapshot returns a func that puts the sink back as it is now.
func (s *memSink) snapshot() (restore func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, deliveries, confirmed := maps.Clone(s.data), maps.Clone(s.deliveries), s.confirmed
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.data, s.deliveries, s.confirmed = data, deliveries, confirmed
	}
}

// once checks that every record in the sink was delivered exactly once:
// what a TxSink promises, replays included.
func (s *memSink) once() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.deliveries {
		if n != 1 {
			return fmt.Errorf("record %d delivered %d times, want once", k, n)
		}
	}
	return nil
}

// sinks are the two ways a runner makes pages durable; the properties run
// with each.
var sinks = []struct {
	name string
	tx   bool
}{{"Sink", false}, {"TxSink", true}}

// forEachSink runs prop in parallel subtests, once with a plain Sink and
// once with a TxSink.
func forEachSink(t *testing.T, prop func(t *testing.T, tx bool)) {
	t.Parallel()
	for _, sk := range sinks {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			prop(t, sk.tx)
		})
	}
}

func TestNewWantsExactlyOneSink(t *testing.T) {
	t.Parallel()
	g := newRig(1, 1)
	x := &txSink{write: g.sink, mem: g.sink, store: g.store, lock: make(chan struct{}, 1)}
	cfg := slice.Config[rec]{Stream: stream, Mode: checkpoint.CatchUp, Store: g.store, Provider: g.prov, Source: g.src, Sink: g.sink, TxSink: x}
	_, err := slice.New(cfg)
	if !errors.Is(err, slice.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.TxSink must be nil when Config.Sink is set") {
		t.Fatalf("New with both sinks = %v, want ErrInvalidConfig naming both fields", err)
	}
	cfg.Sink = nil
	if _, err := slice.New(cfg); err != nil {
		t.Fatalf("New with a TxSink alone = %v", err)
	}
	cfg.TxSink = nil
	if _, err := slice.New(cfg); !errors.Is(err, slice.ErrInvalidConfig) || !strings.Contains(err.Error(), "or set Config.TxSink") {
		t.Fatalf("New without a sink = %v, want ErrInvalidConfig pointing at both fields", err)
	}
}

// TestRunTxSinkCommitsInOneCall: with a TxSink, every batch is one
// TxSink.Commit, never a Sink write and a Store.Commit, and the stream
// lands once, in order, with its coverage.
func TestRunTxSinkCommitsInOneCall(t *testing.T) {
	t.Parallel()
	g, w := aheadRig(45, 10)
	g.tx = true
	r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink, c.Series = w, "s" })
	rep := run(t, r)
	x := g.lastTx
	if rep.Slices != 5 || rep.Records != 45 || string(rep.Cursor) != "45" || rep.Commits != x.commits || x.commits == 0 {
		t.Fatalf("report %+v after %d TxSink commits: want 5 slices, 45 records at 45, one commit per call", rep, x.commits)
	}
	if ops := g.store.opLog(); len(ops) != 2*x.commits {
		t.Fatalf("ops %v for %d TxSink commits: want one write and one commit inside each", ops, x.commits)
	}
	if err := g.sink.exactly(45); err != nil {
		t.Fatal(err)
	}
	if err := g.sink.once(); err != nil {
		t.Fatal(err)
	}
	cov, err := g.store.Coverage(context.Background(), "s")
	if err != nil || !equalRanges(cov.Ranges(), []checkpoint.Range{{Start: t0, End: g.src.at(45)}}) {
		t.Fatalf("coverage %v, %v: want the stream's one range", cov, err)
	}
}

// TestRunTxSinkFailureLeavesNothing: a TxSink that fails, in its write or
// in its commit (a lost compare-and-swap, a lost lease), leaves the
// checkpoint where it was and no record of the page; the run's error
// keeps the store's sentinel.
func TestRunTxSinkFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(g *rig)
		want  error
	}{
		{"write fails", func(g *rig) { g.sink.failAt = 2 }, errInjected},
		{"lease taken over", takeOverAfterFirstCommit, checkpoint.ErrLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newRig(30, 10)
			g.tx = true
			tc.setup(g)
			rep, err := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.MaxBatch = 1 }).Run(context.Background(), nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "in one transaction") {
				t.Fatalf("Run = %+v, %v: want an error wrapping %v", rep, err, tc.want)
			}
			cp := g.store.load(t, catchUp)
			if string(cp.Cursor) != "10" || string(rep.Cursor) != "10" || g.sink.holeBelow(10) >= 0 {
				t.Fatalf("checkpoint %q, report %+v: want the first slice committed, at 10", cp.Cursor, rep)
			}
			if err := g.sink.exactly(10); err != nil {
				t.Fatalf("the failed page left records: %v", err)
			}
		})
	}
}

// takeOverAfterFirstCommit makes another owner take the stream over while
// the slice after the first commit (at 10) is fetched: the stream's clock
// jumps past the lease's TTL and "thief" acquires it, so the run's next
// commit is fenced.
func takeOverAfterFirstCommit(g *rig) {
	now := t0
	clock := func() time.Time { return now }
	g.store = newStore(clock)
	g.now = clock
	g.src.outcome = func(s slice.Slice) forage.Outcome {
		if position(s.After) == 10 {
			now = now.Add(time.Hour)
			if _, err := g.store.Store.Acquire(context.Background(), stream, "thief", time.Hour); err != nil {
				panic(err)
			}
		}
		return forage.Outcome{Status: 200}
	}
}

// TestFillWithTxSinkWrites: a fill commits no checkpoint, so with a
// TxSink it writes with the TxSink's Write.
func TestFillWithTxSinkWrites(t *testing.T) {
	t.Parallel()
	g := newRig(30, 10)
	g.tx = true
	r := g.runner(t, checkpoint.CatchUp)
	rep, err := r.Fill(context.Background(), nil, []checkpoint.Range{{Start: g.src.at(0), End: g.src.at(20)}})
	if err != nil || rep.Records != 20 || g.lastTx.commits != 0 {
		t.Fatalf("Fill = %+v, %v after %d TxSink commits: want 20 records written, nothing committed", rep, err, g.lastTx.commits)
	}
	if err := g.sink.exactly(20); err != nil {
		t.Fatal(err)
	}
	if cp := g.store.load(t, catchUp); cp.Version != 0 {
		t.Fatalf("a fill committed %+v", cp)
	}
}
