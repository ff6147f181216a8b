package clients

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Func is one client: it drives workers goroutines, each sending one request
// at a time to url through rt, until ctx ends or the worker has sent
// [MaxPerWorker] requests, and returns when they all have. A Func run inside
// a testing/synctest bubble makes only fake timers.
type Func func(ctx context.Context, rt http.RoundTripper, url string, workers int)

// MaxPerWorker bounds the requests one worker sends, whatever happens: a
// client that stopped waiting (on a bug, or an error answered at once)
// still ends, in real time and in a synctest bubble alike, where a loop
// that never blocks would keep the fake clock from moving. No measured run
// comes near it.
const MaxPerWorker = 1 << 20

// Get sends one GET url through rt. It drains and closes the body, so the
// caller reads only the status and headers.
func Get(ctx context.Context, rt http.RoundTripper, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	drain(resp)
	return resp, nil
}

// drain reads a bounded amount of resp's body and closes it, so the
// connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
}

// Refusal reports whether status is the provider refusing a request for its
// rate: 429, 503, or Binance's 418 ban.
func Refusal(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == http.StatusTeapot
}

// RetryAfter returns resp's Retry-After in whole seconds, or def if it has
// none (or one that is not a number of seconds).
func RetryAfter(resp *http.Response, def time.Duration) time.Duration {
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || s < 0 {
		return def
	}
	return time.Duration(s) * time.Second
}

// each runs f in workers goroutines and returns when they all have. f gets
// the worker's loop bound: it must stop after that many requests.
func each(workers int, f func(max int)) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { f(MaxPerWorker) })
	}
	wg.Wait()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
