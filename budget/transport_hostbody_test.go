package budget_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// The host's own request body fails to read. Over TLS (every real API),
// a body relayed from another connection that reset (an upload streamed
// from object storage) fails with that connection's *net.OpError; over
// plain HTTP even a plain error comes back wrapped in a *net.OpError
// ("readfrom tcp"). Either way the Transport charges the provider with a
// transient failure, and nine of them open the breaker of a healthy
// provider: its next GET is refused with circuit_open, never sent.
func TestTheHostsBodyErrorOpensTheProvidersBreaker(t *testing.T) {
	for name, c := range map[string]struct {
		tls bool
		err error
	}{
		"https, relayed body reset": {true, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}},
		"http, plain body error":    {false, errors.New("export: source query failed")},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
			}))
			if c.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{Adaptive: aimd.Config{Initial: 1000}}}) // pacing out of the way
			if err != nil {
				t.Fatal(err)
			}
			client := &http.Client{Transport: budget.NewTransport(reg, srv.Client().Transport)}
			for range 10 {
				body := io.MultiReader(strings.NewReader("abc"), failingReader{c.err})
				req, _ := http.NewRequest(http.MethodPut, srv.URL+"/upload", body)
				req.ContentLength = 100
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
			resp, err := client.Get(srv.URL + "/health")
			if err == nil {
				resp.Body.Close()
			}
			p, _ := reg.Lookup(srv.Listener.Addr().String())
			s := p.Snapshot()
			if err != nil || s.Transient != 0 {
				t.Fatalf("healthy provider charged with %d transient failures of the host's body (breaker %s); GET: %v", s.Transient, s.Breaker, err)
			}
		})
	}
}

type slowReader struct {
	delay time.Duration
	done  bool
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.done {
		return 0, io.EOF
	}
	time.Sleep(s.delay)
	s.done = true
	p[0] = 'x'
	return 1, nil
}

// bodyReader is a base transport that reads the request's body, as
// net/http does, before it answers 200 in a millisecond; the request's
// context ends the exchange.
type bodyReader struct{}

func (bodyReader) RoundTrip(req *http.Request) (*http.Response, error) {
	read := make(chan error, 1)
	go func() {
		var err error
		if req.Body != nil {
			_, err = io.Copy(io.Discard, req.Body)
		}
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			return nil, err
		}
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	time.Sleep(time.Millisecond)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// The host's upload source is slow (3 s to produce its one byte) and the
// host's deadline (1.2 s) ends the PUT while the body is still being
// read. The provider answered every GET in a millisecond and never got a
// whole request; each PUT counted as the provider not answering in time,
// and the breaker opened.
func TestASlowUploadSourceOpensTheProvidersBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{Adaptive: aimd.Config{Initial: 1000}}})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: budget.NewTransport(reg, bodyReader{})}
		for range 3 {
			resp, err := client.Get("http://api.example/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://api.example/upload", &slowReader{delay: 3 * time.Second})
				req.ContentLength = 1
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		time.Sleep(3 * time.Second) // the bodies' reads end
		p, _ := reg.Lookup("api.example")
		if s := p.Snapshot(); s.Transient != 0 {
			t.Fatalf("the host's slow upload source charged to the provider: %d transient failures, breaker %s", s.Transient, s.Breaker)
		}
	})
}
