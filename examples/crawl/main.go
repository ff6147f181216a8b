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
// seconds, every request counted against one [budget.Run]. The crawler keeps
// a queue per host and lets at most three workers work on one host at once
// (the providers' MaxInFlight bulkhead says the same), so the slow host ties
// up three workers, never sixteen; a host whose breaker is open is set aside
// until the breaker lets calls through again. At the end a table from
// [budget.Registry.Snapshot] shows what each host's provider learned and
// counted, next to the fetches each host completed per second.
//
// Run it with
//
//	go run ./examples/crawl
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
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
}

// demo is the crawl main runs.
func demo() plan {
	return plan{
		hosts: []host{
			{name: "fast", sim: providertest.Config{Limit: providertest.RateLimit(200, 20), Latency: 2 * time.Millisecond, Jitter: 3 * time.Millisecond}},
			{name: "steady", sim: providertest.Config{Limit: providertest.RateLimit(40, 5), Answer: providertest.AnswerBare429, Latency: 10 * time.Millisecond, Jitter: 10 * time.Millisecond}},
			{name: "strict", sim: providertest.Config{Limit: providertest.RateLimit(5, 1), Answer: providertest.Answer429, Latency: 10 * time.Millisecond, Jitter: 10 * time.Millisecond}},
			{name: "flaky", sim: providertest.Config{Limit: providertest.RateLimit(8, 2), Answer: providertest.Answer503, Latency: 10 * time.Millisecond, Jitter: 10 * time.Millisecond,
				FaultRate: 0.5, Faults: []providertest.Fault{providertest.Fault500, providertest.Fault502, providertest.Fault504}}},
			{name: "slow", sim: providertest.Config{Limit: providertest.RateLimit(50, 5), Latency: 1500 * time.Millisecond, Jitter: 500 * time.Millisecond}},
		},
		workers:     16,
		perHost:     3, // (5-1) hosts x 3 < 16 workers: a free worker is always left for the fifth
		urlsPerHost: 3000,
		duration:    12 * time.Second,
		maxRequests: 5000,
		progress:    os.Stderr,
	}
}

func main() {
	p := demo()
	fmt.Printf("crawling %d hosts with %d workers (at most %d per host) for %s; hidden limits:\n", len(p.hosts), p.workers, p.perHost, p.duration)
	for _, h := range p.hosts {
		fmt.Printf("  %-6s %-22s over it: %-15s faults %3.0f%%  latency %v-%v\n",
			h.name, h.sim.Limit, h.sim.Answer, 100*h.sim.FaultRate, h.sim.Latency, h.sim.Latency+h.sim.Jitter)
	}
	res, err := crawl(context.Background(), p)
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
	name     string
	snap     budget.Snapshot // its provider at the end
	ok, fail int64           // completed fetches: 200, anything else
	maxBusy  int             // most workers it held at once
}

