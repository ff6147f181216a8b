package budget_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// secondaryLimit is GitHub's answer to a request over a secondary rate
// limit: a 403 that says so in its body alone.
const secondaryLimit = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`

// A request whose 403 names a rate limit in its body, but which cannot
// wait out the minute's pause (its deadline is sooner, or it is a POST,
// sent once), gets that 403 back from the Transport, and the host reads
// it with forage.FromHTTP: it read as a permanent failure (headers that
// name no limit), so a host that drops such requests dropped the one
// that met GitHub's secondary limit, while every request after it read
// as throttled. The 403 handed back says Retry-After: 60.
func TestA403WhoseBodyNamesARateLimitReadsAsThrottledForTheHost(t *testing.T) {
	t.Parallel()
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gh := &zooAPI{answer: func(time.Time) (int, http.Header, string) {
					return http.StatusForbidden, nil, secondaryLimit
				}}
				reg, _ := budget.NewRegistry(budget.RegistryConfig{})
				c := &http.Client{Transport: budget.NewTransport(reg, gh)}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, method, "https://api.github.com/repos/o/r/issues", io.NopCloser(strings.NewReader("{}")))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if out := forage.FromHTTP(resp, err); out.Class() != forage.Throttled || out.RetryAfter < time.Minute || string(body) != secondaryLimit {
					t.Errorf("a %s met by a 403 naming a secondary limit, handed back: class %v, retry after %v, body %q; want throttled, a minute, the body whole",
						method, out.Class(), out.RetryAfter, body)
				}
			})
		})
	}
}

// stalledBody is a response body that sends nothing until it is closed.
type stalledBody struct {
	once   sync.Once
	closed chan struct{}
}

func (b *stalledBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, io.ErrClosedPipe
}

func (b *stalledBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// A 403 whose body does not come (a tarpit's, a stalled connection's)
// held RoundTrip while the Transport read the first KiB of it for a rate
// limit: a host with no deadline never saw the 403 its headers had
// brought, and could not close it. The Transport waits for the body
// a short while only; the 403 is then what its headers say, and the host
// gets it and closes it.
func TestA403WhoseBodyStallsIsHandedBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		body := &stalledBody{closed: make(chan struct{})}
		rt := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{}, Body: body, Request: req}, nil
		})
		reg, _ := budget.NewRegistry(budget.RegistryConfig{})
		c := &http.Client{Transport: budget.NewTransport(reg, rt)}
		done := make(chan struct{})
		var status int
		go func() {
			defer close(done)
			resp, err := c.Get("https://tarpit.example/x")
			if err != nil {
				t.Error(err)
				return
			}
			status = resp.StatusCode
			resp.Body.Close()
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			body.Close() // let the peek go
			<-done
			t.Fatalf("a 403 whose body stalls: no answer in a minute; want the 403 handed back")
		}
		if status != http.StatusForbidden {
			t.Errorf("a 403 whose body stalls: status %d; want 403", status)
		}
	})
}
