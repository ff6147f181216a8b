package budget_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"pgregory.net/rapid"
)

// pinned is a provider config held at rate requests/s, never retrying.
func pinned(rate float64) budget.Config {
	c := fast()
	c.Adaptive = aimd.Config{Initial: rate, Max: rate}
	return c
}

// TestReadyAtBooksNothing: asking ReadyAt any number of times takes no
// slot: it names the next slot, and a call made then goes out at once.
func TestReadyAtBooksNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: pinned(10)})
		now := time.Now()
		if got := reg.ReadyAt("a", now); !got.Equal(now) {
			t.Fatalf("ReadyAt of an unknown key = %v, want now %v", got, now)
		}
		p := provider(reg, "a")
		ok := func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} }
		if err := p.Do(t.Context(), nil, ok); err != nil {
			t.Fatal(err)
		}
		want := now.Add(100 * time.Millisecond)
		for i := range 100 {
			if got := reg.ReadyAt("a", time.Now()); !got.Equal(want) {
				t.Fatalf("ask %d: ReadyAt = %v after now, want %v", i, got.Sub(now), want.Sub(now))
			}
		}
		time.Sleep(time.Until(want))
		if got := reg.ReadyAt("a", time.Now()); !got.Equal(time.Now()) {
			t.Fatalf("at the slot: ReadyAt = %v, want now", got.Sub(now))
		}
		if err := p.Do(t.Context(), nil, ok); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(want); waited != 0 {
			t.Fatalf("the call at the forecast slot waited %v, want 0", waited)
		}
	})
}

// TestReadyAtNamesPausesAndBreaker: a Retry-After longer than MaxWait makes
// the host ready at the pause's end; an open breaker, at its OpenUntil; an
// operator's pause, five seconds on (when to ask again).
func TestReadyAtNamesPausesAndBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := pinned(100)
		c.MaxWait, c.MaxAttempts = time.Second, 1
		reg := newRegistry(t, budget.RegistryConfig{Defaults: c})
		start := time.Now()
		err := provider(reg, "a").Do(t.Context(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 429, RetryAfter: 30 * time.Second}
		})
		if r, _ := budget.ReasonOf(err); r != forage.ReasonThrottled {
			t.Fatalf("Do = %v, want throttled", err)
		}
		if got, want := reg.ReadyAt("a", time.Now()), start.Add(30*time.Second); !got.Equal(want) {
			t.Fatalf("paused: ReadyAt = %v after start, want %v", got.Sub(start), want.Sub(start))
		}
		tripping := pinned(100)
		tripping.MaxAttempts = 1
		tripping.Breaker = breaker.Config{MinRequests: 1, OpenTimeout: 10 * time.Second}
		reg2 := newRegistry(t, budget.RegistryConfig{Defaults: tripping})
		_ = provider(reg2, "c").Do(t.Context(), nil, func(context.Context) forage.Outcome { return forage.Outcome{Status: 500} })
		if got, want := reg2.ReadyAt("c", time.Now()), start.Add(10*time.Second); !got.Equal(want) {
			t.Fatalf("breaker open: ReadyAt = %v after start, want %v (snapshot %+v)", got.Sub(start), want.Sub(start), provider(reg2, "c").Snapshot())
		}
		if err := reg.SetStatus(t.Context(), "b", budget.StatusPaused, "maintenance"); err != nil {
			t.Fatal(err)
		}
		if got, want := reg.ReadyAt("b", start), start.Add(5*time.Second); !got.Equal(want) {
			t.Fatalf("operator-paused: ReadyAt = %v after now, want %v", got.Sub(start), want.Sub(start))
		}
	})
}

// hosts is an in-memory base RoundTripper serving every host after latency
// (a per-host one wins), recording per host the completions and the most
// requests in flight at once.
type hosts struct {
	latency map[string]time.Duration
	mu      sync.Mutex
	busy    map[string]int
	most    map[string]int
	done    map[string][]time.Time
}

func newHosts(latency map[string]time.Duration) *hosts {
	return &hosts{latency: latency, busy: map[string]int{}, most: map[string]int{}, done: map[string][]time.Time{}}
}

