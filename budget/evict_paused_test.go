package budget_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// A crawl meets thousands of hosts that each answer 429 with an hour of
// Retry-After: the registry holds MaxProviders of them, not every one (each
// held its pause, so none could go: 5,000 providers at 7 KB in a registry
// of 100), and a host met again is still paused, nothing sent to it.
func TestPausedProvidersDoNotPinTheRegistry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int64
		refusing := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"3600"}}, Body: http.NoBody, Request: r}, nil
		})
		reg := newRegistry(t, budget.RegistryConfig{MaxProviders: 100})
		client := &http.Client{Transport: budget.NewTransport(reg, refusing)}
		get := func(i int) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf("http://h%d.example/", i), nil)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		for i := range 1000 {
			get(i)
		}
		if _, more := reg.SnapshotPage("", 0); more > 100 {
			t.Errorf("%d providers held under MaxProviders 100", more)
		}
		before := sent.Load()
		get(0) // evicted long ago, paused for the hour
		if n := sent.Load() - before; n != 0 {
			t.Errorf("a host met again within its pause was sent %d requests", n)
		}
		p, _ := reg.Lookup("h0.example")
		if p == nil || !p.Snapshot().PausedUntil.After(time.Now().Add(59*time.Minute)) {
			t.Errorf("the host met again is not paused for the hour: %+v", p)
		}
		_ = forage.Success
	})
}
