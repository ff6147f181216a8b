package schedule_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// TestAPoisonedPageDoesNotSlowASibling: a caught-up stream polled every
// 10 s beside a stream whose one page answers 500 for good, the
// provider's breaker closed. The provider was cooled for PressureWait
// after each of the failing stream's runs, and the healthy stream's
// cadence went from 10 s to about a minute; the failing job was retried
// every PressureWait forever, its streak growing with no growing backoff
// (found by a review). Now the failing job alone waits, backed off.
func TestAPoisonedPageDoesNotSlowASibling(t *testing.T) {
	runs := func(poisoned bool) (n int64) {
		synctest.Test(t, func(t *testing.T) {
			s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
			if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "saas/contacts", Provider: "saas",
				Incremental: &pager{delay: 50 * time.Millisecond, end: 5}, Every: 10 * time.Second, Sink: dropAll}); err != nil {
				t.Fatal(err)
			}
			if poisoned {
				if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "saas/deals", Provider: "saas",
					Incremental: &pager{delay: 50 * time.Millisecond, fail: 3}, Every: 10 * time.Second, Sink: dropAll}); err != nil {
					t.Fatal(err)
				}
			}
			runFor(t, s, 30*time.Minute)
			jobs, _ := s.Store().List(t.Context(), schedule.Query{})
			for _, j := range jobs {
				if j.Stream == "saas/contacts" {
					n = j.Stats.Runs
				} else {
					t.Logf("%s: %s, runs %d, failures %d, streak %d, next run %v after the last, last error %q", j.Stream, j.State,
						j.Stats.Runs, j.Stats.Failures, j.Stats.Streak, j.NextRun.Sub(j.Stats.LastRun).Round(time.Second), j.Stats.LastError)
				}
			}
		})
		return n
	}
	alone, beside := runs(false), runs(true)
	t.Logf("healthy stream polled every 10 s: %d runs in 30 minutes alone, %d beside a poisoned page", alone, beside)
	if beside < alone/2 {
		t.Errorf("a poisoned page of another stream cut a healthy stream's polls from %d to %d", alone, beside)
	}
}
