package budget_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/forage-go/forage/budget"
)

// One failure, the handler aborted before answering (a proxy or server that
// drops the exchange), is transient over HTTP/1.1 (EOF: retried) and was
// permanent over HTTP/2 (RST_STREAM: the call stopped after one send, not
// retried, and the breaker did not count it).
func TestAStreamResetIsRetriedAsAResetConnection(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		var n atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				panic(http.ErrAbortHandler) // the first answer is dropped
			}
		}))
		srv.EnableHTTP2 = h2
		srv.Config.ErrorLog = nil
		srv.StartTLS()
		reg := newRegistry(t, budget.RegistryConfig{Defaults: fast()})
		c := &http.Client{Transport: budget.NewTransport(reg, srv.Client().Transport)}
		resp, err := c.Get(srv.URL + "/x")
		if resp != nil {
			resp.Body.Close()
		}
		t.Logf("h2=%v: %d attempts, err=%v", h2, n.Load(), err)
		if err != nil || n.Load() != 2 {
			t.Errorf("h2=%v: %d attempts and err %v; want the dropped answer retried once, to success", h2, n.Load(), err)
		}
		srv.Close()
	}
}
