package checkpointtest

import (
	"context"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// contractTests cover the rules common to every method: argument
// validation and context cancellation.
var contractTests = []test{
	{"InvalidArgumentsWrapErrInvalid", func(t *testing.T, e *env) {
		checkInvalidArguments(t, e, e.ctx)
	}},
	{"InvalidArgumentsBeforeCanceledContext", func(t *testing.T, e *env) {
		// Argument errors are reported before any other, a done context
		// included: a bad call is a bug whatever the context.
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		checkInvalidArguments(t, e, ctx)
	}},
	{"CanceledContextFailsWithoutEffect", func(t *testing.T, e *env) {
		key := catchUp("s")
		l := e.acquire("s", "a", time.Minute)
		cp := e.commit(key, "c", 0, l)
		g, err := e.s.AddGap(e.ctx, checkpoint.Gap{Key: key, Reason: "deadline"})
		wantErr(t, "AddGap", err, nil)
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		calls := map[string]func() error{
			"Load":        func() error { _, err := e.s.Load(ctx, key); return err },
			"Commit":      func() error { _, err := e.s.Commit(ctx, key, []byte("x"), 1, l); return err },
			"Acquire":     func() error { _, err := e.s.Acquire(ctx, "t", "a", time.Minute); return err },
			"Renew":       func() error { _, err := e.s.Renew(ctx, l, time.Hour); return err },
			"Release":     func() error { return e.s.Release(ctx, l) },
			"AddGap":      func() error { _, err := e.s.AddGap(ctx, checkpoint.Gap{Key: key, Reason: "r"}); return err },
			"ListGaps":    func() error { _, err := e.s.ListGaps(ctx, checkpoint.GapQuery{}); return err },
			"ResolveGap":  func() error { return e.s.ResolveGap(ctx, g.ID) },
			"AddCoverage": func() error { return e.s.AddCoverage(ctx, "c", span(0, 1)) },
			"Coverage":    func() error { _, err := e.s.Coverage(ctx, "c"); return err },
		}
		for name, call := range calls {
			wantErr(t, name+" with a canceled context", call(), context.Canceled)
		}
		diff(t, "checkpoint", cp, e.load(key))
		diff(t, "gaps", []checkpoint.Gap{g}, e.listGaps(checkpoint.GapQuery{}))
		_, err = e.s.Acquire(e.ctx, "s", "b", time.Minute)
		wantErr(t, "Acquire: the lease must still be held (no release)", err, checkpoint.ErrLeaseHeld)
		_, err = e.s.Acquire(e.ctx, "t", "b", time.Minute)
		wantErr(t, "Acquire t: no lease was granted", err, nil)
		// The canceled Renew asked for an hour: past the original minute,
		// another owner takes the stream over only if it was not applied.
		e.clock.Advance(time.Minute + time.Second)
		_, err = e.s.Acquire(e.ctx, "s", "b", time.Minute)
		wantErr(t, "Acquire after the original TTL: the lease must not have been renewed", err, nil)
		if c := e.coverage("c"); len(c.Ranges()) != 0 {
			t.Fatalf("coverage: %v, want empty", c)
		}
	}},
}

func commitErr(ctx context.Context, e *env, key checkpoint.Key, expect int64, l checkpoint.Lease) error {
	_, err := e.s.Commit(ctx, key, []byte("x"), expect, l)
	return err
}

func addGapErr(ctx context.Context, e *env, g checkpoint.Gap) error {
	_, err := e.s.AddGap(ctx, g)
	return err
}

// checkInvalidArguments calls every method with each kind of bad argument,
// under ctx, and checks that each fails with ErrInvalid and changes nothing.
func checkInvalidArguments(t *testing.T, e *env, ctx context.Context) {
	t.Helper()
	l := e.acquire("s", "a", time.Minute)
	ok := catchUp("s")
	calls := map[string]func() error{
		"Load empty stream": func() error { _, err := e.s.Load(ctx, checkpoint.Key{Mode: checkpoint.CatchUp}); return err },
		"Load zero mode":    func() error { _, err := e.s.Load(ctx, checkpoint.Key{Stream: "s"}); return err },
		"Load bad mode":     func() error { _, err := e.s.Load(ctx, checkpoint.Key{Stream: "s", Mode: 9}); return err },
		"Commit empty stream": func() error {
			return commitErr(ctx, e, checkpoint.Key{Mode: checkpoint.CatchUp}, 0, checkpoint.Lease{})
		},
		"Commit bad mode":         func() error { return commitErr(ctx, e, checkpoint.Key{Stream: "s"}, 0, l) },
		"Commit negative expect":  func() error { return commitErr(ctx, e, ok, -1, l) },
		"Commit negative token":   func() error { return commitErr(ctx, e, ok, 0, checkpoint.Lease{Stream: "s", Token: -1}) },
		"Commit other stream":     func() error { return commitErr(ctx, e, catchUp("t"), 0, l) },
		"Acquire empty stream":    func() error { _, err := e.s.Acquire(ctx, "", "a", time.Minute); return err },
		"Acquire empty owner":     func() error { _, err := e.s.Acquire(ctx, "x", "", time.Minute); return err },
		"Acquire zero ttl":        func() error { _, err := e.s.Acquire(ctx, "x", "a", 0); return err },
		"Acquire negative ttl":    func() error { _, err := e.s.Acquire(ctx, "x", "a", -time.Second); return err },
		"Renew zero ttl":          func() error { _, err := e.s.Renew(ctx, l, 0); return err },
		"Renew zero lease":        func() error { _, err := e.s.Renew(ctx, checkpoint.Lease{}, time.Minute); return err },
		"Release zero lease":      func() error { return e.s.Release(ctx, checkpoint.Lease{}) },
		"Release no stream":       func() error { return e.s.Release(ctx, checkpoint.Lease{Owner: "a", Token: 1}) },
		"AddGap empty stream":     func() error { return addGapErr(ctx, e, checkpoint.Gap{Key: checkpoint.Key{Mode: 1}, Reason: "r"}) },
		"AddGap bad mode":         func() error { return addGapErr(ctx, e, checkpoint.Gap{Key: checkpoint.Key{Stream: "s"}, Reason: "r"}) },
		"AddGap empty reason":     func() error { return addGapErr(ctx, e, checkpoint.Gap{Key: ok}) },
		"AddGap inverted range":   func() error { return addGapErr(ctx, e, checkpoint.Gap{Key: ok, Reason: "r", Range: span(5, 1)}) },
		"AddGap empty range":      func() error { return addGapErr(ctx, e, checkpoint.Gap{Key: ok, Reason: "r", Range: span(5, 5)}) },
		"ListGaps bad mode":       func() error { _, err := e.s.ListGaps(ctx, checkpoint.GapQuery{Mode: 3}); return err },
		"ListGaps negative after": func() error { _, err := e.s.ListGaps(ctx, checkpoint.GapQuery{After: -1}); return err },
		"ListGaps negative limit": func() error { _, err := e.s.ListGaps(ctx, checkpoint.GapQuery{Limit: -1}); return err },
		"ResolveGap zero":         func() error { return e.s.ResolveGap(ctx, 0) },
		"ResolveGap negative":     func() error { return e.s.ResolveGap(ctx, -4) },
		"AddCoverage empty":       func() error { return e.s.AddCoverage(ctx, "", span(0, 1)) },
		"AddCoverage inverted":    func() error { return e.s.AddCoverage(ctx, "c", span(2, 1)) },
		"AddCoverage empty range": func() error { return e.s.AddCoverage(ctx, "c", span(1, 1)) },
		"Coverage empty series":   func() error { _, err := e.s.Coverage(ctx, ""); return err },
	}
	for name, call := range calls {
		wantErr(t, name, call(), checkpoint.ErrInvalid)
	}
	// Nothing above changed anything.
	diff(t, "checkpoint", checkpoint.Checkpoint{Key: ok}, e.load(ok))
	diff(t, "gaps", []checkpoint.Gap(nil), e.listGaps(checkpoint.GapQuery{}))
	if c := e.coverage("c"); len(c.Ranges()) != 0 {
		t.Fatalf("coverage: %v, want empty", c)
	}
}
