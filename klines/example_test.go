package klines_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/slice"
)

// Example collects a symbol's hourly candles into a file, resumably: a
// Source asks a Binance-compatible API (here a simulated one) for the
// candles after the committed cursor, a FileSink stores them, and a slice
// runner commits the cursor once the sink has them.
func Example() {
	now := func() time.Time { return time.Date(2024, 3, 1, 12, 30, 0, 0, time.UTC) } // setup: a stopped clock
	listed := time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)
	exchange, _ := providertest.New(providertest.Config{Now: now, Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
	dir, _ := os.MkdirTemp("", "klines-example") // setup
	defer os.RemoveAll(dir)

	src := &klines.Source{Client: exchange.Client(), Base: "https://api.exchange.test", Symbol: "BTCUSDT", Interval: "1h", Page: 2, From: listed, Now: now}
	if err := src.Init(); err != nil {
		panic(err)
	}
	sink, _ := klines.OpenFileSink(dir, "BTCUSDT", "1h")
	defer sink.Close()
	provider, _ := budget.NewLocal("exchange", budget.Config{Adaptive: aimd.Config{Initial: 1000}}) // setup: keep the example fast
	r, _ := slice.New(slice.Config[klines.Candle]{
		Stream: "exchange/BTCUSDT/1h", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
		Provider: provider, Source: src, Sink: sink,
	})
	rep, err := r.Run(context.Background(), nil)
	last, _ := klines.DecodeCursor(rep.Cursor)
	fmt.Println("err:", err, "candles:", rep.Records, "last:", last.Format("15:04"))

	lines, _ := klines.Export(dir, "BTCUSDT", "1h")
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// err: <nil> candles: 4 last: 11:00
	// 1709280000000,106167.86608657,108650.11759104,106140.81848370,108219.08835067,28.16342492
	// 1709283600000,108219.08835067,108552.93647970,106818.39127451,107242.51940918,14.67335987
	// 1709287200000,107242.51940918,107301.56168980,103929.99820456,104173.74606530,23.07604252
	// 1709290800000,104173.74606530,104322.15343425,102379.95629101,102691.06822014,35.50367799
}

// ExampleDecodeCursor reads a plain cursor: the open time of the last
// candle a stream has covered, in Unix milliseconds, which a host may show
// or commit to start a stream at a given candle.
func ExampleDecodeCursor() {
	c := strconv.AppendInt(nil, time.Date(2024, 3, 1, 11, 0, 0, 0, time.UTC).UnixMilli(), 10)
	t, err := klines.DecodeCursor(c)
	fmt.Println(string(c), t, err)
	// Output: 1709290800000 2024-03-01 11:00:00 +0000 UTC <nil>
}
