package budget_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
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
		synctest.Test(t, func(t *testing.T) {
			silent := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				<-r.Context().Done()
				return nil, r.Context().Err()
			})
			cfg := budget.Config{Adaptive: aimd.Config{Initial: 100, Max: 100}, Breaker: breaker.Config{MinRequests: 5}}
			reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
			c := &http.Client{Transport: budget.NewTransport(reg, silent)}
			if clientTimeout {
				c.Timeout = 2 * time.Second
			}
			for range 10 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if clientTimeout {
					ctx = context.Background()
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example.com/x", nil)
				if resp, err := c.Do(req); err == nil {
					resp.Body.Close()
				}
				cancel()
			}
			r, _ := http.NewRequest(http.MethodGet, "http://api.example.com/x", nil)
			p, _ := reg.Get(budget.HostKey(r))
			if s := p.Snapshot(); s.Transient < 10 {
				t.Errorf("client timeout %v: %d attempts timed out after 2 s against a silent provider, %d counted as failures (breaker %s); want every one",
					clientTimeout, s.Requests, s.Transient, s.Breaker)
			}
		})
	}
}

// A deadline that comes just after the attempt was sent, at a provider
// that answers in 100 ms (a caller's batch ending), is the caller's: not
// a failure of the provider, before its first success too (eight requests
// in flight at a cold batch's end counted as eight failures).
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
		// Cold (no success yet: a batch's end meets the first requests)
		// and warm.
		for i := range 6 {
			if i > 0 {
				if err := get(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if i == 0 || i == 5 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				if err := get(ctx); err == nil {
					t.Fatal("a deadline 20 ms into a 100 ms answer: a response; want the deadline's error")
				}
				cancel()
			}
		}
		r, _ := http.NewRequest(http.MethodGet, "http://api.example.com/x", nil)
		p, _ := reg.Get(budget.HostKey(r))
		if s := p.Snapshot(); s.Transient != 0 {
			t.Fatalf("a deadline 20 ms into a 100 ms answer counted %d failures; want none", s.Transient)
		}
	})
}

// trickle is a body that gives a byte every 200 ms until ctx ends, then
// the context's error, as a host that tarpits its answers does.
type trickle struct{ ctx context.Context }

func (b trickle) Read(p []byte) (int, error) {
	select {
	case <-time.After(200 * time.Millisecond):
		p[0] = 'x'
		return 1, nil
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
}

func (trickle) Close() error { return nil }

// A host that sends its headers at once, then its body a byte every 200
// ms, fetched through the Transport under a 1.5 s deadline (as its doc
// asks): each fetch ends in the deadline, mid-body. Each was counted a
// success (the caller "gave up"), and the rate rose from 4/s to 9/s; now
// each is the provider's failure, as a host that stalls its headers is.
// A cancel mid-body, and a deadline just after the send, stay the
// caller's.
func TestAHostThatStallsItsBodyIsSeenFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tarpit := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: trickle{r.Context()}, Request: r}, nil
		})
		reg := newRegistry(t, budget.RegistryConfig{Defaults: budget.Config{Adaptive: aimd.Config{Initial: 4}}})
		c := &http.Client{Transport: budget.NewTransport(reg, tarpit)}
		fetch := func(ctx context.Context) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://tarpit.example/x", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("the headers came at once, yet: %v", err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		for range 4 {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			fetch(ctx)
			cancel()
		}
		p, _ := reg.Lookup("tarpit.example")
		s := p.Snapshot()
		if s.OK != 0 || s.Transient != 4 || s.Rate > 4 {
			t.Fatalf("4 fetches whose bodies stalled to the deadline: ok %d, transient %d, rate %.1f; want 0, 4, and the rate not raised", s.OK, s.Transient, s.Rate)
		}
		// The caller's: a cancel mid-body, and a deadline 100 ms after the send.
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(1500*time.Millisecond, cancel)
		fetch(ctx)
		ctx, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
		fetch(ctx)
		cancel2()
		if s := p.Snapshot(); s.Transient != 4 || s.OK != 2 {
			t.Fatalf("a cancel mid-body and a deadline 100 ms after the send: ok %d, transient %d; want 2 more successes and no more failures", s.OK, s.Transient)
		}
		// A body the caller never reads nor closes, its deadline long after
		// the send: the provider answered; the caller did not wait for it.
		ctx, cancel3 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://tarpit.example/x", nil)
		if _, err := c.Do(req); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		cancel3()
		synctest.Wait()
		if s := p.Snapshot(); s.Transient != 4 || s.OK != 3 {
			t.Fatalf("a body never read, its deadline 1.5 s after the send: ok %d, transient %d; want one more success", s.OK, s.Transient)
		}
	})
}

// A slice Source's Fetch runs inside an attempt of the stream's provider
// ("myapi"), and its client's Transport keys by host: the request is paced
// by the host's provider but sent once, not retried there, and not counted
// in the run a second time: the Do around it retries the attempt and
// counts it. Retried in both, a provider that always answers 503 was sent
// 7 requests under a request cap of 4. A Warn says once that the keys
// differ.
func TestARequestInsideAnotherProvidersAttemptIsSentOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int64
		down := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		var logs strings.Builder
		cfg := fast()
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
		client := &http.Client{Transport: budget.NewTransport(reg, down)}
		outer, _ := reg.Get("myapi")
		run, err := budget.NewRun(budget.Envelope{MaxRequests: 4})
		if err != nil {
			t.Fatal(err)
		}
		err = outer.Do(context.Background(), run, func(ctx context.Context) forage.Outcome {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example.com/events", nil)
			resp, err := client.Do(req)
			return forage.FromHTTP(resp, err)
		})
		if err == nil {
			t.Fatal("a provider that answers 503 to all: no error")
		}
		if n := sent.Load(); n > 4 {
			t.Errorf("%d requests sent under a request cap of 4", n)
		}
		if n := strings.Count(logs.String(), "keyed to another by a Transport"); n != 1 {
			t.Errorf("the keys that differ were said %d times, want once:\n%s", n, logs.String())
		}
	})
}
