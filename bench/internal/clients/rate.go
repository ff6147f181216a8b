package clients

import (
	"context"
	"net/http"
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
