package slice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

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
