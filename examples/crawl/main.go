// Command crawl shows one [net/http.Client] crawling many hosts through
// [budget.NewTransport]: every host gets its own [budget.Provider], so its
// own learned rate, circuit breaker and in-flight cap, and one slow or
// failing host does not slow the others.
//
// It starts five simulated hosts on loopback, each with a limit the crawler
// is not told:
//
//	fast    200 req/s; 429 with Retry-After above it
//	steady   40 req/s; bare 429 above it
//	strict    5 req/s; 429 with Retry-After above it
//	flaky     8 req/s; 503 above it, and half of all requests fail (5xx)
//	slow     50 req/s; every answer takes 1.5–2s
//
// Sixteen workers fetch a list of URLs spread over the hosts for twelve
// seconds, every request counted against one [budget.Run]. The workers take
// their URLs from a [budget.Frontier], which hands a worker the next URL of
// a host that is ready now (not paused, breaker not open, its pacing slot
// due) and lets at most three workers work on one host at once, so the
// slow host ties up three workers, never sixteen, and no worker waits in a
// limited host's pacer while another host could be fetched. At the end a
// table from [budget.Provider] snapshots shows what each host's provider
// learned and counted, next to the fetches each host completed per second.
//
// Run it with
//
//	go run ./examples/crawl
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// host is one simulated host of the crawl.
type host struct {
	name string              // shown in the table instead of 127.0.0.1:port
	sim  providertest.Config // its hidden limit and behaviour
	// tune adjusts this host's provider config, starting from the
	// registry's defaults; nil leaves the defaults. The demo discovers
	// every host's limit, so only the test uses it (to pin a rate).
	tune func(*budget.Config)
}

// plan is one crawl: the hosts, the worker pool and the envelope.
type plan struct {
	hosts       []host
	workers     int           // goroutines fetching, shared by all hosts
	perHost     int           // workers one host may hold at once
	urlsPerHost int           // URLs queued for each host
	duration    time.Duration // the run's wall clock
	maxRequests int           // the run's request cap, retries included
	progress    io.Writer     // a line every few seconds; nil for none
	// base, if set, serves the hosts in memory instead of on loopback
	// (the test's, under testing/synctest); it is given the servers by
	// host name and returns the client's base RoundTripper.
	base func(map[string]*providertest.Server) http.RoundTripper
}

// demo is the crawl main runs.
func demo() plan {
	return plan{
		hosts: []host{
			{name: "fast", sim: providertest.Config{Limit: providertest.Limit{Rate: 200, Burst: 20}, Latency: 2 * time.Millisecond, Jitter: 3 * time.Millisecond}},
			{name: "steady", sim: providertest.Config{Limit: providertest.Limit{Rate: 40, Burst: 5}, Answer: providertest.Answer{NoRetryAfter: true}, Latency: 10 * time.Millisecond, Jitter: 10 * time.Millisecond}},
			{name: "strict", sim: providertest.Config{Limit: providertest.Limit{Rate: 5, Burst: 1}, Latency: 10 * time.Millisecond, Jitter: 10 * time.Millisecond}},
			{name: "flaky", sim: providertest.Config{Limit: providertest.Limit{Rate: 8, Burst: 2}, Answer: providertest.Answer{Status: 503}, Latency: 10 * time.Millisecond, Jitter: 10 * time.Millisecond,
				FaultRate: 0.5, Faults: []providertest.Fault{http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout}}},
			{name: "slow", sim: providertest.Config{Limit: providertest.Limit{Rate: 50, Burst: 5}, Latency: 1500 * time.Millisecond, Jitter: 500 * time.Millisecond}},
		},
		workers:     16,
		perHost:     3,
		urlsPerHost: 3000,
		duration:    12 * time.Second,
		maxRequests: 5000,
		progress:    os.Stderr,
	}
}

// answerName names how a host answers a request over its limit, as the
// goodput tables do.
func answerName(a providertest.Answer) string {
	switch {
	case a.SlowDown:
		return "slow-down"
	case a.BanAfter > 0:
		return "ban"
	case a.Status == http.StatusServiceUnavailable:
		return "503"
	case a.NoRetryAfter:
		return "bare-429"
	}
	return "429+retry-after"
}

func main() {
	p := demo()
	fmt.Printf("crawling %d hosts with %d workers (at most %d per host) for %s; hidden limits:\n", len(p.hosts), p.workers, p.perHost, p.duration)
	for _, h := range p.hosts {
		fmt.Printf("  %-6s %-22s over it: %-15s faults %3.0f%%  latency %v-%v\n",
			h.name, h.sim.Limit, answerName(h.sim.Answer), 100*h.sim.FaultRate, h.sim.Latency, h.sim.Latency+h.sim.Jitter)
	}
	// Ctrl-C (or SIGTERM) ends the crawl early, with its summary.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	res, err := crawl(ctx, p)
	if err != nil {
		log.Fatal(err)
	}
	res.print(os.Stdout)
}

