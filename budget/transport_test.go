package budget_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

// scripted is a base RoundTripper answering each request with the next
// status of a script, recording what it saw and which bodies were closed.
type scripted struct {
	mu      sync.Mutex
	codes   []int
	seen    []string // method + body of each request
	bodies  []*trackedBody
	headers http.Header
}

type trackedBody struct {
	io.Reader
	closed bool
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	s.seen = append(s.seen, req.Method+" "+string(body))
	code := s.codes[min(len(s.seen)-1, len(s.codes)-1)]
	b := &trackedBody{Reader: strings.NewReader("answer")}
	s.bodies = append(s.bodies, b)
	h := http.Header{}
	for k, v := range s.headers {
		h[k] = v
	}
	return &http.Response{StatusCode: code, Header: h, Body: b, Request: req}, nil
}

func transportClient(t *testing.T, base http.RoundTripper) (*http.Client, *budget.Registry) {
	t.Helper()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: fast()})
	return &http.Client{Transport: budget.NewTransport(reg, base)}, reg
}

// TestTransportRetriesSafeRequests: a GET answered 503, 503, 200 is retried
// to success; the discarded responses' bodies are closed.
func TestTransportRetriesSafeRequests(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{codes: []int{503, 503, 200}}
		client, reg := transportClient(t, base)
		resp, err := client.Get("http://api.example.com/v1/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || len(base.seen) != 3 {
			t.Fatalf("status %d after %d attempts, want 200 after 3", resp.StatusCode, len(base.seen))
		}
		for i, b := range base.bodies[:2] {
			if !b.closed {
				t.Fatalf("discarded body %d not closed", i)
			}
		}
		if _, ok := reg.Lookup("api.example.com"); !ok {
			t.Fatal("no provider keyed by the host")
		}
	})
}

// TestTransportReturnsLastResponse: when it gives up, the caller gets the
// provider's last answer, not an error.
func TestTransportReturnsLastResponse(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{codes: []int{404}}
		client, _ := transportClient(t, base)
		resp, err := client.Get("http://api.example.com/missing")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 || len(base.seen) != 1 {
			t.Fatalf("status %d after %d attempts, want 404 after 1", resp.StatusCode, len(base.seen))
		}
	})
}

// TestTransportNeverReplaysUnsafeBodies: a POST whose body cannot be
// replayed is sent once; one with GetBody and an idempotency key is
// retried with its body.
func TestTransportNeverReplaysUnsafeBodies(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{codes: []int{503, 200}}
		client, _ := transportClient(t, base)
		req, _ := http.NewRequest(http.MethodPost, "http://api.example.com/orders", io.NopCloser(strings.NewReader("once")))
		req.GetBody = nil
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || len(base.seen) != 1 {
			t.Fatalf("unsafe POST: status %d after %d attempts, want 503 after 1", resp.StatusCode, len(base.seen))
		}

		base2 := &scripted{codes: []int{503, 200}}
		client2, _ := transportClient(t, base2)
		req2, _ := http.NewRequest(http.MethodPost, "http://api.example.com/orders", bytes.NewReader([]byte("again")))
		req2.Header.Set("Idempotency-Key", "order-7")
		resp2, err := client2.Do(req2)
		if err != nil {
			t.Fatal(err)
		}
		resp2.Body.Close()
		if resp2.StatusCode != 200 || len(base2.seen) != 2 || base2.seen[1] != "POST again" {
			t.Fatalf("replayable POST: status %d, seen %q", resp2.StatusCode, base2.seen)
		}
	})
}

// TestTransportSendsAPostWithoutIdempotencyKeyOnce: a POST whose body
// http.NewRequest can replay (GetBody set) but that carries no idempotency
// key is sent exactly once, whatever the answer, as net/http itself would:
// the provider may have acted on it. Before, two 502s made three orders.
func TestTransportSendsAPostWithoutIdempotencyKeyOnce(t *testing.T) {
	t.Parallel()
	for _, code := range []int{200, 429, 500, 502, 503, 504, 404} {
		synctest.Test(t, func(t *testing.T) {
			base := &scripted{codes: []int{code, 200}}
			client, _ := transportClient(t, base)
			req, _ := http.NewRequest(http.MethodPost, "http://api.example.com/orders", strings.NewReader("buy 1"))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if len(base.seen) != 1 || resp.StatusCode != code {
				t.Fatalf("answer %d: sent %d times, status %d; want once, %d", code, len(base.seen), resp.StatusCode, code)
			}
		})
	}
}

// TestTransportDoesNotSendWhatItCannotPaceInTime: a request whose context
// deadline comes before its host's next pacing slot is not sent: RoundTrip
// fails at once with a budget stop, rather than waiting out the deadline
// or sending late.
func TestTransportDoesNotSendWhatItCannotPaceInTime(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]budget.Config{
		"known limit":   {Limits: []budget.Limit{{Count: 1, Per: 10 * time.Second}}},
		"learned pacer": {Adaptive: aimd.Config{Initial: 0.1}}, // one request per 10 s
	} {
		synctest.Test(t, func(t *testing.T) {
			base := &scripted{codes: []int{200}}
			reg := newRegistry(t, budget.RegistryConfig{Overrides: map[string]budget.Config{"slow.example.com": cfg}})
			client := &http.Client{Transport: budget.NewTransport(reg, base)}
			resp, err := client.Get("http://slow.example.com/a") // takes the slot of the next 10 s
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://slow.example.com/b", nil)
			resp, err = client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			var stop *budget.Error
			if !errors.As(err, &stop) || len(base.seen) != 1 || time.Since(start) != 0 {
				t.Fatalf("%s: GET with 1 s left before a 10 s slot: err %v after %v, %d sent; want a budget stop at once, 1 sent",
					name, err, time.Since(start), len(base.seen))
			}
		})
	}
}

