package slice_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// delayed is a sink that sleeps delays[i] before its i-th write (then 0)
// and writes to inner: a slow, or stalling, writer.
func delayed(inner *memSink, delays ...time.Duration) slice.SinkFunc[rec] {
	n := 0
	return func(ctx context.Context, p slice.Page[rec]) error {
		if n < len(delays) {
			time.Sleep(delays[n])
		}
		n++
		return inner.Write(ctx, p)
	}
}

func TestRunRenewsLeaseAtSliceBoundaries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newRig(60, 10)
		g.store = newStore(time.Now) // the bubble's fake clock
		slow := delayed(g.sink, 3*time.Second, 3*time.Second, 3*time.Second, 3*time.Second, 3*time.Second, 3*time.Second)
		a := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.LeaseTTL = 10 * time.Second; c.Sink = slow })
		done := make(chan slice.Report)
		go func() { done <- run(t, a) }()

		time.Sleep(14 * time.Second) // past the first TTL: only renewals keep the lease
		b := g.runner(t, checkpoint.CatchUp)
		if rep := run(t, b); !rep.Yielded {
			t.Fatalf("a second runner at 14s ran (%+v); the first one's lease must have been renewed", rep)
		}
		rep := <-done
		if rep.Slices != 6 || g.store.renews == 0 {
			t.Fatalf("first run %+v with %d renewals: want 6 slices through renewals", rep, g.store.renews)
		}
	})
}

func TestRunFencedAfterTakeover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newRig(50, 10)
		g.store = newStore(time.Now)
		// a writes slice 1, then stalls 30s in the write of slice 2: its
		// 10s lease expires and b takes the stream over at 20s.
		a := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) {
			c.Owner, c.LeaseTTL, c.Sink = "a", 10*time.Second, delayed(g.sink, time.Second, 30*time.Second)
		})
		b := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Owner = "b" })
		errc := make(chan error)
		go func() {
			_, err := a.Run(context.Background(), nil)
			errc <- err
		}()
		time.Sleep(20 * time.Second)
		if rep := run(t, b); rep.Yielded || string(rep.Cursor) != "50" {
			t.Fatalf("b after the takeover: %+v, want it to run to 50", rep)
		}
		if err := <-errc; !errors.Is(err, checkpoint.ErrLeaseLost) {
			t.Fatalf("a's run after losing its lease = %v, want ErrLeaseLost", err)
		}
		if cp := g.store.load(t, catchUp); string(cp.Cursor) != "50" {
			t.Fatalf("checkpoint %q: the stale holder wrote over the new one", cp.Cursor)
		}
		log := g.store.commitLog()
		for i := 1; i < len(log); i++ {
			if log[i].lease.Token < log[i-1].lease.Token {
				t.Fatalf("commit %d by token %d after a commit by token %d: %+v", i, log[i].lease.Token, log[i-1].lease.Token, log)
			}
		}
		if err := g.sink.exactly(50); err != nil {
			t.Fatal(err)
		}
	})
}

// fast is a budget.NewLocal config that paces at 1000/s and never trips its
// breaker, so tests exercise admission and retries, not the climb.
func fast() budget.Config {
	return budget.Config{
		Adaptive:       aimd.Config{Initial: 1000, Max: 1000},
		Breaker:        breaker.Config{MinRequests: 1 << 20},
		AttemptTimeout: budget.NoTimeout,
		MaxWait:        10 * time.Minute,
	}
}

func newLocal(tb testing.TB, cfg budget.Config) budget.Provider {
	tb.Helper()
	p, err := budget.NewLocal("test", cfg)
	if err != nil {
		tb.Fatalf("NewLocal: %v", err)
	}
	return p
}

func TestRunWithLocalProviderStopsAtRequestCap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newRig(50, 10)
		r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Provider = newLocal(t, fast()) })
		b, err := budget.NewRun(budget.Envelope{MaxRequests: 3})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.Run(context.Background(), b)
		if err != nil || rep.Reason != forage.ReasonRequestCap || rep.Slices != 3 || string(rep.Cursor) != "30" {
			t.Fatalf("Run = %+v, %v: want request_cap after 3 slices at cursor 30", rep, err)
		}
		if b.Attempts() != 3 {
			t.Fatalf("%d attempts, want 3 (the cap is checked at the boundary, no attempt is wasted)", b.Attempts())
		}
	})
}

func TestRunWithLocalProviderRetriesAndDefersLongPauses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newRig(50, 10)
		start := time.Now()
		fetches := 0
		g.src.outcome = func(s slice.Slice) forage.Outcome {
			fetches++
			switch fetches {
			case 1: // a short Retry-After: slept through inside Do, retried
				return forage.Outcome{Status: 429, RetryAfter: 2 * time.Second}
			case 4: // a pause longer than MaxWait: the run defers
				return forage.Outcome{Status: 429, RetryAfter: time.Hour}
			}
			return forage.Outcome{Status: 200}
		}
		r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Provider = newLocal(t, fast()) })
		unbounded, _ := budget.NewRun(budget.Envelope{})
		rep, err := r.Run(context.Background(), unbounded)
		if err != nil || rep.Reason != forage.ReasonThrottled || rep.Slices != 2 || string(rep.Cursor) != "20" {
			t.Fatalf("Run = %+v, %v: want throttled after 2 slices (the first retried) at cursor 20", rep, err)
		}
		if rep.Until.Before(start.Add(59*time.Minute)) || len(rep.Gaps) != 1 || rep.Gaps[0].Reason != "throttled" {
			t.Fatalf("Run = %+v: want Until about an hour after %v and a throttled gap", rep, start)
		}
	})
}