// result is what a crawl did, per host in plan order.
type result struct {
	hosts       []hostResult
	elapsed     time.Duration
	stop        string   // why the crawl ended
	transitions []string // breaker transitions, in order
}

// hostResult is one host's share of a crawl.
type hostResult struct {
	name string
	snap budget.Snapshot // its provider at the end
}

// crawl starts the plan's hosts, crawls them until the run is spent, and
// returns what happened.
func crawl(ctx context.Context, p plan) (result, error) {
	start := time.Now()
	keys, nameOf, base, stop, err := serve(p)
	if err != nil {
		return result{}, err
	}
	defer stop()

	// One registry, one transport, one client for every host. Each host's
	// provider gets the defaults: a rate discovered from a start at 4
	// req/s, a breaker that reopens for probes after 2s, and a bulkhead of
	// perHost.
	var tmu sync.Mutex
	var transitions []string
	defaults := budget.Config{
		MaxInFlight: p.perHost,
		Breaker: breaker.Config{
			OpenTimeout: 2 * time.Second,
			OnTransition: func(t breaker.Transition) {
				tmu.Lock()
				defer tmu.Unlock()
				transitions = append(transitions, fmt.Sprintf("%5.1fs  %-6s %s -> %s (%s)", t.At.Sub(start).Seconds(), nameOf[t.Name], t.From, t.To, t.Reason))
			},
		},
	}
	overrides := map[string]budget.Config{}
	for i, h := range p.hosts {
		if h.tune != nil {
			c := defaults
			h.tune(&c)
			overrides[keys[i]] = c
		}
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: defaults, Overrides: overrides})
	if err != nil {
		return result{}, err
	}
	client := &http.Client{Transport: budget.NewTransport(reg, base)}

	// The frontier: one queue per host, whatever the order the URLs come in.
	f, err := budget.NewFrontier(reg, p.perHost)
	if err != nil {
		return result{}, err
	}
	for _, k := range keys {
		for _, u := range urlsFor("http://"+k, p.urlsPerHost, start) {
			if err := f.Add(u); err != nil {
				return result{}, err
			}
		}
	}

	deadline := start.Add(p.duration)
	run, err := budget.NewRun(budget.Envelope{MaxRequests: p.maxRequests, Deadline: deadline})
	if err != nil {
		return result{}, err
	}
	// At the deadline the crawl cancels what is still in flight: the run
	// already lets no new attempt start. (A cancel rather than a context
	// deadline, so a cut-short attempt reads as the crawler giving up, not
	// as the host timing out.)
	outer := ctx
	ctx, cancel := context.WithCancel(budget.WithCall(ctx, run))
	defer cancel()
	defer time.AfterFunc(time.Until(deadline), cancel).Stop()
	var side sync.WaitGroup
	if p.progress != nil {
		side.Go(func() { progress(ctx, p.progress, start, reg, keys, nameOf) })
	}

	var wg sync.WaitGroup
	var failed atomic.Int64
	for range p.workers {
		wg.Go(func() {
			for {
				u, done, ok := f.Next(ctx) // a URL of a host that is ready now
				if !ok {
					return // the run is spent, or every URL is fetched
				}
				err := fetch(ctx, client, u)
				if again := done(err); err != nil && !again && ctx.Err() == nil {
					failed.Add(1) // answered, but not with the page: never counted as fetched
				}
			}
		})
	}
	wg.Wait()
	res := result{elapsed: time.Since(start), stop: "every URL fetched"}
	if n := failed.Load(); n > 0 {
		res.stop = fmt.Sprintf("%d URLs failed (the host's last answer was an error)", n)
	}
	if why, spent := run.ExhaustedAt(time.Now()); spent {
		res.stop = string(why)
	}
	if outer.Err() != nil {
		res.stop = "interrupted" // Ctrl-C: what was fetched until then
	}
	cancel()
	side.Wait()
	tmu.Lock()
	res.transitions = transitions
	tmu.Unlock()
	for _, k := range keys {
		hr := hostResult{name: nameOf[k]}
		if pr, found := reg.Lookup(k); found {
			hr.snap = pr.Snapshot()
		}
		res.hosts = append(res.hosts, hr)
	}
	return res, nil
}

