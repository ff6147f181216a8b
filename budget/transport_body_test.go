package budget_test

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

// streamed is a base transport whose 200s stream their body: chunks
// chunks, each after delay, then end (or fail with cut after the first,
// as a provider under load that resets the connection mid-body). It
// counts the answers being sent at once.
type streamed struct {
	chunks int
	delay  time.Duration
	cut    error
	open   atomic.Int32
	peak   atomic.Int32
}

func (s *streamed) RoundTrip(req *http.Request) (*http.Response, error) {
	n := s.open.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: req, Body: &streamBody{s: s}}, nil
}

type streamBody struct {
	s    *streamed
	sent int
	once sync.Once
}

func (b *streamBody) Read(p []byte) (int, error) {
	if b.sent > 0 && b.s.cut != nil {
		b.done()
		return 0, b.s.cut
	}
	if b.sent == b.s.chunks {
		b.done()
		return 0, io.EOF
	}
	time.Sleep(b.s.delay)
	b.sent++
	return copy(p, "chunk"), nil
}

func (b *streamBody) Close() error { b.done(); return nil }
func (b *streamBody) done()        { b.once.Do(func() { b.s.open.Add(-1) }) }

// A provider that answers 200 and then cuts every body short: the host's
// every io.ReadAll fails. Through the Transport each counted as a success
// (the verdict was given at the headers): the breaker stayed closed, and
// the learned rate climbed from 4/s to 726/s in two seconds. Now a body
// cut short is the provider's transient failure, and the rate never
// climbs on it.
func TestTruncatedBodiesAreNoSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &streamed{chunks: 10, cut: io.ErrUnexpectedEOF}
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: budget.NewTransport(reg, base)}
		n := 0
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); n++ {
			resp, err := client.Get("http://api.example/")
			if err != nil {
				break // the breaker opened
			}
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Fatal("a body cut short read whole")
			}
			resp.Body.Close()
		}
		p, _ := reg.Lookup("api.example")
		s := p.Snapshot()
		if s.OK != 0 || s.Transient == 0 || s.Rate > 4 {
			t.Fatalf("%d requests, every body cut short: %d successes, %d transient failures, breaker %s, rate %.1f/s; want none, all, rate not over its start",
				n, s.OK, s.Transient, s.Breaker, s.Rate)
		}
	})
}

// MaxInFlight 1 against a provider that streams its answers (200 ms
// each): the slot was given back when the headers came, and the provider
// served three at once. Now an answer holds its slot until its body ends,
// or is closed.
func TestMaxInFlightCoversTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &streamed{chunks: 5, delay: 40 * time.Millisecond}
		reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{
			MaxInFlight: 1,
			Adaptive:    aimd.Config{Initial: 1000, Max: 1000}, // pacing out of the way
		}})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: budget.NewTransport(reg, base)}
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				resp, err := client.Get("http://api.example/")
				if err != nil {
					t.Error(err)
					return
				}
				if i == 2 {
					resp.Body.Close() // closed unread: ends the answer too
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
		if peak := base.peak.Load(); peak > 1 {
			t.Fatalf("MaxInFlight 1, but the provider served %d requests at once", peak)
		}
		p, _ := reg.Lookup("api.example")
		if s := p.Snapshot(); s.OK != 3 || s.InFlight != 0 {
			t.Fatalf("%d successes, %d in flight; want 3 and none", s.OK, s.InFlight)
		}
	})
}
