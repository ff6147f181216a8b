package budget_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

// Host code tells timeouts apart with `errors.As(err, &ue) && ue.Timeout()`
// (ue a *url.Error). Over a plain http.Transport a context deadline gives
// true; through budget.Transport it gives false, both for a request the
// deadline ended in flight and for one the pacer refused for its deadline:
// *budget.Error has no Timeout method, and url.Error.Timeout asserts on its
// direct Err only.
func TestADeadlineIsStillATimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	isTimeout := func(c *http.Client, path string) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		var ue *url.Error
		return errors.As(err, &ue) && ue.Timeout(), err
	}
	if ok, err := isTimeout(srv.Client(), "/slow"); !ok {
		t.Fatalf("plain http.Transport: %v is no timeout", err)
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{Adaptive: aimd.Config{Initial: 0.2}}}) // one request per 5 s
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: budget.NewTransport(reg, srv.Client().Transport)}
	if ok, err := isTimeout(client, "/slow"); !ok {
		t.Errorf("in flight: %v: url.Error.Timeout() false (errors.Is DeadlineExceeded: %v)", err, errors.Is(err, context.DeadlineExceeded))
	}
	if ok, err := isTimeout(client, "/fast"); !ok { // the next slot is 5 s away
		t.Errorf("at the pacer: %v: url.Error.Timeout() false (errors.Is DeadlineExceeded: %v)", err, errors.Is(err, context.DeadlineExceeded))
	}
}
