package schedule_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// TestPropertyRestartsAtRandomMomentsLoseNothing: a backfill and a second
// stream's backfill over one provider, run by schedulers stopped at random
// moments and started again over the same job and checkpoint stores, end
// done with every record of both streams written, each at most twice (a
// stop between a page's write and its commit replays that page once).
func TestPropertyRestartsAtRandomMomentsLoseNothing(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			const end = 40
			jobs := schedule.NewMemoryJobStore()
			cps := checkpoint.NewMemoryStore(checkpoint.Config{})
			var mu sync.Mutex
			seen := map[string]map[int64]int{"a": {}, "b": {}}
			sink := func(name string) slice.Sink[int64] {
				return slice.SinkFunc[int64](func(_ context.Context, p slice.Page[int64]) error {
					mu.Lock()
					defer mu.Unlock()
					for _, r := range p.Records {
						seen[name][r]++
					}
					return nil
				})
			}
			stops := rapid.SliceOfN(rapid.Int64Range(1, 3000), 0, 6).Draw(rt, "stops (ms)")
			runFor := time.Duration(rapid.Int64Range(200, 5000).Draw(rt, "RunFor (ms)")) * time.Millisecond
			session := func(stopAfter time.Duration) error {
				reg, _ := budget.NewRegistry(budget.RegistryConfig{})
				s, err := schedule.New(schedule.Config{Budget: reg, Checkpoints: cps, LeaseTTL: 3 * time.Second, Poll: 100 * time.Millisecond}, jobs, nil)
				if err != nil {
					return err
				}
				for _, name := range []string{"a", "b"} {
					st := schedule.Stream[int64]{Name: name, Provider: "p", Backfill: &pager{end: end, delay: 50 * time.Millisecond}, Sink: sink(name), RunFor: runFor}
					if err := schedule.AddStream(context.Background(), s, st); err != nil {
						return err
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				ran := make(chan error, 1)
				go func() { ran <- s.Run(ctx) }()
				var werr error
				if stopAfter > 0 {
					time.Sleep(stopAfter)
				} else {
					wctx, wcancel := context.WithTimeout(ctx, time.Hour)
					werr = s.Backfilled(wctx)
					wcancel()
				}
				cancel()
				<-ran
				return werr
			}
			for _, ms := range stops {
				if err := session(time.Duration(ms) * time.Millisecond); err != nil {
					rt.Fatalf("session: %v", err)
				}
			}
			if err := session(0); err != nil {
				rt.Fatalf("Backfilled after %d restarts: %v", len(stops), err)
			}
			mu.Lock()
			defer mu.Unlock()
			for name, got := range seen {
				for r := int64(0); r < end; r++ {
					if n := got[r]; n < 1 || n > 2 {
						rt.Fatalf("stream %s record %d written %d times after restarts at %v ms", name, r, n, stops)
					}
				}
			}
		})
	})
}
