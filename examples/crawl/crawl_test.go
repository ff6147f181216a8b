package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// inMemory routes each request to its host's simulated server, in memory,
// and records the most requests each host had in flight at once.
type inMemory struct {
	sims map[string]*providertest.Server // by host name
	mu   sync.Mutex
	busy map[string]int
	most map[string]int
}

func (m *inMemory) RoundTrip(req *http.Request) (*http.Response, error) {
	name := strings.TrimSuffix(req.URL.Hostname(), ".test")
	m.mu.Lock()
	m.busy[name]++
	m.most[name] = max(m.most[name], m.busy[name])
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.busy[name]--
		m.mu.Unlock()
	}()
	return m.sims[name].Client().Transport.RoundTrip(req)
}

// inMemoryPlan returns a plan that serves hosts in memory, under the
// test's bubble, with a request cap of 1000, and the transport that
// records each host's requests in flight.
func inMemoryPlan(hosts ...host) (plan, *inMemory) {
	base := &inMemory{busy: map[string]int{}, most: map[string]int{}}
	return plan{
		hosts:       hosts,
		maxRequests: 1000,
		base: func(sims map[string]*providertest.Server) http.RoundTripper {
			base.sims = sims
			return base
		},
	}, base
}

// TestSlowHostDoesNotSlowTheOthers crawls four hosts for 3s of fake time:
// one whose provider is pinned at 40 req/s, one pinned at 2 req/s (a
// limited host whose pacer would hold any worker sent to it), a strict one
// (429 above 5 req/s) and one whose answers take 600ms, with five workers.
// Every host completes fetches, none has more than its share of the
// workers in flight, and the fast host keeps its whole pace: the workers
// are handed the URLs of hosts that are ready, never parked behind the
// limited or the slow host.
func TestSlowHostDoesNotSlowTheOthers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const rate, perHost = 40.0, 2
		pin := func(r float64) func(*budget.Config) {
			return func(c *budget.Config) { c.Adaptive = aimd.Config{Initial: r, Max: r} }
		}
		p, base := inMemoryPlan(
			host{name: "fast", sim: providertest.Config{Latency: 10 * time.Millisecond}, tune: pin(rate)},
			host{name: "limited", sim: providertest.Config{Latency: 10 * time.Millisecond}, tune: pin(2)},
			host{name: "strict", sim: providertest.Config{Limit: providertest.Limit{Rate: 5, Burst: 1}}},
			host{name: "slow", sim: providertest.Config{Latency: 600 * time.Millisecond}},
		)
		p.workers, p.perHost, p.urlsPerHost, p.duration = 5, perHost, 500, 3*time.Second
		res, err := crawl(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range res.hosts {
			if h.snap.OK == 0 {
				t.Errorf("host %d (%s): no completed fetch (snapshot %+v)", i, h.name, h.snap)
			}
			if most := base.most[h.name]; most > perHost {
				t.Errorf("host %d (%s): %d requests in flight at once, want <= %d", i, h.name, most, perHost)
			}
		}
		fast := res.hosts[0]
		got := fast.fetchRate(res.elapsed)
		t.Logf("fast host: %d fetched in %v (%.1f/s); limited: %d; slow: %d; stop: %s",
			fast.snap.OK, res.elapsed, got, res.hosts[1].snap.OK, res.hosts[3].snap.OK, res.stop)
		// Its pace is 40/s from the first request: 121 in 3s. A worker
		// parked in the limited host's pacer (500ms a slot) or held by the
		// slow host would cost it a share.
		if got < 0.95*rate {
			t.Errorf("fast host completed %.1f fetches/s over %v (%d ok), want >= %.0f (95%% of its %v/s pace)",
				got, res.elapsed, fast.snap.OK, 0.95*rate, rate)
		}
		if res.stop != "deadline" {
			t.Errorf("the crawl stopped for %q, want deadline", res.stop)
		}
	})
}

// TestFailedURLsAreNeverCalledFetched: a host whose every answer is a 500
// has its URLs fail (the transport hands back its last answer once the
// retries are spent, with no error), and the crawl says how many failed.
// Before, fetch never looked at the status, and a crawl with every URL of
// that host lost ended "every URL fetched".
func TestFailedURLsAreNeverCalledFetched(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, _ := inMemoryPlan(
			host{name: "fine", sim: providertest.Config{Latency: 10 * time.Millisecond}},
			host{name: "down", sim: providertest.Config{Latency: 10 * time.Millisecond, FaultRate: 1, Faults: []providertest.Fault{http.StatusInternalServerError}}},
		)
		p.workers, p.perHost, p.urlsPerHost, p.duration = 4, 2, 5, 10*time.Minute
		res, err := crawl(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if res.stop == "every URL fetched" || !strings.Contains(res.stop, "5 URLs failed") {
			t.Errorf("the crawl with the down host's 5 URLs lost stopped with %q; want 5 URLs failed", res.stop)
		}
	})
}

// tarpit answers at once, then sends its body a byte a second for as long
// as the request lasts.
type tarpit struct{}

func (tarpit) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req, Body: trickle{req.Context()}}, nil
}

type trickle struct{ ctx context.Context }

func (b trickle) Read(p []byte) (int, error) {
	select {
	case <-time.After(time.Second):
		p[0] = 'x'
		return 1, nil
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
}

func (trickle) Close() error { return nil }

// A host that tarpits its pages holds a worker for pageTimeout at most, and
// the page is a failure: with only the crawl's context, two such hosts
// held every worker of the README's crawl.
func TestATarpitHoldsAWorkerForAPageTimeoutAtMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: budget.NewTransport(reg, tarpit{})}
		start := time.Now()
		err = fetch(t.Context(), client, "http://tarpit.test/page")
		if took := time.Since(start); err == nil || took > pageTimeout+time.Second {
			t.Fatalf("a tarpit's page: %v after %v; want a failure within %v", err, took, pageTimeout)
		}
	})
}
