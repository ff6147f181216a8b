// Command quickstart paces requests to a rate-limited HTTP server with a
// gcra.Limiter and shows that pacing at the provider's rate draws no 429s.
//
// It starts an in-process server on loopback that enforces 20 requests per
// second itself (with its own gcra.Limiter, answering 429 Too Many Requests
// when a request does not conform), then sends 60 requests through a client
// limiter at 20 per second with a burst of 5, waiting for each slot with
// Wait. It prints how many requests were sent, how many got 200 and 429, the
// elapsed time and the achieved rate. It takes about three seconds and needs
// no flags.
//
// The server tolerates a burst of 10 while the client bursts only 5: the
// difference absorbs network and timer jitter, which would otherwise make a
// client that paces exactly at the limit occasionally arrive early.
package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/forage-go/forage/gcra"
)

const (
	rate     = 20 // requests per second, on both sides
	burst    = 5  // the client's burst
	requests = 60
)

func main() {
	server, err := gcra.New(gcra.Config{Rate: rate, Burst: 10})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := server.AllowAt(time.Now())
		if !res.Allowed {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(res.RetryAfter.Seconds()))))
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	client, err := gcra.New(gcra.Config{Rate: rate, Burst: burst})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	codes := map[int]int{}
	start := time.Now()
	for range requests {
		if err := client.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		resp, err := http.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	elapsed := time.Since(start)

	fmt.Printf("sent %d requests paced at %d/s (burst %d)\n", requests, rate, burst)
	fmt.Printf("  200 OK:                %d\n", codes[http.StatusOK])
	fmt.Printf("  429 Too Many Requests: %d\n", codes[http.StatusTooManyRequests])
	fmt.Printf("elapsed %v: %.1f requests/s overall, %.1f/s after the initial burst\n",
		elapsed.Round(time.Millisecond), float64(requests)/elapsed.Seconds(), float64(requests-burst)/elapsed.Seconds())
}
