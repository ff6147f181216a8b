package schedule_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
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

// The same host with a cursor feed declared as an Incremental alone: its
// job, idle after a run that reached the head in the first process, is
// what Backfilled took for done in the second, which returned nil at once
// with everything published in between uncollected. A stream done in an
// earlier process runs once again when it is declared.
func TestACursorFeedDoneBeforeARestartIsCollectedAgainToItsHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		published := 30 // events 1..published, five a page
		var have []int
		feed := slice.FetchFunc[int](func(_ context.Context, s slice.Slice) (slice.Page[int], forage.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			from := 0
			if len(s.After) > 0 {
				from, _ = strconv.Atoi(string(s.After))
			}
			to := min(from+5, published)
			var recs []int
			for id := from + 1; id <= to; id++ {
				recs = append(recs, id)
			}
			return slice.Page[int]{Records: recs, Next: []byte(strconv.Itoa(to)), Last: to == published}, forage.Outcome{Status: 200}
		})
		sink := slice.SinkFunc[int](func(_ context.Context, p slice.Page[int]) error {
			mu.Lock()
			defer mu.Unlock()
			have = append(have, p.Records...)
			return nil
		})
		jobs := schedule.NewMemoryJobStore()
		cps := checkpoint.NewMemoryStore(checkpoint.Config{})
		session := func() {
			ctx, cancel := context.WithCancel(context.Background())
			reg, _ := budget.NewRegistry(budget.RegistryConfig{})
			s, err := schedule.New(schedule.Config{Budget: reg, Checkpoints: cps}, jobs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := schedule.AddStream(ctx, s, schedule.Stream[int]{Name: "api/events", Provider: "api", Incremental: feed, Every: time.Hour, Sink: sink}); err != nil {
				t.Fatal(err)
			}
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx) }()
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
			err = s.Backfilled(wctx)
			wcancel()
			cancel()
			<-ran
			if err != nil {
				t.Fatalf("Backfilled: %v", err)
			}
		}
		session()
		time.Sleep(10 * time.Minute) // a restart well before the next run is due (Every)
		mu.Lock()
		published = 60
		mu.Unlock()
		session()
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(have)
		if want := 60; len(have) != want || have[0] != 1 || have[len(have)-1] != want {
			t.Fatalf("Backfilled said done with %d events stored (%v); want 1..%d, each once", len(have), have, want)
		}
	})
}