// stallSource is a source whose stall-th Next (1-based) sleeps d first: a
// runner that stalls between two slices, after its commit and before the
// next boundary check.
type stallSource struct {
	*memSource
	stall int
	d     time.Duration
	calls int
}

func (s *stallSource) Next(ctx context.Context, c []byte, within checkpoint.Range) (slice.Slice, bool, error) {
	s.calls++
	if s.calls == s.stall {
		time.Sleep(s.d)
	}
	return s.memSource.Next(ctx, c, within)
}

// A stale lease holder must neither write nor resolve gaps: a commits a
// slice, stalls 30s before the next boundary, is taken over by b (which
// defers, recording its own gap and resolving the older one), and then
// wakes with its budget spent. Before the fix it wrote a gap at its stale
// cursor and resolved b's.
func TestStaleLeaseHolderWritesAndResolvesNoGaps(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newRig(50, 10)
		g.store = newStore(time.Now)
		ctx := context.Background()
		old, err := g.store.AddGap(ctx, checkpoint.Gap{Key: catchUp, Reason: "deadline"})
		if err != nil {
			t.Fatal(err)
		}
		a := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) {
			c.Owner, c.LeaseTTL = "a", 10*time.Second
			c.Source = &stallSource{memSource: g.src, stall: 2, d: 30 * time.Second}
		})
		b := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) {
			c.Owner, c.Provider = "b", &fakeProvider{stop: stopAfter(1, forage.ReasonRequestCap, time.Time{})}
		})
		budgetA, err := budget.NewRun(budget.Envelope{Deadline: time.Now().Add(15 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			rep slice.Report
			err error
		}
		done := make(chan result)
		go func() {
			rep, err := a.Run(ctx, budgetA)
			done <- result{rep, err}
		}()

		time.Sleep(20 * time.Second) // a's lease expired at 10s; a is asleep until 30s
		brep := run(t, b)
		if brep.Yielded || brep.Reason != forage.ReasonRequestCap || len(brep.Gaps) != 1 || brep.Resolved != 1 {
			t.Fatalf("b after the takeover: %+v, want one slice, a request_cap gap, the old gap resolved", brep)
		}
		newGap := brep.Gaps[0]

		res := <-done
		if !errors.Is(res.err, checkpoint.ErrLeaseLost) {
			t.Fatalf("stale a's run = %+v, %v; want ErrLeaseLost", res.rep, res.err)
		}
		if len(res.rep.Gaps) != 0 || res.rep.Resolved != 0 {
			t.Fatalf("stale a wrote gaps %+v and resolved %d", res.rep.Gaps, res.rep.Resolved)
		}
		got := pending(t, g.store, catchUp)
		if len(got) != 1 || got[0].ID != newGap.ID || string(got[0].Cursor) != "20" {
			t.Fatalf("pending gaps %+v, want only b's gap %d at cursor 20 (old gap %d)", got, newGap.ID, old.ID)
		}
		if cp := g.store.load(t, catchUp); string(cp.Cursor) != "20" {
			t.Fatalf("checkpoint %q, want b's 20", cp.Cursor)
		}
	})
}

// A run resolves only the cursor gaps pending when it started: one recorded
// while it runs (by the host, or another party) is not its to resolve.
func TestRunResolvesOnlyGapsPendingAtStart(t *testing.T) {
	t.Parallel()
	g := newRig(30, 10)
	ctx := context.Background()
	old, err := g.store.AddGap(ctx, checkpoint.Gap{Key: catchUp, Reason: "deadline"})
	if err != nil {
		t.Fatal(err)
	}
	var during checkpoint.Gap
	sink := slice.SinkFunc[rec](func(ctx context.Context, p slice.Page[rec]) error {
		if during.ID == 0 {
			var err error
			if during, err = g.store.AddGap(ctx, checkpoint.Gap{Key: catchUp, Reason: "throttled"}); err != nil {
				return err
			}
		}
		return g.sink.Write(ctx, p)
	})
	r := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) { c.Sink = sink })
	rep := run(t, r)
	if string(rep.Cursor) != "30" || rep.Resolved != 1 {
		t.Fatalf("Run = %+v: want caught up at 30 with the old gap %d resolved", rep, old.ID)
	}
	if got := pending(t, g.store, catchUp); len(got) != 1 || got[0].ID != during.ID {
		t.Fatalf("pending gaps %+v, want only gap %d recorded during the run", got, during.ID)
	}
}