func (h *hosts) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	h.mu.Lock()
	h.busy[host]++
	h.most[host] = max(h.most[host], h.busy[host])
	h.mu.Unlock()
	time.Sleep(h.latency[host])
	h.mu.Lock()
	h.busy[host]--
	h.done[host] = append(h.done[host], time.Now())
	h.mu.Unlock()
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

// crawlTwoHosts fetches 150 URLs of a healthy host (40 req/s) and 30 of a
// limited one (2 req/s) with 4 workers, interleaved, and returns when
// the healthy host's last fetch completed, after start. With a Frontier
// the workers take URLs by host readiness; without, in list order.
func crawlTwoHosts(t *testing.T, withFrontier bool) (healthy time.Duration, base *hosts) {
	t.Helper()
	reg := newRegistry(t, budget.RegistryConfig{Overrides: map[string]budget.Config{
		"healthy.test": pinned(40), "limited.test": pinned(2),
	}})
	base = newHosts(map[string]time.Duration{"healthy.test": 10 * time.Millisecond, "limited.test": 10 * time.Millisecond})
	client := &http.Client{Transport: budget.NewTransport(reg, base)}
	var urls []string
	for i := range 150 {
		urls = append(urls, "http://healthy.test/"+string(rune('a'+i%26)))
		if i < 30 {
			urls = append(urls, "http://limited.test/x") // 30 at 2/s: 15s
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	fetch := func(u string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	if withFrontier {
		f, err := budget.NewFrontier(reg, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range urls {
			if err := f.Add(u); err != nil {
				t.Fatal(err)
			}
		}
		for range 4 {
			wg.Go(func() {
				for {
					u, done, ok := f.Next(ctx)
					if !ok {
						return
					}
					done(fetch(u))
				}
			})
		}
	} else {
		next := make(chan string)
		go func() {
			defer close(next)
			for _, u := range urls {
				select {
				case next <- u:
				case <-ctx.Done():
					return
				}
			}
		}()
		for range 4 {
			wg.Go(func() {
				for u := range next {
					_ = fetch(u)
				}
			})
		}
	}
	wg.Wait()
	base.mu.Lock()
	defer base.mu.Unlock()
	got := base.done["healthy.test"]
	if len(got) != 150 {
		t.Fatalf("frontier %v: the healthy host completed %d of 150", withFrontier, len(got))
	}
	return got[len(got)-1].Sub(start), base
}

// TestFrontierHealthyHostNotHeldBack: four workers over a healthy host
// (150 URLs, 40 req/s) and a limited one (30 URLs, 2 req/s). With one
// shared queue the workers park in the limited host's pacer and the
// healthy host's requests wait for the limited host's 15s; through a Frontier
// they take the healthy host's own pace, 150/40 = 3.75s, and the limited
// host never holds more than its two workers.
func TestFrontierHealthyHostNotHeldBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		naive, _ := crawlTwoHosts(t, false)
		took, base := crawlTwoHosts(t, true)
		t.Logf("healthy host's 150 requests: %v through a Frontier, %v with one shared queue", took, naive)
		if want := 150 * time.Second / 40; took > want+want/10 {
			t.Errorf("through a Frontier the healthy host took %v, want <= %v (its own pace, +10%%)", took, want+want/10)
		}
		if naive < 2*took {
			t.Errorf("one shared queue took %v, not much slower than the Frontier's %v: the test no longer shows the pile-up", naive, took)
		}
		for host, most := range base.most {
			if most > 2 {
				t.Errorf("%s had %d requests in flight at once, want <= 2 (perHost)", host, most)
			}
		}
	})
}

// TestFrontierPutsBackWhatWasNotSent: a URL whose call the breaker refused
// comes back at the head of its host's queue, and the host is set aside
// until the Until the stop named; a URL that failed otherwise is dropped.
func TestFrontierPutsBackWhatWasNotSent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: pinned(1000)})
		f, err := budget.NewFrontier(reg, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"http://a.test/1", "http://a.test/2"} {
			if err := f.Add(u); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		u, done, ok := f.Next(t.Context())
		if !ok || u != "http://a.test/1" {
			t.Fatalf("Next = %q, %v, want a.test/1", u, ok)
		}
		if !done(&budget.Error{Reason: forage.ReasonCircuitOpen, Until: start.Add(2 * time.Second)}) {
			t.Error("done after the breaker's stop reported the URL not put back")
		}
		if done(nil) { // a second call does nothing
			t.Error("a second done reported the URL put back")
		}
		u, done, _ = f.Next(t.Context())
		if u != "http://a.test/1" || time.Since(start) != 2*time.Second {
			t.Fatalf("after the breaker's stop: Next = %q after %v, want a.test/1 after 2s", u, time.Since(start))
		}
		if done(errors.New("connection refused")) {
			t.Error("done after a failure reported the URL put back: the worker would not count it")
		}
		u, done, _ = f.Next(t.Context())
		if u != "http://a.test/2" {
			t.Fatalf("after a failure: Next = %q, want a.test/2 (the failed URL dropped)", u)
		}
		done(nil)
		if u, _, ok := f.Next(t.Context()); ok {
			t.Fatalf("Next on an empty frontier = %q, true; want false", u)
		}
	})
}