// TestTransportRunFromContext: attempts count against the run carried by
// the request context, and a spent run stops the request with its reason.
// A WithCall with a nil run (options only) keeps the run ctx carries.
func TestTransportRunFromContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{codes: []int{200}}
		client, _ := transportClient(t, base)
		run := newRun(t, budget.Envelope{MaxRequests: 2})
		ctx := budget.WithCall(budget.WithCall(context.Background(), run), nil, budget.CallOption{Weight: 1})
		for range 2 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://a.example/", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://a.example/", nil)
		_, err := client.Do(req)
		if r, ok := budget.ReasonOf(err); !ok || r != forage.ReasonRequestCap {
			t.Fatalf("third request: %v, want request_cap", err)
		}
		if run.Attempts() != 2 {
			t.Fatalf("run counted %d attempts, want 2", run.Attempts())
		}
	})
}

// TestHostKey normalises hosts: lower case, default ports dropped, and
// every spelling of one origin one key. Before, a zero-padded port
// (":0443", ":08080") or a trailing dot made a key of its own, and a
// crawler fed such links paced each spelling apart: 30 requests in 2 s to
// a server its one budget held at 5/s.
func TestHostKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://API.Example.com/x":      "api.example.com",
		"http://api.example.com:80/x":   "api.example.com",
		"https://api.example.com:443/x": "api.example.com",
		"https://api.example.com:8443/": "api.example.com:8443",
		"https://[::1]:443/":            "[::1]",
		"https://[::1]/":                "[::1]",
		"http://[::1]:8080/":            "[::1]:8080",
		"http://127.0.0.1:8080/":        "127.0.0.1:8080",
		"http://127.0.0.1:08080/":       "127.0.0.1:8080",
		"http://127.0.0.1:0008080/":     "127.0.0.1:8080",
		"https://api.example.com:0443/": "api.example.com",
		"http://api.example.com:080/":   "api.example.com",
		"http://API.example.com./x":     "api.example.com",
		"http://api.example.com.:81/":   "api.example.com:81",
	} {
		req, _ := http.NewRequest(http.MethodGet, in, nil)
		if got := budget.HostKey(req); got != want {
			t.Errorf("HostKey(%s) = %q, want %q", in, got, want)
		}
	}
}

// ctxBody fails reads once its request's context is done, like a real
// connection's body.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}
func (b *ctxBody) Close() error { return nil }

// TestTransportBodyOutlivesAttempt: the body is read after RoundTrip
// returns, so the attempt's context must not be cancelled with the attempt.
func TestTransportBodyOutlivesAttempt(t *testing.T) {
	t.Parallel()
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: &ctxBody{req.Context(), strings.NewReader("payload")}}, nil
	})
	cfg := fast()
	cfg.AttemptTimeout = time.Minute // would cancel the body's context if applied
	reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
	client := &http.Client{Transport: budget.NewTransport(reg, base)}
	resp, err := client.Get("http://a.example/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "payload" {
		t.Fatalf("body %q, %v: read after RoundTrip failed", body, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeTracker records whether a request body was closed.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

// TestTransportClosesUnsentBody: a request the budget stops before any
// attempt still has its body closed, as a RoundTripper must.
func TestTransportClosesUnsentBody(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		client, _ := transportClient(t, &scripted{codes: []int{200}})
		run := newRun(t, budget.Envelope{Deadline: time.Now().Add(-time.Second)})
		body := &closeTracker{Reader: strings.NewReader("x")}
		req, _ := http.NewRequestWithContext(budget.WithCall(context.Background(), run), http.MethodPost, "http://a.example/", body)
		if _, err := client.Do(req); err == nil {
			t.Fatal("a request past the run's deadline was sent")
		}
		if !body.closed {
			t.Fatal("the unsent request's body was not closed")
		}
	})
}

// TestTransportKeepsTheLastAnswerWhenTheBodyCannotBeSentAgain: a PUT with
// an idempotency key answered 503, whose GetBody then fails: the caller
// gets the 503 (its body unread, open), and the provider is not charged
// with a failure of the host's own. Before, the 503 was drained and closed
// first, and RoundTrip returned no response and a permanent error.
func TestTransportKeepsTheLastAnswerWhenTheBodyCannotBeSentAgain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{codes: []int{503, 200}}
		client, reg := transportClient(t, base)
		req, _ := http.NewRequest(http.MethodPut, "http://api.example.com/orders/7", bytes.NewReader([]byte("order")))
		req.Header.Set("Idempotency-Key", "order-7")
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("spool gone") }
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("err %v, want the 503", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || string(body) != "answer" || len(base.seen) != 1 {
			t.Fatalf("status %d, body %q after %d attempts; want 503 \"answer\" after 1", resp.StatusCode, body, len(base.seen))
		}
		p, _ := reg.Lookup("api.example.com")
		if s := p.Snapshot(); s.Permanent != 0 {
			t.Fatalf("%d permanent failures charged to the provider, want 0", s.Permanent)
		}
	})
}
