package slice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// TestARunStoppedWithACauseIsNoFailureInTheLog: a host that stops a run by
// cancelling its context with a cause (the scheduler does, with
// schedule.ErrInterrupted, when a job or its provider is paused, deleted or
// the scheduler stops), while a fetch is under way, logs the stop at Info,
// as a plain cancel does. net/http's error then wraps the cause, not
// context.Canceled, and every operator's pause logged "slice: run failed"
// at Error.
func TestARunStoppedWithACauseIsNoFailureInTheLog(t *testing.T) {
	t.Parallel()
	cause := errors.New("run interrupted: provider paused")
	g := newRig(50, 10)
	ctx, cancel := context.WithCancelCause(context.Background())
	g.src.outcome = func(s slice.Slice) forage.Outcome {
		if position(s.After) == 20 {
			cancel(cause)
			return forage.Outcome{Err: forage.Mark(fmt.Errorf("Get \"http://api.example.com/x\": %w", context.Cause(ctx)), forage.Canceled)}
		}
		return forage.Outcome{Status: 200}
	}
	prov, err := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	_, err = g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.Provider = prov
	}).Run(ctx, nil)
	cancel(nil)
	if err == nil {
		t.Fatal("Run returned nil; want an error")
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a stop by the host logged as a failure:\n%s", logs.String())
	}
}

// TestARunThatMeetsItsContextsDeadlineIsNoFailure: a host that gives a run
// a deadline (context.WithTimeout, the usual way to bound a job) stops it
// there, as a cancel does. The provider answers at once a call whose
// pacing slot would come after that deadline (it does not sleep into it),
// before the context itself is done, and that early answer logged "slice:
// run failed" at Error, as if something had broken. It is a stop by the
// host: logged at Info, the error still saying the deadline, the
// checkpoint at the last commit.
func TestARunThatMeetsItsContextsDeadlineIsNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(50, 10)
		prov, err := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 1, Max: 1}})
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		rep, err := g.runner(t, checkpoint.CatchUp, func(c *slice.Config[rec]) {
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			c.Provider = prov
		}).Run(ctx, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run returned %v; want an error that is context.DeadlineExceeded", err)
		}
		if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "slice: run stopped") {
			t.Fatalf("a run stopped at its context's deadline logged:\n%s", logs.String())
		}
		if rep.Slices == 0 || rep.Reason != "" || len(rep.Gaps) != 0 {
			t.Fatalf("report %+v; want the slices done before the deadline, no reason, no gap", rep)
		}
		if cp, err := g.store.Load(context.Background(), catchUp); err != nil || position(cp.Cursor) != 10*rep.Slices || string(cp.Cursor) != string(rep.Cursor) {
			t.Fatalf("checkpoint %+v (%v) after %d slices, report's cursor %q", cp, err, rep.Slices, rep.Cursor)
		}
	})
}
