package budget_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
)

// A provider that never answers, called through the Transport bounded by
// the caller's context (as the Transport's doc asks) or by the client's
// Timeout: each attempt ended by the deadline was read as the caller giving
// up, and the provider was never seen failing (10 timeouts, 0 failures, the
// breaker closed, the rate untouched).
func TestAProviderThatNeverAnswersIsSeenFailing(t *testing.T) {
	for _, clientTimeout := range []bool{false, true} {
		stop := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}))
		cfg := budget.Config{Adaptive: aimd.Config{Initial: 100, Max: 100}, Breaker: breaker.Config{MinRequests: 5}}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
		c := &http.Client{Transport: budget.NewTransport(reg, srv.Client().Transport)}
		if clientTimeout {
			c.Timeout = 30 * time.Millisecond
		}
		for range 10 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			if clientTimeout {
				ctx = context.Background()
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/x", nil)
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
			cancel()
		}
		r, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		p, _ := reg.Get(budget.HostKey(r))
		if s := p.Snapshot(); s.Transient < 5 {
			t.Errorf("client timeout %v: %d attempts timed out against a silent provider, %d counted as failures (breaker %s); want 5 or more (the breaker's MinRequests)",
				clientTimeout, s.Requests, s.Transient, s.Breaker)
		}
		close(stop)
		srv.Close()
	}
}

// A deadline that comes just after the attempt was sent, at a provider
// that answers in 100 ms (a caller's batch ending), is the caller's: not
// a failure of the provider.
func TestADeadlineJustAfterTheSendIsTheCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: budget.Config{Adaptive: aimd.Config{Initial: 100, Max: 100}}})
		slow := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			select {
			case <-time.After(100 * time.Millisecond):
				return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		})
		c := &http.Client{Transport: budget.NewTransport(reg, slow)}
		get := func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example.com/x", nil)
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		for range 5 {
			if err := get(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if err := get(ctx); err == nil {
			t.Fatal("a deadline 20 ms into a 100 ms answer: a response; want the deadline's error")
		}
		r, _ := http.NewRequest(http.MethodGet, "http://api.example.com/x", nil)
		p, _ := reg.Get(budget.HostKey(r))
		if s := p.Snapshot(); s.Transient != 0 {
			t.Fatalf("a deadline 20 ms into a 100 ms answer counted %d failures; want none", s.Transient)
		}
	})
}
