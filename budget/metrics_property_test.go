package budget_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// exporter models a metrics exporter that keeps a key's series from its
// first report until its Forget (as the Prometheus adapter does), with
// the attempts in flight per key; it notes every in-flight count that
// went negative and every Forget that came with attempts in flight.
type exporter struct {
	mu     sync.Mutex
	alive  map[string]bool
	flight map[string]int
	bad    []string
	log    map[string][]string // per key, what it reported, for a failure to show
}

func (s *exporter) touch(key string, d int, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alive[key] = true
	s.log[key] = append(s.log[key], what)
	s.flight[key] += d
	if s.flight[key] < 0 {
		s.bad = append(s.bad, fmt.Sprintf("%s in flight %d after %s", key, s.flight[key], what))
	}
}
func (s *exporter) Begin(key string, _ bool, _ time.Duration)          { s.touch(key, 1, "begin") }
func (s *exporter) End(key string, _ forage.Class, _ time.Duration)    { s.touch(key, -1, "end") }
func (s *exporter) Stop(key string, _ forage.Reason)                   { s.touch(key, 0, "stop") }
func (s *exporter) Pause(key string, _ forage.Reason, _ time.Duration) { s.touch(key, 0, "pause") }
func (s *exporter) Rate(key string, _, _, _ float64, _ bool)           { s.touch(key, 0, "rate") }
func (s *exporter) Breaker(key string, _ breaker.State)                { s.touch(key, 0, "breaker") }
func (s *exporter) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flight[key] != 0 {
		s.bad = append(s.bad, fmt.Sprintf("%s forgotten with %d in flight", key, s.flight[key]))
	}
	delete(s.alive, key)
	delete(s.flight, key)
	s.log[key] = append(s.log[key], "FORGET")
}

// TestPropertyExportedSeriesFollowTheRegistry: whatever calls, Transport
// bodies (read, closed or left to their deadline), operator statuses,
// sleeps and evictions, with a record store and lease sharing or not, an
// exporter never sees an attempt end after its key's Forget, nor a Forget
// with attempts in flight, and once all is quiet it keeps series only for
// the keys the registry holds, none with an attempt in flight. It found a
// provider dropped while its Transport success settled (in flight -1) and
// one a creator dropped on losing the race reporting after the key's
// Forget.
func TestPropertyExportedSeriesFollowTheRegistry(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			m := &exporter{alive: map[string]bool{}, flight: map[string]int{}, log: map[string][]string{}}
			cfg := fast()
			cfg.MaxInFlight = 2
			if rapid.Bool().Draw(rt, "shares") {
				cfg.Shares = budgettest.NewShareStore()
			}
			if rapid.Bool().Draw(rt, "records") {
				cfg.Records = checkpoint.NewMemoryStore(checkpoint.Config{})
			}
			rc := budget.RegistryConfig{Defaults: cfg, Metrics: m, IdleTTL: time.Duration(rapid.IntRange(1, 60).Draw(rt, "ttl")) * time.Second,
				MaxProviders: rapid.IntRange(1, 4).Draw(rt, "max"), Shards: 1}
			reg, err := budget.NewRegistry(rc)
			if err != nil {
				rt.Fatal(err)
			}
			s := &streamed{chunks: 2, delay: 500 * time.Millisecond}
			c := &http.Client{Transport: budget.NewTransport(reg, s)}
			var bodies []io.ReadCloser
			var wg sync.WaitGroup
			n := rapid.IntRange(1, 40).Draw(rt, "ops")
			for i := range n {
				key := fmt.Sprintf("h%d.example", rapid.IntRange(0, 5).Draw(rt, fmt.Sprint("key", i)))
				switch rapid.IntRange(0, 5).Draw(rt, fmt.Sprint("op", i)) {
				case 0:
					code := rapid.SampledFrom([]int{200, 429, 503, 500}).Draw(rt, fmt.Sprint("code", i))
					ra := time.Duration(rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("ra", i))) * time.Second
					wg.Add(1)
					go func() {
						defer wg.Done()
						p, err := reg.Get(key)
						if err == nil {
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							_ = p.Do(ctx, nil, status(code, ra), budget.CallOption{NoRetry: true})
							cancel()
						}
					}()
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+key+"/x", nil)
					resp, err := c.Do(req)
					if err == nil {
						bodies = append(bodies, resp.Body)
					}
				case 2:
					if len(bodies) > 0 {
						j := rapid.IntRange(0, len(bodies)-1).Draw(rt, fmt.Sprint("body", i))
						b := bodies[j]
						bodies = append(bodies[:j], bodies[j+1:]...)
						if rapid.Bool().Draw(rt, fmt.Sprint("read", i)) {
							_, _ = io.ReadAll(b)
						}
						b.Close()
					}
				case 3:
					time.Sleep(time.Duration(rapid.IntRange(1, 90).Draw(rt, fmt.Sprint("sleep", i))) * time.Second)
				case 4:
					reg.EvictAt(time.Now())
				case 5:
					_ = reg.SetStatus(context.Background(), key, rapid.SampledFrom([]string{"paused", "active"}).Draw(rt, fmt.Sprint("st", i)), "w")
				}
			}
			for _, b := range bodies {
				b.Close()
			}
			wg.Wait()
			time.Sleep(10 * time.Minute)
			reg.EvictAt(time.Now())
			time.Sleep(time.Minute)
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(m.bad) > 0 {
				rt.Fatalf("%s", strings.Join(m.bad, "\n"))
			}
			for k := range m.alive {
				if _, ok := reg.Lookup(k); !ok {
					rt.Fatalf("series of %s, which the registry does not hold: %v", k, m.log[k][max(0, len(m.log[k])-8):])
				}
			}
			for k, f := range m.flight {
				if f != 0 {
					rt.Fatalf("%s: %d in flight at rest", k, f)
				}
			}
		})
	})
}
