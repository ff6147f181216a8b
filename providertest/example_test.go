package providertest_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/forage-go/forage/providertest"
)

// fixed is a clock stopped at 2024-03-01 12:30 UTC (setup, not the lesson).
func fixed() time.Time { return time.Date(2024, 3, 1, 12, 30, 0, 0, time.UTC) }

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

// ExampleServer_Transport fetches klines over HTTP in memory, then asks for
// an unknown symbol and gets Binance's error.
func ExampleServer_Transport() {
	s, _ := providertest.New(providertest.Config{Now: fixed})
	c := &http.Client{Transport: s.Transport()}

	resp, _ := c.Get("http://api.binance.test/api/v3/klines?symbol=ETHUSDT&interval=1m&startTime=1709294400000&limit=2")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ks, _ := providertest.ParseKlines(body)
	fmt.Println(resp.StatusCode, len(ks), ks[0].OpenTime, ks[1].OpenTime-ks[0].OpenTime)

	resp, _ = c.Get("http://api.binance.test/api/v3/klines?symbol=NOPE&interval=1m")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 2 1709294400000 60000
	// 400 {"code":-1121,"msg":"Invalid symbol."}
}

// ExampleServer_Stats shows a GCRA limit of 1 request per second with a burst
// of 2: three requests at one instant, the third throttled with Retry-After.
func ExampleServer_Stats() {
	s, _ := providertest.New(providertest.Config{Now: fixed, Limit: providertest.RateLimit(1, 2)})
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
	s, _ := providertest.New(providertest.Config{Now: fixed, Limit: providertest.WindowLimit(1200, time.Minute)})
	if err := s.SetLimit(providertest.WindowLimit(2, time.Minute)); err != nil {
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

// ExampleServer_Listen serves on a real loopback port for wall-clock runs.
func ExampleServer_Listen() {
	s, _ := providertest.New(providertest.Config{Now: fixed})
	l, err := s.Listen()
	if err != nil {
		panic(err)
	}
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

// ExampleParseKlines decodes a Binance klines body.
func ExampleParseKlines() {
	body := []byte(`[[1709294400000,"62000.10000000","62100.00000000","61950.00000000","62050.00000000","12.50000000",1709294459999,"775625.00000000",321,"6.00000000","372300.00000000","0"]]`)
	ks, err := providertest.ParseKlines(body)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ks), ks[0].OpenTime, ks[0].Close, ks[0].Trades)
	// Output: 1 1709294400000 62050.00000000 321
}
