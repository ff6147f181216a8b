package clients

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// Forage calls through one budget.NewLocal Provider made with the zero Config:
// it is told nothing of the limit. Source pressure is waited out the way a
// scheduler does, until the stop's Until; this loop is budget's
// TestGoodput's.
func Forage(ctx context.Context, rt http.RoundTripper, url string, workers int) {
	p, err := budget.NewLocal("sim", budget.Config{})
	if err != nil {
		panic(err) // the zero Config is valid
	}
	attempt := func(ctx context.Context) forage.Outcome {
		return forage.FromHTTP(Get(ctx, rt, url))
	}
	each(workers, func(limit int) {
		for n := 0; n < limit && ctx.Err() == nil; n++ {
			err := p.Do(ctx, nil, attempt)
			if r, _ := budget.ReasonOf(err); r == forage.ReasonCanceled {
				return
			}
			var stop *budget.Error
			if errors.As(err, &stop) && stop.Until.After(time.Now()) {
				sleep(ctx, time.Until(stop.Until))
			}
		}
	})
}

// crawlPause is how long a Crawl worker waits after an error that came
// without a time to resume at (no response at all, e.g. a refused
// connection after the transport's own retries), so it does not spin.
const crawlPause = 100 * time.Millisecond

// Crawl is a crawler as a user of forage writes one: an http.Client whose
// Transport is budget.NewTransport over rt, with a zero-Config Registry (the
// limit is discovered, not told), and workers that GET url in a loop. The
// transport paces, retries and returns the provider's last answer; a worker
// just reads it and sends the next request. A call the budget stopped with
// a time to resume at ([budget.Error]'s Until: a long Retry-After, a ban,
// an open breaker) is waited out; any other error pauses the worker for
// 100ms.
func Crawl(ctx context.Context, rt http.RoundTripper, url string, workers int) {
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		panic(err) // the zero RegistryConfig is valid
	}
	c := &http.Client{Transport: budget.NewTransport(reg, rt)}
	each(workers, func(limit int) {
		for n := 0; n < limit && ctx.Err() == nil; n++ {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				panic(err) // the caller's url is fixed and valid
			}
			resp, err := c.Do(req)
			if err == nil {
				drain(resp)
				continue
			}
			var stop *budget.Error
			if errors.As(err, &stop) && stop.Until.After(time.Now()) {
				sleep(ctx, time.Until(stop.Until))
			} else {
				sleep(ctx, crawlPause)
			}
		}
	})
}
