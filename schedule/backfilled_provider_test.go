package schedule_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// throttling answers every fetch 429 with a Retry-After of wait.
type throttling struct{ wait time.Duration }

func (throttling) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (f throttling) Fetch(context.Context, slice.Slice) (slice.Page[int64], forage.Outcome) {
	return slice.Page[int64]{}, forage.Outcome{Status: 429, RetryAfter: f.wait}
}

// TestBackfilledSaysAProviderIsPausedOrCooling: a stream whose provider
// an operator paused, and one whose provider is cooling down for two hours
// after another stream of it met a 429, are described by Backfilled's
// error as held by the pause and by the cool-down, and Backfilled, given
// ten minutes, returns at once: neither can start before its deadline.
// Both were "idle due since" a time past, with nothing of why, and
// Backfilled waited out its whole deadline; a stream of another provider
// ran meanwhile.
func TestBackfilledSaysAProviderIsPausedOrCooling(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{MaxPerProvider: 1}, budget.RegistryConfig{})
		for _, st := range []schedule.Stream[int64]{
			{Name: "held", Provider: "ops", Backfill: &pager{end: 3}, Sink: dropAll},
			{Name: "refused", Provider: "busy", Priority: 1, Backfill: throttling{wait: 2 * time.Hour}, Sink: dropAll},
			{Name: "behind", Provider: "busy", Priority: 2, Backfill: &pager{end: 3}, Sink: dropAll},
			{Name: "free", Provider: "other", Backfill: &pager{end: 3}, Sink: dropAll},
		} {
			if err := schedule.AddStream(t.Context(), s, st); err != nil {
				t.Fatal(err)
			}
		}
		s.SetProviderPaused("ops", true)
		stop := start(t, s)
		defer stop()
		time.Sleep(5 * time.Second)
		began := time.Now()
		wait, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		err := s.Backfilled(wait)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Backfilled = %v; want an error wrapping context.DeadlineExceeded", err)
		}
		msg := err.Error()
		for _, want := range []string{"held idle due since", "its provider is paused", "behind idle due since", "its provider cools down until"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Backfilled's error does not say %q: %s", want, msg)
			}
		}
		if strings.Contains(msg, "free") {
			t.Errorf("the stream of another provider did not run: %s", msg)
		}
		if waited := time.Since(began); waited > time.Second {
			t.Errorf("Backfilled waited %v for streams that cannot start before its deadline", waited)
		}
	})
}