// TestFrontierStopsWithTheRun: Next returns false once the run in ctx is
// spent, and for a cancelled ctx, even with URLs waiting.
func TestFrontierStopsWithTheRun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: pinned(1)})
		f, _ := budget.NewFrontier(reg, 1)
		for range 3 {
			_ = f.Add("http://a.test/x")
		}
		start := time.Now()
		run, _ := budget.NewRun(budget.Envelope{Deadline: start.Add(1500 * time.Millisecond)})
		ctx := budget.WithCall(t.Context(), run)
		client := &http.Client{Transport: budget.NewTransport(reg, newHosts(nil))}
		n, _, _ := crawlAll(ctx, f, client)
		if n != 2 || time.Since(start) != 1500*time.Millisecond {
			t.Fatalf("fetched %d by %v, want 2 (at 0s and 1s) and Next false at the run's deadline 1.5s", n, time.Since(start))
		}
		cctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, _, ok := f.Next(cctx); ok {
			t.Fatal("Next with a cancelled ctx = true, want false")
		}
	})
}

// TestNewFrontierRejectsBadArguments: perHost below 1 and a nil registry
// are configuration errors; a URL without a host is not queued.
func TestNewFrontierRejectsBadArguments(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{})
	if _, err := budget.NewFrontier(reg, 0); !errors.Is(err, budget.ErrInvalidConfig) || !strings.Contains(err.Error(), "perHost") {
		t.Errorf("NewFrontier(reg, 0) = %v, want ErrInvalidConfig naming perHost", err)
	}
	if _, err := budget.NewFrontier(nil, 1); !errors.Is(err, budget.ErrInvalidConfig) {
		t.Errorf("NewFrontier(nil, 1) = %v, want ErrInvalidConfig", err)
	}
	f, _ := budget.NewFrontier(reg, 1)
	for _, u := range []string{"/relative", "http://[::1"} {
		if err := f.Add(u); err == nil {
			t.Errorf("Add(%q) = nil, want an error", u)
		}
	}
}

// TestPropertyReadyAtForecastsTheSlot: for any rate and burst and any
// spacing of calls by one caller, a call made at the time ReadyAt named
// starts its attempt at once, and asking again names the same time (the
// question books nothing).
func TestPropertyReadyAtForecastsTheSlot(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			c := pinned(rapid.Float64Range(0.5, 50).Draw(rt, "rate"))
			c.Burst = rapid.IntRange(1, 4).Draw(rt, "burst")
			reg := newRegistry(rt, budget.RegistryConfig{Defaults: c})
			p := provider(reg, "h")
			steps := rapid.IntRange(1, 20).Draw(rt, "steps")
			for i := range steps {
				time.Sleep(time.Duration(rapid.IntRange(0, 2000).Draw(rt, "gapMs")) * time.Millisecond)
				at := reg.ReadyAt("h", time.Now())
				if again := reg.ReadyAt("h", time.Now()); !again.Equal(at) {
					rt.Fatalf("step %d: ReadyAt %v, then %v: the first ask moved it", i, at, again)
				}
				time.Sleep(time.Until(at))
				var sent time.Time
				if err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
					sent = time.Now()
					return forage.Outcome{Status: 200}
				}); err != nil {
					rt.Fatalf("step %d: %v", i, err)
				}
				if !sent.Equal(at) {
					rt.Fatalf("step %d: ReadyAt named %v, the attempt started %v later", i, at, sent.Sub(at))
				}
			}
		})
	})
}

