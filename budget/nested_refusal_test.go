package budget_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// An attempt that sends a second request through the Transport, keyed as
// its own provider, under a known limit the first spent: the budget
// refused the second and sent nothing, and forage.FromHTTP read the
// refusal (a *budget.Error inside the client's *url.Error) as the
// provider's permanent failure. The call stopped "permanent", without
// the quota's Until, and the provider's counters showed a failure it
// never made.
func TestABudgetsRefusalInsideAnAttemptStopsTheCallAsItself(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int64
		ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		cfg := fast()
		cfg.Limits = []budget.Limit{{Name: "3/min", Count: 3, Per: time.Minute, Burst: 2}}
		cfg.MaxWait = 100 * time.Millisecond
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
		client := &http.Client{Transport: budget.NewTransport(reg, ok)}
		p, err := reg.Get("api.example")
		if err != nil {
			t.Fatal(err)
		}
		requests := 1
		attempt := func(ctx context.Context) forage.Outcome {
			var out forage.Outcome
			for range requests {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
				resp, err := client.Do(req)
				if out = forage.FromHTTP(resp, err); out.Class() != forage.Success {
					return out
				}
				resp.Body.Close()
			}
			return out
		}
		if err := p.Do(context.Background(), nil, attempt); err != nil {
			t.Fatalf("first call (1 request of a burst of 2): %v", err)
		}
		requests = 2 // the second is the limit's third in a minute
		err = p.Do(context.Background(), nil, attempt)
		var e *budget.Error
		if !errors.As(err, &e) || e.Reason != forage.ReasonQuota || e.Until.IsZero() {
			t.Fatalf("second call, its second request over the limit: %v; want a quota stop with Until", err)
		}
		if n := sent.Load(); n != 2 {
			t.Errorf("%d requests sent, want 2", n)
		}
		if s := p.Snapshot(); s.Permanent != 0 {
			t.Errorf("the provider counted %d permanent failures for a request the budget never sent", s.Permanent)
		}
	})
}

// The same, with MaxInFlight 1: the second request of an attempt waits
// for a slot the attempt itself holds.
func TestASecondRequestOfAnAttemptDoesNotWaitForItsOwnSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		cfg := fast()
		cfg.MaxInFlight = 1
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
		client := &http.Client{Transport: budget.NewTransport(reg, ok)}
		p, _ := reg.Get("api.example")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := p.Do(ctx, nil, func(ctx context.Context) forage.Outcome {
			var out forage.Outcome
			for range 2 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
				resp, err := client.Do(req)
				if out = forage.FromHTTP(resp, err); out.Class() != forage.Success {
					return out
				}
				resp.Body.Close()
			}
			return out
		})
		if err != nil {
			t.Fatalf("an attempt of two requests with MaxInFlight 1: %v", err)
		}
	})
}
