package schedule_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// tPoison is a feed whose page after cursor 3 answers 500 on every
// attempt, for good (a record the provider cannot serialize); every other
// page is fine.
type tPoison struct{}

func (tPoison) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (tPoison) Fetch(_ context.Context, sl slice.Slice) (slice.Page[int64], forage.Outcome) {
	time.Sleep(50 * time.Millisecond)
	n, _ := strconv.ParseInt(string(sl.After), 10, 64)
	if n == 3 {
		return slice.Page[int64]{}, forage.Outcome{Status: 500}
	}
	return slice.Page[int64]{Records: []int64{n}, Next: []byte(strconv.FormatInt(n+1, 10))}, forage.Outcome{Status: 200}
}

// tHealthy is a healthy feed of 5 one-record pages, then caught up.
type tHealthy struct{}

func (tHealthy) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (tHealthy) Fetch(_ context.Context, sl slice.Slice) (slice.Page[int64], forage.Outcome) {
	time.Sleep(50 * time.Millisecond)
	n, _ := strconv.ParseInt(string(sl.After), 10, 64)
	if n >= 5 {
		return slice.Page[int64]{Next: sl.After, Last: true}, forage.Outcome{Status: 200}
	}
	return slice.Page[int64]{Records: []int64{n}, Next: []byte(strconv.FormatInt(n+1, 10)), Last: n+1 >= 5}, forage.Outcome{Status: 200}
}

type tDrop struct{}

func (tDrop) Write(context.Context, slice.Page[int64]) error { return nil }

// A caught-up stream polled every 10 s beside a stream whose one page
// answers 500 for good: the provider is cooled for PressureWait after each
// of the failing stream's runs, and the healthy stream's cadence goes from
// 10 s to about a minute. The failing job is retried every PressureWait
// forever, its streak growing with no growing backoff.
func TestAPoisonedPageDoesNotSlowASibling(t *testing.T) {
	runs := func(poisoned bool) (n int64) {
		synctest.Test(t, func(t *testing.T) {
			reg, _ := budget.NewRegistry(budget.RegistryConfig{})
			s, err := schedule.New(schedule.Config{Budget: reg, Checkpoints: checkpoint.NewMemoryStore(checkpoint.Config{})},
				schedule.NewMemoryJobStore(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "saas/contacts", Provider: "saas",
				Incremental: tHealthy{}, Every: 10 * time.Second, Sink: tDrop{}}); err != nil {
				t.Fatal(err)
			}
			if poisoned {
				if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "saas/deals", Provider: "saas",
					Incremental: tPoison{}, Every: 10 * time.Second, Sink: tDrop{}}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			time.Sleep(30 * time.Minute)
			cancel()
			<-done
			jobs, _ := s.Jobs(t.Context(), schedule.Query{})
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