// TestPropertyFrontierHandsEachURLOnce: for any hosts (rates, latencies,
// URLs), workers and perHost, every URL is fetched exactly once, no host
// ever has more than perHost requests in flight, and Next reports false
// once all are done.
func TestPropertyFrontierHandsEachURLOnce(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			nHosts := rapid.IntRange(1, 4).Draw(rt, "hosts")
			overrides := map[string]budget.Config{}
			latency := map[string]time.Duration{}
			var urls []string
			for h := range nHosts {
				name := string(rune('a'+h)) + ".test"
				overrides[name] = pinned(rapid.Float64Range(1, 40).Draw(rt, "rate"))
				latency[name] = time.Duration(rapid.IntRange(0, 300).Draw(rt, "latencyMs")) * time.Millisecond
				for i := range rapid.IntRange(0, 15).Draw(rt, "urls") {
					urls = append(urls, "http://"+name+"/"+string(rune('a'+i)))
				}
			}
			perHost := rapid.IntRange(1, 3).Draw(rt, "perHost")
			reg := newRegistry(rt, budget.RegistryConfig{Overrides: overrides})
			base := newHosts(latency)
			client := &http.Client{Transport: budget.NewTransport(reg, base)}
			f, err := budget.NewFrontier(reg, perHost)
			if err != nil {
				rt.Fatalf("NewFrontier: %v", err)
			}
			for _, u := range rapid.Permutation(urls).Draw(rt, "order") {
				if err := f.Add(u); err != nil {
					rt.Fatalf("Add(%q): %v", u, err)
				}
			}
			var mu sync.Mutex
			got := map[string]int{}
			var wg sync.WaitGroup
			for range rapid.IntRange(1, 6).Draw(rt, "workers") {
				wg.Go(func() {
					for {
						u, done, ok := f.Next(context.Background())
						if !ok {
							return
						}
						resp, err := client.Get(u)
						if err == nil {
							resp.Body.Close()
							mu.Lock()
							got[u]++
							mu.Unlock()
						}
						done(err)
					}
				})
			}
			wg.Wait()
			for _, u := range urls {
				if got[u] != 1 {
					rt.Fatalf("%s fetched %d times, want 1", u, got[u])
				}
			}
			for host, most := range base.most {
				if most > perHost {
					rt.Fatalf("%s: %d requests in flight at once, want <= %d", host, most, perHost)
				}
			}
		})
	})
}

// BenchmarkReadyAt is the readiness question a Frontier asks of a host
// per pick: a registry lookup and reads of the pause, breaker, bulkhead
// and pacer, allocating nothing.
func BenchmarkReadyAt(b *testing.B) {
	reg := newRegistry(b, budget.RegistryConfig{Defaults: pinned(1e6)})
	provider(reg, "h")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		reg.ReadyAt("h", now)
	}
}

