package providertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// fixed is a clock stopped at 2024-03-01 12:30 UTC (setup, not the lesson).
func fixed() time.Time { return time.Date(2024, 3, 1, 12, 30, 0, 0, time.UTC) }

// Example points a collector's HTTP client, paced by a budget.Transport,
// at a provider whose limit it is not told (5 requests a minute), then reads
// what the provider saw: five answers, one 429 with Retry-After, and the
// collector stopping there rather than waiting out the minute past its
// run's deadline.
func Example() {
	exchange, _ := providertest.New(providertest.Config{
		Now:   fixed, // setup: a stopped clock, so the output is exact
		Limit: providertest.Limit{Count: 5, Window: time.Minute},
	})

	reg, _ := budget.NewRegistry(budget.RegistryConfig{
		Defaults: budget.Config{Adaptive: aimd.Config{Initial: 1000}}, // setup: keep the example fast
	})
	client := &http.Client{Transport: budget.NewTransport(reg, exchange.Client().Transport)}
	run, _ := budget.NewRun(budget.Envelope{Deadline: time.Now().Add(10 * time.Second)})
	ctx := budget.WithCall(context.Background(), run)

	for range 10 {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.exchange.test/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=2", nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println("stopped:", err)
			break
		}
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ")
		if resp.StatusCode != http.StatusOK {
			fmt.Println("Retry-After", resp.Header.Get("Retry-After"))
			break
		}
	}
	st := exchange.Stats()
	fmt.Printf("requests %d ok %d throttled %d banned %d candles %d\n", st.Requests, st.OK, st.Throttled, st.Banned, st.Candles)
	// Output:
	// 200 200 200 200 200 429 Retry-After 60
	// requests 6 ok 5 throttled 1 banned 0 candles 10
}

// ExampleNew asks for the last three hourly candles with the explicit-time
// form: two closed ones and the forming one, which ends after now.
func ExampleNew() {
	s, err := providertest.New(providertest.Config{Now: fixed})
	if err != nil {
		panic(err)
	}
	ks, _ := s.KlinesAt(fixed(), providertest.Query{Symbol: "BTCUSDT", Interval: "1h", Limit: 3})
	for _, k := range ks {
		open := time.UnixMilli(k.OpenTime).UTC().Format("15:04")
		forming := k.CloseTime >= fixed().UnixMilli()
		fmt.Println(open, "forming:", forming)
	}
	// Output:
	// 10:00 forming: false
	// 11:00 forming: false
	// 12:00 forming: true
}

// ExampleServer_Client fetches klines over HTTP in memory, then asks for
// an unknown symbol and gets Binance's error.
func ExampleServer_Client() {
	s, _ := providertest.New(providertest.Config{Now: fixed})
	c := s.Client()

	resp, _ := c.Get("http://api.binance.test/api/v3/klines?symbol=ETHUSDT&interval=1m&startTime=1709294400000&limit=2")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rows [][]json.RawMessage // Binance's array of arrays, open time first
	_ = json.Unmarshal(body, &rows)
	fmt.Println(resp.StatusCode, len(rows), string(rows[0][0]), string(rows[1][0]))

	resp, _ = c.Get("http://api.binance.test/api/v3/klines?symbol=NOPE&interval=1m")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 2 1709294400000 1709294460000
	// 400 {"code":-1121,"msg":"Invalid symbol."}
}

// ExampleServer_Stats shows a GCRA limit of 1 request per second with a burst
// of 2: three requests at one instant, the third throttled with Retry-After.
func ExampleServer_Stats() {
	s, _ := providertest.New(providertest.Config{Now: fixed, Limit: providertest.Limit{Rate: 1, Burst: 2}})
	c := s.Client()
	for range 3 {
		resp, _ := c.Get("http://sim/api/v3/time")
		resp.Body.Close()
		fmt.Printf("%d Retry-After=%q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	st := s.Stats()
	fmt.Printf("requests %d ok %d throttled %d peak/s %d limit %v\n", st.Requests, st.OK, st.Throttled, st.MaxPerSecond, st.Limit)
	// Output:
	// 200 Retry-After=""
	// 200 Retry-After=""
	// 429 Retry-After="1"
	// requests 3 ok 2 throttled 1 peak/s 2 limit gcra 1/s burst 2
}

// ExampleServer_SetLimit tightens the true limit mid-run, as a provider might.
func ExampleServer_SetLimit() {
	s, _ := providertest.New(providertest.Config{Now: fixed, Limit: providertest.Limit{Count: 1200, Window: time.Minute}})
	if err := s.SetLimit(providertest.Limit{Count: 2, Window: time.Minute}); err != nil {
		panic(err)
	}
	c := s.Client()
	for range 3 {
		resp, _ := c.Get("http://sim/api/v3/ping")
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ")
	}
	fmt.Println(s.Stats().Limit)
	// Output: 200 200 429 fixed-window 2/1m0s
}

// ExampleServer_loopback serves on a real loopback port for wall-clock
// runs: a Server is an http.Handler.
func ExampleServer_loopback() {
	s, _ := providertest.New(providertest.Config{Now: fixed})
	l := httptest.NewServer(s)
	defer l.Close()
	resp, err := http.Get(l.URL + "/api/v3/time")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 {"serverTime":1709296200000}
}

// ExampleLie makes the klines endpoint drop the middle row of every answer
// after the first: a collector under test must not store the hole as
// history. KlinesAt still tells the truth to compare with.
func ExampleLie() {
	s, _ := providertest.New(providertest.Config{Now: fixed, Lie: providertest.Lie{DropRows: true, After: 1}})
	c := s.Client()
	for range 2 {
		resp, _ := c.Get("http://exchange.test/api/v3/klines?symbol=BTCUSDT&interval=1h&limit=3")
		var rows []json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&rows)
		resp.Body.Close()
		fmt.Print(len(rows), " rows; ")
	}
	truth, _ := s.KlinesAt(fixed(), providertest.Query{Symbol: "BTCUSDT", Interval: "1h", Limit: 3})
	fmt.Println("truth:", len(truth), "rows")
	// Output: 3 rows; 2 rows; truth: 3 rows
}
