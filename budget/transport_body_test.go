package budget_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
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

// TestAProviderWhoseBodyIsStillReadIsNotDropped: a registry keeps the
// provider of a response whose body is still being read through the
// Transport (its bulkhead slot held, its attempt not yet ended), idle or
// over MaxProviders. It was dropped as soon as RoundTrip returned: a
// second request to the host went through a successor with a bulkhead of
// its own (two answers streaming at once under MaxInFlight 1), and
// Metrics was told to Forget the key with the attempt in flight, whose End
// came after (the Prometheus in-flight gauge read -1 once both bodies
// ended).
func TestAProviderWhoseBodyIsStillReadIsNotDropped(t *testing.T) {
	t.Parallel()
	for _, idle := range []bool{false, true} {
		t.Run(fmt.Sprintf("idle=%v", idle), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &recorder{}
				cfg := fast()
				cfg.MaxInFlight = 1
				reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: cfg, Metrics: m, MaxProviders: 10, IdleTTL: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				s := &streamed{chunks: 3, delay: time.Second}
				c := &http.Client{Transport: budget.NewTransport(reg, s)}
				resp, err := c.Get("http://slow.example/big")
				if err != nil {
					t.Fatal(err)
				}
				if idle {
					time.Sleep(2 * time.Minute) // a long download
					reg.EvictAt(time.Now())
				} else {
					for i := range 11 { // one over MaxProviders: slow.example is the least recently used
						if err := provider(reg, fmt.Sprintf("host%02d", i)).Do(context.Background(), nil, status(200, 0)); err != nil {
							t.Fatal(err)
						}
						time.Sleep(time.Millisecond)
					}
				}
				second := make(chan struct{})
				go func() {
					defer close(second)
					if again, err := c.Get("http://slow.example/again"); err == nil {
						_, _ = io.ReadAll(again.Body)
						again.Body.Close()
					}
				}()
				_, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				<-second
				if n := s.peak.Load(); n > 1 {
					t.Errorf("%d answers streaming at once, over MaxInFlight 1", n)
				}
				open := 0
				for _, l := range m.take() {
					switch l {
					case "slow.example forget":
						if open > 0 {
							t.Errorf("Forget with %d attempts in flight", open)
						}
					case "slow.example begin retry=false wait=0s":
						open++
					case "slow.example end success latency=0s":
						open--
					}
				}
			})
		})
	}
}

// hookHandler is a slog.Handler that calls on for each record, on the
// goroutine that logs it.
type hookHandler struct{ on func(slog.Record) }

func (h hookHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h hookHandler) Handle(_ context.Context, r slog.Record) error {
	h.on(r)
	return nil
}
func (h hookHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h hookHandler) WithGroup(string) slog.Handler      { return h }

// TestAProviderIsNotDroppedWhileItsBodySettles: a success through the
// Transport settles when its body ends: its slot given back, the
// controller told, and its End reported last. A registry that dropped the
// provider in between (its slot free, no call in flight) told Metrics to
// Forget the key before that End: the exporter's in-flight gauge for the
// key read -1 for good (found by a property over random calls, bodies and
// evictions, 1 run in a few hundred; here the drop comes from the rate
// raise the success logs, in that window).
func TestAProviderIsNotDroppedWhileItsBodySettles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := &recorder{}
		var reg *budget.Registry
		raised := 0
		cfg := fast()
		cfg.Adaptive = aimd.Config{Initial: 10, Max: 100} // a success raises the rate, and logs it
		cfg.Logger = slog.New(hookHandler{func(r slog.Record) {
			if r.Message == "budget: rate raised" {
				raised++
				reg.EvictAt(time.Now().Add(time.Hour)) // idle by then
			}
		}})
		var err error
		reg, err = budget.NewRegistry(budget.RegistryConfig{Defaults: cfg, Metrics: m, IdleTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: budget.NewTransport(reg, &streamed{chunks: 1, delay: time.Millisecond})}
		for range 20 { // slow start raises the rate within a few successes
			resp, err := c.Get("http://slow.example/")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if raised == 0 {
			t.Fatal("no rate raised as a body settled: the test tries no drop there")
		}
		open := 0
		for _, l := range m.take() {
			switch {
			case strings.Contains(l, " begin "):
				open++
			case strings.Contains(l, " end "):
				open--
			case strings.HasSuffix(l, " forget") && open != 0:
				t.Errorf("Forget with %d attempts in flight: its End came after", open)
			}
		}
	})
}
