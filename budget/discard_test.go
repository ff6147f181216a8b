package budget_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forage-go/forage/budget"
)

// A 503 whose body never ends (Content-Length promised, a few bytes sent):
// the retry waited on the body of the answer it discarded, until the
// caller's deadline (with none, for good).
func TestARetryDoesNotWaitOnTheBodyItDiscards(t *testing.T) {
	var n atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Content-Length", "1000000")
			w.WriteHeader(503)
			io.WriteString(w, "down")
			w.(http.Flusher).Flush()
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	defer close(stop)
	reg := newRegistry(t, budget.RegistryConfig{Defaults: fast()})
	c := &http.Client{Transport: budget.NewTransport(reg, srv.Client().Transport)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/x", nil)
	t0 := time.Now()
	resp, err := c.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	t.Logf("after %v: %d sends, err %v", time.Since(t0).Round(time.Millisecond), n.Load(), err)
	if err != nil || n.Load() != 2 {
		t.Errorf("the retry waited on the discarded 503's body until the deadline (%d sends, err %v)", n.Load(), err)
	}
}
