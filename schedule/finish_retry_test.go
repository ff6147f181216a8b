package schedule_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/schedule"
)

// A run that ended while the store was down (a PostgreSQL restart) left
// its job leased: the finish was tried once, and the lease held the
// provider's MaxPerProvider slot in every process until it expired, a
// minute after the store was back (a 10 s restart of the database stopped
// a provider for 60 s). The outcome is written once the store answers.
func TestAFinishTheStoreRefusedIsWrittenOnceItAnswers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{JobStore: schedule.NewMemoryJobStore()}
		var mu sync.Mutex
		starts := map[string][]time.Duration{}
		t0 := time.Now()
		w := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			mu.Lock()
			starts[j.Stream] = append(starts[j.Stream], time.Since(t0))
			mu.Unlock()
			time.Sleep(2 * time.Second)
			return schedule.Result{}, nil
		})
		cfg := schedule.Config{MaxRunning: 2, MaxPerProvider: 1, LeaseTTL: time.Minute, Poll: time.Second}
		s, err := schedule.New(cfg, store, w)
		if err != nil {
			t.Fatal(err)
		}
		upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "a"})
		upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "b", NextRun: t0.Add(time.Second)})
		stop := start(t, s)
		time.Sleep(500 * time.Millisecond)
		store.setFailing(true) // a's run ends at 2 s, while the store is down
		time.Sleep(4500 * time.Millisecond)
		store.setFailing(false) // back at 5 s
		time.Sleep(15 * time.Second)
		stop()
		mu.Lock()
		defer mu.Unlock()
		if len(starts["b"]) == 0 || starts["b"][0] > 10*time.Second {
			t.Fatalf("b started at %v (a at %v); want within 10 s: the store was back at 5 s, and a's run had ended at 2 s", starts["b"], starts["a"])
		}
	})
}
