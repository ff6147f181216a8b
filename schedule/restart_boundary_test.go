package schedule_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// A host that collects up to now and stops (see Backfilled) over a job
// store that outlives the process (here one memory store shared by two
// Schedulers, as pgstore's would be): the second start, two hours later,
// declares the same backfill-only stream up to its new now. Backfilled
// returned nil at once, taking the first start's success for this one's,
// and the two hours were never collected.
func TestABackfillFinishedBeforeARestartRunsToTheNewBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now().Truncate(time.Minute)
		srv, err := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: start.Add(-48 * time.Hour)}}})
		if err != nil {
			t.Fatal(err)
		}
		jobs := schedule.NewMemoryJobStore()
		cps := checkpoint.NewMemoryStore(checkpoint.Config{})
		var mu sync.Mutex
		have := map[int64]bool{}
		sink := slice.SinkFunc[klines.Candle](func(_ context.Context, p slice.Page[klines.Candle]) error {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range p.Records {
				have[c.OpenTime.UnixMilli()] = true
			}
			return nil
		})
		from := start.Add(-6 * time.Hour)
		session := func(boundary time.Time) {
			ctx, cancel := context.WithCancel(context.Background())
			reg, _ := budget.NewRegistry(budget.RegistryConfig{})
			s, err := schedule.New(schedule.Config{Budget: reg, Checkpoints: cps}, jobs, nil)
			if err != nil {
				t.Fatal(err)
			}
			back, _, err := klines.Sources(&klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", From: from}, boundary)
			if err != nil {
				t.Fatal(err)
			}
			if err := schedule.AddStream(ctx, s, schedule.Stream[klines.Candle]{Name: "sim/BTCUSDT/1m", Provider: "sim", Backfill: back, Sink: sink}); err != nil {
				t.Fatal(err)
			}
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx) }()
			wctx, wcancel := context.WithTimeout(ctx, time.Hour)
			err = s.Backfilled(wctx)
			wcancel()
			cancel()
			<-ran
			if err != nil {
				t.Fatalf("Backfilled: %v", err)
			}
		}
		session(start)
		mu.Lock()
		n1 := len(have)
		mu.Unlock()
		time.Sleep(2 * time.Hour)
		now := time.Now().Truncate(time.Minute)
		session(now)
		mu.Lock()
		n2 := len(have)
		mu.Unlock()
		want := int(now.Sub(from) / time.Minute)
		t.Logf("after session 1: %d candles; after session 2: %d; want %d", n1, n2, want)
		if n2 != want {
			t.Fatalf("Backfilled said done with %d of %d candles up to the second start", n2, want)
		}
	})
}
