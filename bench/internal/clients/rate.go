package clients

import (
	"context"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate returns a typical hand-written client: the workers share one
// rate.Limiter at a fixed guess of the limit (requests/s, burst 1) and wait
// on it before every request; a worker whose request is refused (429, 503,
// 418) sleeps the Retry-After if given, else 1s, then carries on.
func Rate(guess float64) Func {
	return func(ctx context.Context, rt http.RoundTripper, url string, workers int) {
		lim := rate.NewLimiter(rate.Limit(guess), 1)
		each(workers, func(limit int) {
			for n := 0; n < limit && lim.Wait(ctx) == nil; n++ {
				resp, err := Get(ctx, rt, url)
				if err == nil && Refusal(resp.StatusCode) {
					sleep(ctx, RetryAfter(resp, time.Second))
				}
			}
		})
	}
}

// Told returns the best a client told the limit can do against a provider
// that answers a refusal with a pause: the workers share one rate.Limiter
// at guess (requests/s, burst 1), and a refusal's Retry-After (1s if none),
// counted from when the refusal came back, holds every worker, not only the
// one refused, until it ends; the limiter then sends them on one interval
// apart. It measures what a provider's pause costs on top of arrival jitter
// when the limit is known: its goodput over a run is the most a client
// honouring every Retry-After can reach at that pacing on this machine.
func Told(guess float64) Func {
	return func(ctx context.Context, rt http.RoundTripper, url string, workers int) {
		lim := rate.NewLimiter(rate.Limit(guess), 1)
		var mu sync.Mutex
		var until time.Time // no request before it
		paused := func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return time.Until(until)
		}
		each(workers, func(limit int) {
			for n := 0; n < limit && ctx.Err() == nil; {
				if d := paused(); d > 0 {
					sleep(ctx, d)
					continue
				}
				if lim.Wait(ctx) != nil {
					return
				}
				if paused() > 0 {
					continue // a refusal came back while this worker waited for its slot
				}
				n++
				resp, err := Get(ctx, rt, url)
				if err == nil && Refusal(resp.StatusCode) {
					t := time.Now().Add(RetryAfter(resp, time.Second))
					mu.Lock()
					if t.After(until) {
						until = t
					}
					mu.Unlock()
				}
			}
		})
	}
}
