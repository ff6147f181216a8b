package clients_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/bench/internal/clients"
)

// refuseFirst answers after 50 ms; its first two requests get a 429 with
// Retry-After: 1, every other one a 200. It records when each was sent.
type refuseFirst struct {
	mu    sync.Mutex
	n     int
	sends []time.Duration
	start time.Time
}

func (r *refuseFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.n++
	n := r.n
	r.sends = append(r.sends, time.Since(r.start))
	r.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("[]")), Request: req}
	if n <= 2 {
		resp.StatusCode = http.StatusTooManyRequests
		resp.Header.Set("Retry-After", "1")
	}
	return resp, nil
}

// TestToldHonoursThePauseAskedAndNoMore: two requests in flight are
// refused 10 ms apart, each with Retry-After: 1, so the provider asked for
// no request until 1.06 s. Told sends none before then, and goes on from
// then at its 100/s. (A worker that slept out the first pause holding the
// lock the second refusal's worker waited on made that one's pause count
// from the first's end: a second the provider never asked for, and the
// told rows of the real-time table understated.)
func TestToldHonoursThePauseAskedAndNoMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &refuseFirst{start: time.Now()}
		ctx, cancel := context.WithTimeout(context.Background(), 1900*time.Millisecond)
		defer cancel()
		clients.Told(100)(ctx, rt, url, 4)
		rt.mu.Lock()
		defer rt.mu.Unlock()
		after := 0
		for _, at := range rt.sends {
			switch {
			case at >= 50*time.Millisecond && at < 1050*time.Millisecond: // the first refusal came back at 50 ms
				t.Fatalf("a request sent at %v, inside the pause asked from 0.05 s to 1.05-1.06 s; sends: %v", at, rt.sends[:min(len(rt.sends), 8)])
			case at >= 1060*time.Millisecond:
				after++
			}
		}
		if after < 60 {
			t.Fatalf("%d requests sent in [1.06 s, 1.9 s), want about 67 (4 workers of 50 ms each: 80/s, under the 100/s); sends: %v", after, rt.sends[:min(len(rt.sends), 8)])
		}
	})
}