// TestFrontierRedirectToAPausedHostHoldsNoOneElseBack: a page of host a
// that redirects to host b, which is paused, ends with b's stop. That
// stop is b's: a's page was sent and answered, so it is not put back (it
// would be sent again), and a is not set aside for b's pause. Before, a's
// 20 other pages waited out b's 10 minutes.
func TestFrontierRedirectToAPausedHostHoldsNoOneElseBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: pinned(1000)})
		f, err := budget.NewFrontier(reg, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 21 {
			if err := f.Add(fmt.Sprintf("http://a.test/%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		u, done, _ := f.Next(t.Context())
		done(&budget.Error{Provider: "b.test", Reason: forage.ReasonThrottled, Status: 429, Until: start.Add(10 * time.Minute)})
		for range 20 {
			v, done, ok := f.Next(t.Context())
			if !ok || v == u {
				t.Fatalf("Next = %q, %v after a's page %s redirected to a paused b; want another page of a", v, ok, u)
			}
			done(nil)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("a's other pages took %v, held back by b's pause", d)
		}
		if v, _, ok := f.Next(t.Context()); ok {
			t.Errorf("Next = %q, true after every page; want false (the redirected page is not sent again)", v)
		}
	})
}

// TestFrontierBringsBackAPageItsHostPausedFor: a page refused with a
// Retry-After longer than MaxWait (the Transport hands the 429 back) comes
// back when the pause ends, and is fetched; a host that refuses every
// request so brings each URL back three times, then drops it, so the crawl
// ends. The worker's error was dropped for good before: one page of 20
// lost, "1 URLs failed", and the host held for the pause all the same.
func TestFrontierBringsBackAPageItsHostPausedFor(t *testing.T) {
	t.Parallel()
	for _, always := range []bool{false, true} {
		t.Run(fmt.Sprintf("always %v", always), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				api := &scriptedAPI{answer: func(_ *http.Request, now time.Time) (int, http.Header) {
					if always || now.Sub(start) < time.Second {
						return http.StatusTooManyRequests, http.Header{"Retry-After": {"120"}}
					}
					return http.StatusOK, nil
				}}
				reg := newRegistry(t, budget.RegistryConfig{})
				client := &http.Client{Transport: budget.NewTransport(reg, api)}
				f, _ := budget.NewFrontier(reg, 1)
				for i := range 5 {
					_ = f.Add(fmt.Sprintf("http://a.test/%d", i))
				}
				fetched, failed, back := crawlAll(t.Context(), f, client)
				if !always && (fetched != 5 || failed != 0 || back != 1) {
					t.Errorf("fetched %d, failed %d, brought back %d; want 5, 0, 1 (the refused page after its pause)", fetched, failed, back)
				}
				if always && (fetched != 0 || failed != 5 || back != 15) {
					t.Errorf("fetched %d, failed %d, brought back %d; want 0, 5, 15 (each URL three times, then dropped)", fetched, failed, back)
				}
				if always && api.count() > 20+5 {
					t.Errorf("%d requests to a host that always pauses; want each URL's 4 tries, and retries within MaxWait", api.count())
				}
			})
		})
	}
}

// crawlAll is the README's crawl worker, alone: it fetches every URL f
// hands out through client until Next reports false, a status other than
// 200 an error as the README's is, and counts the URLs fetched, dropped
// (failed) and put back.
func crawlAll(ctx context.Context, f *budget.Frontier, client *http.Client) (fetched, failed, back int) {
	for {
		u, done, ok := f.Next(ctx)
		if !ok {
			return fetched, failed, back
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %s", req.URL.Host, resp.Status)
			}
		}
		switch again := done(err); {
		case err == nil:
			fetched++
		case again:
			back++
		default:
			failed++
		}
	}
}

// TestFrontierDropsAPageItsHostNeverAnswers: a worker that bounds each
// request with its own deadline, as the Transport's doc asks, against a
// host that takes requests and never answers (a tarpit): the page is sent,
// its deadline cancels it, and it comes back three times, then is dropped,
// so the crawl ends. A cancelled call read as one never sent before: the
// page came back after every deadline, and the crawl went on until its
// own context ended (40 sends in 20 s, nothing else left to fetch).
func TestFrontierDropsAPageItsHostNeverAnswers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int64
		tarpit := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			<-r.Context().Done()
			return nil, r.Context().Err()
		})
		reg := newRegistry(t, budget.RegistryConfig{Defaults: pinned(1000)})
		client := &http.Client{Transport: budget.NewTransport(reg, tarpit)}
		f, _ := budget.NewFrontier(reg, 1)
		_ = f.Add("http://tarpit.test/page")
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		failed, back := 0, 0
		for {
			u, done, ok := f.Next(ctx)
			if !ok {
				break
			}
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second) // per request
			req, _ := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			rcancel()
			if again := done(err); again {
				back++
			} else if err != nil {
				failed++
			}
		}
		if ctx.Err() != nil || failed != 1 || back != 3 || sent.Load() != 4 {
			t.Fatalf("crawl ended by its context: %v; failed %d, brought back %d, sent %d; want the page dropped after 3 comebacks, 4 sends",
				ctx.Err(), failed, back, sent.Load())
		}
	})
}