// serve starts the plan's hosts: on loopback, or in memory through
// p.base. It returns each host's provider key in plan order, the host name
// of each key, the client's base RoundTripper, and a func that stops them.
func serve(p plan) (keys []string, nameOf map[string]string, base http.RoundTripper, stop func(), err error) {
	nameOf = map[string]string{}
	sims := map[string]*providertest.Server{}
	var closers []func() error
	stop = func() {
		for _, c := range closers {
			_ = c()
		}
	}
	for _, h := range p.hosts {
		srv, err := providertest.New(h.sim)
		if err != nil {
			stop()
			return nil, nil, nil, nil, err
		}
		key := h.name + ".test"
		if p.base == nil {
			lb := httptest.NewServer(srv)
			closers = append(closers, func() error { lb.Close(); return nil })
			key = strings.TrimPrefix(lb.URL, "http://")
		}
		keys = append(keys, key)
		nameOf[key] = h.name
		sims[h.name] = srv
	}
	if p.base != nil {
		return keys, nameOf, p.base(sims), stop, nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = p.perHost // keep a connection per worker a host may hold
	closers = append(closers, func() error { t.CloseIdleConnections(); return nil })
	return keys, nameOf, t, stop, nil
}

// urlsFor returns n URLs on base: one-candle klines pages of three symbols
// walking back a minute at a time, and every fourth a server-time check.
func urlsFor(base string, n int, now time.Time) []string {
	symbols := []string{"BTCUSDT", "ETHUSDT", "BNBUSDT"}
	head := now.Truncate(time.Minute)
	out := make([]string, 0, n)
	for i := range n {
		if i%4 == 3 {
			out = append(out, base+"/api/v3/time")
			continue
		}
		at := head.Add(-time.Duration(i) * time.Minute).UnixMilli()
		out = append(out, fmt.Sprintf("%s/api/v3/klines?symbol=%s&interval=1m&limit=1&startTime=%d", base, symbols[i%3], at))
	}
	return out
}

// pageTimeout bounds one page's fetch, body included.
const pageTimeout = 30 * time.Second

// fetch GETs u through the budgeted client and reads the answer. The
// transport has already paced, retried within the run's budget and
// returned the host's last answer; an answer that is not a page (a 4xx or
// 5xx) is an error, and the error, if any, goes to the frontier, which
// puts the URL back when the budget refused to send it.
func fetch(ctx context.Context, client *http.Client, u string) error {
	// A deadline per page: a host that sends its headers, then a byte a
	// second, holds the worker no longer, and is counted failing.
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err = io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		// The transport returns the host's last answer when retries
		// are spent or not allowed: a 429, a 503, a 404 is no page.
		return fmt.Errorf("%s: %s", req.URL.Host, resp.Status)
	}
	return nil
}

// progress prints a line every three seconds until ctx ends: each host's
// completed requests and the workers it holds right now, so the slow host is
// seen holding its few while the others keep going.
func progress(ctx context.Context, w io.Writer, start time.Time, reg *budget.Registry, keys []string, nameOf map[string]string) {
	t := time.NewTicker(3 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ok, busy strings.Builder
		for _, k := range keys {
			if pr, found := reg.Lookup(k); found {
				s := pr.Snapshot()
				fmt.Fprintf(&ok, " %s %d", nameOf[k], s.OK)
				fmt.Fprintf(&busy, " %s %d", nameOf[k], s.InFlight)
			}
		}
		fmt.Fprintf(w, "%3.0fs  ok:%s  | in flight:%s\n", time.Since(start).Seconds(), ok.String(), busy.String())
	}
}

// print writes the snapshot table and the breaker transitions.
func (r result) print(w io.Writer) {
	fmt.Fprintf(w, "\ncrawl ended after %.1fs (%s)\n\n", r.elapsed.Seconds(), r.stop)
	fmt.Fprintf(w, "%-6s %-15s %7s %7s %5s %5s %4s %4s %7s %-9s %10s %9s %7s\n",
		"host", "key", "rate/s", "ceiling", "reqs", "ok", "429", "5xx", "retries", "breaker", "fast-fails", "in-flight", "fetch/s")
	for _, h := range r.hosts {
		s := h.snap
		fmt.Fprintf(w, "%-6s %-15s %7.1f %7.1f %5d %5d %4d %4d %7d %-9s %10d %9d %7.1f\n",
			h.name, s.Key, s.Rate, s.Ceiling, s.Requests, s.OK, s.Throttled, s.Overloaded+s.Transient,
			s.Retries, s.Breaker, s.FastFails, s.InFlight, h.fetchRate(r.elapsed))
	}
	fmt.Fprint(w, `
rate: the pace each provider holds now; ceiling: where it learned the host pushes back.
fast-fails: calls the open breaker refused without sending (the frontier leaves such a
host alone until its breaker lets a probe through). fetch/s: completed 200s per second
over the whole run, the climb from 4 req/s included. Each host's fetch/s is its own
learned pace, whatever the slow host does.
`)
	if len(r.transitions) > 0 {
		fmt.Fprintf(w, "\nbreaker transitions:\n")
		for _, t := range r.transitions {
			fmt.Fprintf(w, "  %s\n", t)
		}
	}
}

// fetchRate is the host's completed 200s per second over elapsed.
func (h hostResult) fetchRate(elapsed time.Duration) float64 {
	return float64(h.snap.OK) / elapsed.Seconds()
}
