package schedule_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/schedule"
)

// Example_streams: many streams over many providers, resumable, head first,
// backfill when a provider is idle. Two simulated exchanges list two
// symbols each; every symbol is one declared stream, with a day of history
// to backfill and the head to follow every minute. The scheduler runs
// them all: no Worker, no glue. Checkpoints and candles are files, so
// running the same code again resumes where this run committed.
func Example_streams() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "forage-example-") // setup: a place for the files
	defer os.RemoveAll(dir)
	start := time.Now().Truncate(time.Minute)                                                          // the last closed candle's end
	exchanges := map[string]*providertest.Server{"binance": exchange(start), "bybit": exchange(start)} // setup: simulated providers

	reg, _ := budget.NewRegistry(budget.RegistryConfig{})
	cps, _ := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	defer cps.Close()
	s, _ := schedule.New(schedule.Config{Budget: reg, Checkpoints: cps}, schedule.NewMemoryJobStore(), nil)
	for name, ex := range exchanges {
		for _, sym := range []string{"BTCUSDT", "ETHUSDT"} {
			sink, _ := klines.OpenFileSink(dir, name+"-"+sym, "1m")
			defer sink.Close()
			back, head, _ := klines.Sources(&klines.Source{Client: ex.Client(), Base: "http://" + name, Symbol: sym, Interval: "1m",
				From: start.Add(-24 * time.Hour)}, start)
			_ = schedule.AddStream(ctx, s, schedule.Stream[klines.Candle]{Name: name + "/" + sym + "/1m", Provider: name,
				Backfill: back, Incremental: head, Every: time.Minute, Sink: sink})
		}
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()

	if err := s.Backfilled(ctx); err == nil { // the example stops once the history is in
		fmt.Println("every stream backfilled")
	}
	cancel()
	<-ran // setup: Run returns once every run ended and its outcome is written
	// Output:
	// every stream backfilled
}

// exchange is a simulated exchange listing BTCUSDT and ETHUSDT since two
// days before start, at a limit the collector is not told.
func exchange(start time.Time) *providertest.Server {
	listed := start.Add(-48 * time.Hour)
	srv, err := providertest.New(providertest.Config{
		Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}, {Name: "ETHUSDT", Listed: listed}},
		Limit:   providertest.Limit{Rate: 50, Burst: 5},
	})
	if err != nil {
		panic(err)
	}
	return srv
}
