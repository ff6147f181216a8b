package budget_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

type closedBody struct {
	io.Reader
	closed bool
}

func (c *closedBody) Close() error { c.closed = true; return nil }

func TestTransportMisuse(t *testing.T) {
	// A zero Transport, as &http.Transport{} is usable: nil-pointer panic.
	noPanic(t, "a zero Transport", func() {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
		(&budget.Transport{}).RoundTrip(req)
	})
	// A nil URL: http.Transport answers "http: nil Request.URL"; this panics.
	noPanic(t, "RoundTrip with a nil URL", func() {
		budget.NewTransport(nil, nil).RoundTrip(&http.Request{Method: http.MethodGet, Header: http.Header{}})
	})
	// No host: the error is returned, but the body is never closed, which
	// a RoundTripper must do "even on errors" (an *os.File upload leaks its fd).
	body := &closedBody{Reader: strings.NewReader("x")}
	req := &http.Request{Method: http.MethodPost, URL: &url.URL{Scheme: "http", Path: "/x"}, Header: http.Header{}, Body: body}
	_, err := budget.NewTransport(nil, nil).RoundTrip(req)
	if err == nil || !body.closed {
		t.Errorf("no host: err %v, body closed %v; want an error and the body closed", err, body.closed)
	}
}

// TestAPanickingClassifyClosesTheAnswerItHeld: a Config.Classify that
// panics on an answer the Transport received closes that answer's body
// on the way up, so a host that recovers (net/http's server does) leaks
// no connection per panic (it was never closed).
func TestAPanickingClassifyClosesTheAnswerItHeld(t *testing.T) {
	t.Parallel()
	reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{
		Classify: func(o forage.Outcome) forage.Class {
			if o.Status == http.StatusInternalServerError {
				panic("a host's classifier that meets an answer it did not expect")
			}
			return o.Class()
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	body := &closedBody{Reader: strings.NewReader("oops")}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{}, Body: body, Request: r}, nil
	})
	req, _ := http.NewRequest(http.MethodGet, "http://api.example.com/x", nil)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the classifier's panic did not reach the caller")
			}
		}()
		_, _ = budget.NewTransport(reg, base).RoundTrip(req)
	}()
	if !body.closed {
		t.Fatal("the answer the Transport held when Classify panicked was never closed")
	}
}

// TestATransportSaysWhyARequestHasNoKey: a request the Transport cannot key
// is refused with an error that says why, in the host's terms: a URL with
// no host (a relative link passed as it is), or Transport.Key returning "".
// Both read "budget: key must be non-empty UTF-8 text without control
// characters (got "")", naming a key the host never wrote.
func TestATransportSaysWhyARequestHasNoKey(t *testing.T) {
	t.Parallel()
	req, _ := http.NewRequest(http.MethodGet, "/issues?page=2", nil)
	_, err := budget.NewTransport(nil, nil).RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "no host") || !strings.Contains(err.Error(), "/issues") {
		t.Errorf("a relative URL: err %v; want it to say the URL has no host, and name the URL", err)
	}
	tr := budget.NewTransport(nil, nil)
	tr.Key = func(*http.Request) string { return "" }
	req, _ = http.NewRequest(http.MethodGet, "http://api.example.com/x", nil)
	_, err = tr.RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "Transport.Key") {
		t.Errorf("Transport.Key returning \"\": err %v; want it to name Transport.Key", err)
	}
}
