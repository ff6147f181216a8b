package bench_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/forage-go/forage/budget"
)

// clients returns the columns: forage first (the one held to targets), then
// x/time/rate at three fixed guesses of the limit, then the AWS SDK's
// adaptive mode.
func clients() []client {
	return []client{
		{"forage", "forage (zero Config)", runForage},
		{"rate25", "x/time/rate 25/s", runRate(25)},
		{"rate50", "x/time/rate 50/s", runRate(50)},
		{"rate100", "x/time/rate 100/s", runRate(100)},
		{"aws", "AWS SDK adaptive", runAWS},
	}
}

// each runs f in workers goroutines and returns when they all have.
func each(workers int, f func()) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(f)
	}
	wg.Wait()
}

// runForage calls one budget.Local Provider made with the zero Config: it is
// told nothing of the limit. Source pressure is waited out the way a
// scheduler does, until the stop's Until; this loop is budget's TestGoodput's.
func runForage(ctx context.Context, rt http.RoundTripper, workers int) {
	p, err := budget.NewLocal("sim", budget.Config{})
	if err != nil {
		panic(err) // the zero Config is valid
	}
	attempt := func(ctx context.Context) budget.Outcome {
		return budget.FromHTTP(get(ctx, rt))
	}
	each(workers, func() {
		for ctx.Err() == nil {
			err := p.Do(ctx, nil, attempt)
			if r, _ := budget.ReasonOf(err); r == budget.ReasonCanceled {
				return
			}
			var stop *budget.Error
			if errors.As(err, &stop) && stop.Until.After(time.Now()) {
				sleep(ctx, time.Until(stop.Until))
			}
		}
	})
}

// runRate is a typical hand-written client: the workers share one
// rate.Limiter at a fixed guess of the limit (burst 1) and wait on it before
// every request; a worker whose request is refused (429, 503, 418) sleeps the
// Retry-After if given, else 1s, then carries on.
func runRate(guess float64) func(context.Context, http.RoundTripper, int) {
	return func(ctx context.Context, rt http.RoundTripper, workers int) {
		lim := rate.NewLimiter(rate.Limit(guess), 1)
		each(workers, func() {
			for lim.Wait(ctx) == nil {
				resp, err := get(ctx, rt)
				if err == nil && refusal(resp.StatusCode) {
					sleep(ctx, retryAfter(resp, time.Second))
				}
			}
		})
	}
}

// retryAfter returns resp's Retry-After in seconds, or def if it has none.
func retryAfter(resp *http.Response, def time.Duration) time.Duration {
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || s < 0 {
		return def
	}
	return time.Duration(s) * time.Second
}
