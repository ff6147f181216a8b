package budget_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

// An attempt of a provider with MaxInFlight 1 that fetches its page's
// details concurrently through a Transport keyed as the provider: each
// request borrowed the attempt's one slot, so all 8 went at once. Now one
// such request at a time borrows it, and MaxInFlight holds.
func TestConcurrentRequestsInsideAnAttemptKeepMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cur, peak atomic.Int64
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n := cur.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(100 * time.Millisecond)
			cur.Add(-1)
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		})
		reg := newRegistry(t, budget.RegistryConfig{Defaults: budget.Config{MaxInFlight: 1, Adaptive: aimd.Config{Initial: 1000, Max: 1000}}})
		client := &http.Client{Transport: budget.NewTransport(reg, rt)}
		p, _ := reg.Get("api.example")
		get := func(ctx context.Context) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		err := p.Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
			get(ctx) // the attempt's own request
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() { defer wg.Done(); get(ctx) }()
			}
			wg.Wait()
			return forage.Outcome{Status: 200}
		})
		if err != nil {
			t.Fatal(err)
		}
		if peak.Load() > 1 {
			t.Fatalf("MaxInFlight 1, but %d requests were in flight to the provider at once", peak.Load())
		}
	})
}
