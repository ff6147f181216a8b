package schedule_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
)

// Backfilled's error is to name each stream not done: when its deadline
// falls on one of its polls, it names none.
func TestBackfilledNamesTheStreamsAtItsDeadline(t *testing.T) {
	lost := 0
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			reg, _ := budget.NewRegistry(budget.RegistryConfig{})
			s, _ := schedule.New(schedule.Config{Budget: reg, Checkpoints: checkpoint.NewMemoryStore(checkpoint.Config{})}, schedule.NewMemoryJobStore(), nil)
			if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "saas/events", Provider: "saas", Incremental: &pager{delay: 20 * time.Millisecond},
				Every: time.Minute, Sink: dropAll}); err != nil {
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
