package main

import (
	"context"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// TestSlowHostDoesNotSlowTheOthers crawls three loopback hosts for 1.5s:
// one whose provider is pinned at 40 req/s, a strict one and one whose
// answers take 600ms. Every host completes fetches, none holds more than its
// share of the workers, and the pinned host keeps most of its pace while
// the slow host's requests are out.
func TestSlowHostDoesNotSlowTheOthers(t *testing.T) {
	t.Parallel()
	const rate, perHost = 40.0, 2
	p := plan{
		hosts: []host{
			{name: "fast", tune: func(c *budget.Config) { c.Adaptive = aimd.Config{Initial: rate, Max: rate} }},
			{name: "strict", sim: providertest.Config{Limit: providertest.RateLimit(5, 1)}},
			{name: "slow", sim: providertest.Config{Latency: 600 * time.Millisecond}},
		},
		workers:     5, // (3-1) hosts x 2 < 5: the fast host always finds a worker
		perHost:     perHost,
		urlsPerHost: 500,
		duration:    1500 * time.Millisecond,
		maxRequests: 1000,
	}
	res, err := crawl(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range res.hosts {
		if h.ok == 0 {
			t.Errorf("host %d (%s): no completed fetch (failed %d, snapshot %+v)", i, h.name, h.fail, h.snap)
		}
		if h.maxBusy > perHost {
			t.Errorf("host %d (%s): held %d workers at once, want <= %d", i, h.name, h.maxBusy, perHost)
		}
	}
	fast := res.hosts[0]
	got := float64(fast.ok) / res.elapsed.Seconds()
	// With the per-host cap the fast host keeps its whole pace (60 in
	// 1.5s); without it, workers pile up on the slow host and it gets ~40.
	if got < 0.8*rate {
		t.Errorf("fast host completed %.1f fetches/s over %v (%d ok), want >= %.0f (80%% of its %v/s pace)",
			got, res.elapsed, fast.ok, 0.8*rate, rate)
	}
}
