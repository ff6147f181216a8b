package schedule_test

import (
	"context"
	"strconv"
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

// tForever is a feed whose pagination never ends.
type tForever struct{}

func (tForever) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (tForever) Fetch(_ context.Context, sl slice.Slice) (slice.Page[int64], forage.Outcome) {
	time.Sleep(20 * time.Millisecond)
	n, _ := strconv.ParseInt(string(sl.After), 10, 64)
	return slice.Page[int64]{Records: []int64{n}, Next: []byte(strconv.FormatInt(n+1, 10))}, forage.Outcome{Status: 200}
}

// Backfilled's error is to name each stream not done: when its deadline
// falls on one of its polls, it names none.
func TestBackfilledNamesTheStreamsAtItsDeadline(t *testing.T) {
	lost := 0
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			reg, _ := budget.NewRegistry(budget.RegistryConfig{})
			s, _ := schedule.New(schedule.Config{Budget: reg, Checkpoints: checkpoint.NewMemoryStore(checkpoint.Config{})}, schedule.NewMemoryJobStore(), nil)
			if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "saas/events", Provider: "saas", Incremental: tForever{},
				Every: time.Minute, Sink: slice.SinkFunc[int64](func(context.Context, slice.Page[int64]) error { return nil })}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
			err := s.Backfilled(wait)
			stop()
			cancel()
			<-done
			if !strings.Contains(err.Error(), "saas/events") {
				lost++
				t.Logf("Backfilled: %v", err)
			}
		})
	}
	if lost > 0 {
		t.Errorf("%d of 20 Backfilled errors named no stream", lost)
	}
}