// TestFrontierKeysAsItsTransport: a crawler polite per site keys its
// Transport and its Frontier by the same func. Host a.test of the site
// answers 429 and a Retry-After longer than MaxWait at first; the pages of
// b.test, on the same site, wait out the site's pause and are fetched, as
// is a.test's page. With the Frontier keying by host, it asked providers
// never called, and dropped every page of b.test unsent within 10 ms.
func TestFrontierKeysAsItsTransport(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		api := &scriptedAPI{answer: func(r *http.Request, now time.Time) (int, http.Header) {
			if r.URL.Host == "a.test" && now.Sub(start) < time.Second {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"5"}}
			}
			return http.StatusOK, nil
		}}
		site := func(*http.Request) string { return "site.example" }
		reg := newRegistry(t, budget.RegistryConfig{Defaults: budget.Config{MaxWait: time.Second}})
		tr := budget.NewTransport(reg, api)
		tr.Key = site
		f, _ := budget.NewFrontier(reg, 1)
		f.Key = site
		_ = f.Add("http://a.test/0")
		for i := range 5 {
			_ = f.Add(fmt.Sprintf("http://b.test/%d", i))
		}
		fetched, failed, back := crawlAll(t.Context(), f, &http.Client{Transport: tr})
		if fetched != 6 || failed != 0 {
			t.Errorf("fetched %d, failed %d, brought back %d; want all 6 fetched after the site's pause, none dropped", fetched, failed, back)
		}
		if _, ok := reg.Lookup("a.test"); ok {
			t.Error("a provider was made for the host a.test; want the site's alone")
		}
	})
}

// TestFrontierForgetsHostsItIsDoneWith: a crawl of many hosts, one URL
// each, keeps none of them once done: the next URL's Next looks at its
// own host, not at every host ever met (30,000 hosts stayed, 8 MB, and a
// Next took 337 µs). Adding a URL makes no provider: the fetch does.
func TestFrontierForgetsHostsItIsDoneWith(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		reg := newRegistry(t, budget.RegistryConfig{})
		f, _ := budget.NewFrontier(reg, 1)
		const n = 2000
		for i := range n {
			if err := f.Add(fmt.Sprintf("http://h%d.test/", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, made := reg.Lookup("h0.test"); made {
			t.Error("Add made a provider; want it made by the fetch")
		}
		if got := budget.FrontierHosts(f); got != n {
			t.Fatalf("%d hosts queued, the frontier holds %d", n, got)
		}
		fetched, failed, _ := crawlAll(t.Context(), f, &http.Client{Transport: budget.NewTransport(reg, ok)})
		if fetched != n || failed != 0 {
			t.Fatalf("fetched %d, failed %d; want %d, 0", fetched, failed, n)
		}
		if got := budget.FrontierHosts(f); got > n/2 {
			t.Errorf("after the crawl the frontier still holds %d hosts in its turn; want at most half of them (it compacts at half)", got)
		}
		if got := budget.FrontierLive(f); got != 0 {
			t.Errorf("after the crawl the frontier knows %d hosts; want none", got)
		}
		// A host met again starts a queue of its own.
		_ = f.Add("http://h7.test/again")
		if fetched, _, _ := crawlAll(t.Context(), f, &http.Client{Transport: budget.NewTransport(reg, ok)}); fetched != 1 {
			t.Errorf("a URL of a forgotten host, added again: fetched %d, want 1", fetched)
		}
	})
}

// TestFrontierAddNamesNoSecretOfABadURL: a link the Frontier refuses is
// named in the error with its query's secrets redacted: crawled links
// carry other people's tokens, and the error is logged.
func TestFrontierAddNamesNoSecretOfABadURL(t *testing.T) {
	t.Parallel()
	f, _ := budget.NewFrontier(newRegistry(t, budget.RegistryConfig{}), 1)
	for _, u := range []string{"/no/host?token=s3cret", "http://[::1/x?apikey=s3cret", "http://a.example/%zz?access_token=s3cret"} {
		err := f.Add(u)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Add(%q) = %v; want an error that names no secret", u, err)
		}
	}
}
