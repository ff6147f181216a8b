package schedule_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// TestBackfilledNamesTheStreamsAtItsDeadline: Backfilled's error is to
// name each stream not done; when its deadline fell on one of its
// listings of the jobs, it named none (6 runs of 20, found by a review).
func TestBackfilledNamesTheStreamsAtItsDeadline(t *testing.T) {
	lost := 0
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
			if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "saas/events", Provider: "saas", Incremental: &pager{delay: 20 * time.Millisecond},
				Every: time.Minute, Sink: dropAll}); err != nil {
				t.Fatal(err)
			}
			stopRun := start(t, s)
			wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
			err := s.Backfilled(wait)
			stop()
			stopRun()
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
