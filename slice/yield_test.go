package slice_test

import (
	"context"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
	"pgregory.net/rapid"
)

// TestRunYieldReportsHolder: a run that finds the stream leased reports who
// holds it and until when, so a host can say why nothing was done instead
// of calling it done. (Regression: the report said only Yielded, and the
// CLI printed "done: 0 candles".)
func TestRunYieldReportsHolder(t *testing.T) {
	t.Parallel()
	g := newRig(10, 5)
	held, err := g.store.Acquire(context.Background(), stream, "host-7/4121/9f2c01aa", 45*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := g.runner(t, checkpoint.CatchUp).Run(context.Background(), nil)
	if err != nil || !rep.Yielded {
		t.Fatalf("Run on a leased stream = %+v, %v: want a yield and no error", rep, err)
	}
	if rep.HeldBy != held.Owner || !rep.HeldUntil.Equal(held.Expires) {
		t.Fatalf("yield reports held by %q until %v, want %q until %v", rep.HeldBy, rep.HeldUntil, held.Owner, held.Expires)
	}
	frep, err := g.runner(t, checkpoint.CatchUp).Fill(context.Background(), nil, []checkpoint.Range{{Start: t0, End: t0.Add(time.Hour)}})
	if err != nil || !frep.Yielded || frep.HeldBy != held.Owner || !frep.HeldUntil.Equal(held.Expires) {
		t.Fatalf("Fill on a leased stream = %+v, %v: want a yield naming %q until %v", frep, err, held.Owner, held.Expires)
	}
	if g.prov.calls.Load() != 0 {
		t.Fatalf("a yielded run called the provider")
	}
}

// TestRunYieldProperty: whoever holds the stream for whatever TTL, a run
// started any time later yields, naming that holder and its expiry, exactly
// while the lease is live; once it has expired the run takes the stream
// over and reports no holder.
func TestRunYieldProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			g := newRig(10, 5)
			g.store = newStore(time.Now) // the bubble's fake clock
			owner := rapid.StringMatching(`[a-z0-9/.-]{1,24}`).Draw(rt, "owner")
			ttl := time.Duration(rapid.IntRange(1, 600).Draw(rt, "ttl")) * time.Second
			held, err := g.store.Acquire(context.Background(), stream, owner, ttl)
			if err != nil {
				rt.Fatal(err)
			}
			time.Sleep(time.Duration(rapid.IntRange(0, 700).Draw(rt, "later")) * time.Second)
			r, err := slice.New(slice.Config[rec]{Stream: stream, Mode: checkpoint.CatchUp, Owner: "runner",
				Store: g.store, Provider: g.prov, Source: g.src, Sink: g.sink})
			if err != nil {
				rt.Fatal(err)
			}
			rep, err := r.Run(context.Background(), nil)
			if err != nil {
				rt.Fatalf("Run: %v", err)
			}
			live := time.Now().Before(held.Expires)
			switch {
			case rep.Yielded != live:
				rt.Fatalf("lease live %v, but the run yielded %v (%+v)", live, rep.Yielded, rep)
			case live && (rep.HeldBy != owner || !rep.HeldUntil.Equal(held.Expires) || rep.Slices != 0):
				rt.Fatalf("yield %+v, want held by %q until %v and nothing done", rep, owner, held.Expires)
			case !live && (rep.HeldBy != "" || !rep.HeldUntil.IsZero() || rep.Slices != 2):
				rt.Fatalf("takeover run %+v, want no holder and the 2 slices done", rep)
			}
		})
	})
}
