package budget_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/budget"
)

// http.Client.CloseIdleConnections forwards only to a Transport that has the
// method; budget.Transport has none, so the base's idle connections stay open.
func TestCloseIdleConnectionsReachesTheBase(t *testing.T) {
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		open[c] = s != http.StateClosed && s != http.StateHijacked
	}
	srv.Start()
	defer srv.Close()
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: budget.NewTransport(reg, &http.Transport{})}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, o := range open {
		if o {
			n++
		}
	}
	if n != 0 {
		t.Fatalf("after client.CloseIdleConnections, %d connection(s) still open", n)
	}
}