// crawl starts the plan's hosts, crawls them until the run is spent, and
// returns what happened.
func crawl(ctx context.Context, p plan) (result, error) {
	start := time.Now()
	var keys, names []string
	var all []string
	nameOf := map[string]string{} // provider key -> host name
	for _, h := range p.hosts {
		srv, err := providertest.New(h.sim)
		if err != nil {
			return result{}, err
		}
		lb, err := srv.Listen()
		if err != nil {
			return result{}, err
		}
		defer lb.Close()
		keys = append(keys, strings.TrimPrefix(lb.URL, "http://"))
		names = append(names, h.name)
		nameOf[keys[len(keys)-1]] = h.name
		all = append(all, urlsFor(lb.URL, p.urlsPerHost, start)...)
	}

	// One registry, one transport, one client for every host. Each host's
	// provider gets the defaults: a rate discovered from a start at 4 req/s, a breaker
	// that reopens for probes after 2s, and a bulkhead of perHost.
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
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = p.perHost // keep a connection per worker a host may hold
	client := &http.Client{Transport: budget.NewTransport(reg, base)}
	defer base.CloseIdleConnections()

	deadline := start.Add(p.duration)
	run, err := budget.NewRun(budget.Envelope{MaxRequests: p.maxRequests, Deadline: deadline})
	if err != nil {
		return result{}, err
	}
	// At the deadline the crawl cancels what is still in flight: the run
	// already lets no new attempt start. (A cancel rather than a context
	// deadline, so a cut-short attempt reads as the crawler giving up, not
	// as the host timing out.)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer time.AfterFunc(time.Until(deadline), cancel).Stop()
	f := newFrontier(all, p.perHost) // one queue per host, whatever the order of all
	var side sync.WaitGroup
	if p.progress != nil {
		side.Go(func() { progress(ctx, p.progress, start, reg, keys, names) })
	}

	var stop atomic.Value
	stop.Store("deadline")
	var wg sync.WaitGroup
	for range p.workers {
		wg.Go(func() {
			for {
				q, u, ok := f.take(ctx, run)
				if !ok {
					return
				}
				r := fetch(ctx, client, run, q, u)
				if r.stop != "" {
					stop.Store(r.stop) // the run is spent: take hands out no more
				}
				f.done(q, u, r)
			}
		})
	}
	wg.Wait()
	cancel()
	side.Wait()
	res := result{elapsed: time.Since(start), stop: stop.Load().(string)}
	if f.empty() {
		res.stop = "every URL fetched"
	}
	tmu.Lock()
	res.transitions = transitions
	tmu.Unlock()
	for i, k := range keys {
		q := f.queues[k]
		pr, found := reg.Lookup(k)
		hr := hostResult{name: names[i], ok: q.ok.Load(), fail: q.fail.Load(), maxBusy: q.maxBusy}
		if found {
			hr.snap = pr.Snapshot()
		}
		res.hosts = append(res.hosts, hr)
	}
	return res, nil
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

// fetched is what one fetch tells the frontier.
type fetched struct {
	until   time.Time // the host pushed back: leave it alone until then
	requeue bool      // no request was sent: put the URL back
	stop    string    // the run is spent: the crawl ends, for this reason
}

// fetch GETs u through the budgeted client and counts the result on q.
func fetch(ctx context.Context, client *http.Client, run *budget.Run, q *queue, u string) fetched {
	req, err := http.NewRequestWithContext(budget.WithRun(ctx, run), http.MethodGet, u, nil)
	if err != nil {
		q.fail.Add(1)
		return fetched{}
	}
	resp, err := client.Do(req)
	if err != nil {
		var stop *budget.Error
		switch {
		case ctx.Err() != nil:
			return fetched{} // the crawl is over; the fetch does not count
		case errors.As(err, &stop) && stop.Reason.Exhausted():
			if why, spent := run.Exhausted(); spent {
				return fetched{stop: why.String()}
			}
			if stop.Reason == forage.ReasonDeadline {
				// This host's next slot comes after the run's end, so no
				// request was sent; the other hosts carry on.
				d, _ := run.Deadline()
				return fetched{requeue: true, until: d}
			}
			q.fail.Add(1) // retry_budget: the host kept failing
			return fetched{}
		case errors.As(err, &stop) && stop.Reason == forage.ReasonCircuitOpen:
			// No request was sent: put the URL back and leave the host
			// alone until its breaker admits a probe (half-open with its
			// probe out, the breaker names no end: look again shortly).
			until := stop.Until
			if soon := time.Now().Add(100 * time.Millisecond); until.Before(soon) {
				until = soon
			}
			return fetched{requeue: true, until: until}
		case errors.As(err, &stop):
			q.fail.Add(1)
			return fetched{until: stop.Until}
		}
		q.fail.Add(1)
		return fetched{}
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	switch {
	case ctx.Err() != nil:
	case err == nil && resp.StatusCode == http.StatusOK:
		q.ok.Add(1)
	default:
		// The transport retried within the run's budget and this is the
		// host's last answer (a final 429, 503 or 5xx).
		q.fail.Add(1)
	}
	return fetched{}
}

// progress prints a line every three seconds until ctx ends: each host's
// completed requests and the workers it holds right now, so the slow host is
// seen holding its few while the others keep going.
func progress(ctx context.Context, w io.Writer, start time.Time, reg *budget.Registry, keys, names []string) {
	t := time.NewTicker(3 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ok, busy strings.Builder
		for i, k := range keys {
			if pr, found := reg.Lookup(k); found {
				s := pr.Snapshot()
				fmt.Fprintf(&ok, " %s %d", names[i], s.OK)
				fmt.Fprintf(&busy, " %s %d", names[i], s.InFlight)
			}
		}
		fmt.Fprintf(w, "%3.0fs  ok:%s  | in flight:%s\n", time.Since(start).Seconds(), ok.String(), busy.String())
	}
}

// print writes the snapshot table and the breaker transitions.
func (r result) print(w io.Writer) {
	fmt.Fprintf(w, "\ncrawl ended after %.1fs (%s)\n\n", r.elapsed.Seconds(), r.stop)
	fmt.Fprintf(w, "%-6s %-15s %7s %7s %5s %5s %4s %4s %7s %-9s %10s %9s %7s %7s\n",
		"host", "key", "rate/s", "ceiling", "reqs", "ok", "429", "5xx", "retries", "breaker", "fast-fails", "in-flight", "workers", "fetch/s")
	most := 0
	for _, h := range r.hosts {
		s := h.snap
		fmt.Fprintf(w, "%-6s %-15s %7.1f %7.1f %5d %5d %4d %4d %7d %-9s %10d %9d %7d %7.1f\n",
			h.name, s.Key, s.Rate, s.Ceiling, s.Requests, s.OK, s.Throttled, s.Overloaded+s.Transient,
			s.Retries, s.Breaker, s.FastFails, s.InFlight, h.maxBusy, float64(h.ok)/r.elapsed.Seconds())
		most = max(most, h.maxBusy)
	}
	fmt.Fprintf(w, `
rate: the pace each provider holds now; ceiling: where it learned the host pushes back.
fast-fails: calls the open breaker refused without sending. workers: the most one host held
at once (no host held more than %d); fetch/s: completed 200s per second over the whole run,
the climb from 4 req/s included. Each host's fetch/s is its own learned pace, whatever the
slow host does.
`, most)
	if len(r.transitions) > 0 {
		fmt.Fprintf(w, "\nbreaker transitions:\n")
		for _, t := range r.transitions {
			fmt.Fprintf(w, "  %s\n", t)
		}
	}
}
