package budget_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
)

// recorder is a budget.Metrics that writes each report as a line, and keeps
// the attempts in flight (Begin − End) per key.
type recorder struct {
	mu       sync.Mutex
	lines    []string
	inFlight map[string]int
}

var _ budget.Metrics = (*recorder)(nil)

func (r *recorder) add(key string, inFlight int, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight == nil {
		r.inFlight = map[string]int{}
	}
	r.inFlight[key] += inFlight
	r.lines = append(r.lines, key+" "+fmt.Sprintf(format, args...))
}

func (r *recorder) Begin(key string, retry bool, wait time.Duration) {
	r.add(key, 1, "begin retry=%v wait=%v", retry, wait)
}
func (r *recorder) End(key string, class forage.Class, latency time.Duration) {
	r.add(key, -1, "end %v latency=%v", class, latency)
}
func (r *recorder) Stop(key string, reason forage.Reason) { r.add(key, 0, "stop %s", reason) }
func (r *recorder) Pause(key string, reason forage.Reason, d time.Duration) {
	r.add(key, 0, "pause %s %v", reason, d)
}
func (r *recorder) Rate(key string, rate, ceiling, share float64, cut bool) {
	r.add(key, 0, "rate %g ceiling=%g share=%g cut=%v", rate, ceiling, share, cut)
}
func (r *recorder) Breaker(key string, to breaker.State) { r.add(key, 0, "breaker %v", to) }
func (r *recorder) Forget(key string)                    { r.add(key, 0, "forget") }

// sequence returns an attempt that answers the codes in turn, then the
// last one again.
func sequence(codes ...int) func(context.Context) forage.Outcome {
	var mu sync.Mutex
	i := 0
	return func(context.Context) forage.Outcome {
		mu.Lock()
		defer mu.Unlock()
		c := codes[min(i, len(codes)-1)]
		i++
		return forage.Outcome{Status: c}
	}
}

// take returns the lines recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

// TestMetricsReportAScriptedRun: a provider reports, step by step, what a
// scripted run did: each attempt's Begin (its pacing wait, whether it is a
// retry) and End (its class and latency), the stop of a failed call and
// why, the pause a Retry-After imposed, the rate it started at and the cut
// after a refusal, and breaker transitions.
func TestMetricsReportAScriptedRun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := &recorder{}
		cfg := fast()
		cfg.Adaptive.Initial, cfg.Adaptive.Max = 10, 10
		cfg.Breaker = breaker.Config{MinRequests: 2, OpenTimeout: time.Second}
		cfg.Metrics = m
		p := newLocal(t, cfg)
		ctx := context.Background()
		slow := func(code int, after time.Duration) func(context.Context) forage.Outcome {
			return func(context.Context) forage.Outcome {
				time.Sleep(50 * time.Millisecond)
				return forage.Outcome{Status: code, RetryAfter: after}
			}
		}
		steps := []struct {
			name    string
			call    func() error
			want    []string
			ignored bool // lines not checked one by one (rate moves)
		}{
			{"made", func() error { return nil }, []string{"test rate 10 ceiling=0 share=10 cut=false"}, false},
			{"success", func() error { return p.Do(ctx, nil, slow(200, 0)) },
				[]string{"test begin retry=false wait=0s", "test end success latency=50ms"}, false},
			{"paced, then a 503 and a retry", func() error { return p.Do(ctx, nil, sequence(503, 200)) },
				[]string{"test begin retry=false wait=50ms", "test end overloaded latency=0s", "test begin retry=true", "test end success latency=0s"}, true},
			{"a 429 with Retry-After", func() error { return p.Do(ctx, nil, status(429, 2*time.Second), budget.CallOption{NoRetry: true}) },
				[]string{"test end throttled", "test pause throttled 2s", "cut=true", "test stop throttled"}, true},
			{"a 500 after the 503 and the 429 opens the breaker", func() error { return p.Do(ctx, nil, status(500, 0), budget.CallOption{NoRetry: true}) },
				[]string{"test end transient", "test breaker open", "test stop unavailable"}, true},
			{"refused by the open breaker", func() error { return p.Do(ctx, nil, status(200, 0)) },
				[]string{"test stop circuit_open"}, false},
		}
		for i, s := range steps {
			err := s.call()
			got := m.take()
			if !s.ignored {
				if !slices.Equal(got, s.want) {
					t.Errorf("step %d (%s): reports %q, want %q (err %v)", i, s.name, got, s.want, err)
				}
				continue
			}
			for _, w := range s.want {
				if !slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, w) }) {
					t.Errorf("step %d (%s): no report with %q in %q (err %v)", i, s.name, w, got, err)
				}
			}
		}
		if n := m.inFlight["test"]; n != 0 {
			t.Errorf("Begin − End = %d after the run, want 0", n)
		}
	})
}

// TestMetricsEndAPanickedAttempt: an attempt that panics still ends (as
// canceled), so an exported in-flight gauge comes back to zero.
func TestMetricsEndAPanickedAttempt(t *testing.T) {
	t.Parallel()
	m := &recorder{}
	cfg := fast()
	cfg.Metrics = m
	p := newLocal(t, cfg)
	func() {
		defer func() { _ = recover() }()
		_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome { panic("boom") })
	}()
	got := m.take()
	if n := m.inFlight["test"]; n != 0 || !strings.Contains(got[len(got)-1], "end canceled") {
		t.Errorf("after a panic: in flight %d, reports %q; want 0 and an end canceled", n, got)
	}
}

// TestRegistryMetricsReachOverrides: RegistryConfig.Metrics is the
// Metrics of every provider whose Config sets none, overrides included.
func TestRegistryMetricsReachOverrides(t *testing.T) {
	t.Parallel()
	m := &recorder{}
	reg, err := budget.NewRegistry(budget.RegistryConfig{
		Defaults: fast(), Overrides: map[string]budget.Config{"b": fast()}, Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b"} {
		p, _ := reg.Get(key)
		if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, key := range []string{"a", "b"} {
		if !slices.ContainsFunc(m.lines, func(l string) bool { return strings.Contains(l, key+" end success") }) {
			t.Errorf("no end reported for %q: %q", key, m.lines)
		}
	}
}

// callOK makes one call of key through reg that the provider answers 200.
func callOK(t *testing.T, reg *budget.Registry, key string) {
	t.Helper()
	p, err := reg.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
		t.Fatal(err)
	}
}

// TestEvictedProvidersAreForgotten: a registry tells Metrics when it drops
// a provider, idle or over MaxProviders, so an exporter deletes the key's
// series instead of keeping one per host it ever met; a provider still in
// use is not forgotten.
func TestEvictedProvidersAreForgotten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := &recorder{}
		reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: fast(), Metrics: m, IdleTTL: time.Minute, MaxProviders: 10})
		if err != nil {
			t.Fatal(err)
		}
		call := func(key string) { callOK(t, reg, key) }
		forgotten := func() (keys []string) {
			for _, l := range m.take() {
				if k, ok := strings.CutSuffix(l, " forget"); ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			return keys
		}
		call("idle")
		time.Sleep(50 * time.Second)
		call("busy")
		time.Sleep(20 * time.Second)
		call("busy")
		if n := reg.EvictAt(time.Now()); n != 1 {
			t.Fatalf("EvictAt dropped %d providers, want 1 (idle)", n)
		}
		if got := forgotten(); !slices.Equal(got, []string{"idle"}) {
			t.Fatalf("forgotten after the idle eviction: %q, want [idle]", got)
		}
		for i := range 11 { // one over MaxProviders: the oldest go
			call(fmt.Sprintf("host%02d", i))
			time.Sleep(time.Millisecond)
		}
		if got := forgotten(); len(got) == 0 || slices.Contains(got, "host10") {
			t.Fatalf("forgotten over MaxProviders: %q, want the least recently used, not host10", got)
		}
	})
}

// nop is a Metrics that does nothing, to measure the hook's own cost.
type nop struct{}

func (nop) Begin(string, bool, time.Duration)            {}
func (nop) End(string, forage.Class, time.Duration)      {}
func (nop) Stop(string, forage.Reason)                   {}
func (nop) Pause(string, forage.Reason, time.Duration)   {}
func (nop) Rate(string, float64, float64, float64, bool) {}
func (nop) Breaker(string, breaker.State)                {}
func (nop) Forget(string)                                {}

// TestMetricsAllocateNothing: a call's success path allocates as much with
// a Metrics as without one (nil, the default, costs a nil check).
func TestMetricsAllocateNothing(t *testing.T) {
	allocs := func(m budget.Metrics) float64 {
		cfg := unlimited()
		cfg.Metrics = m
		p, _ := budget.NewLocal("bench", cfg)
		run, _ := budget.NewRun(budget.Envelope{}) // unbounded, with a retry budget of its own
		return testing.AllocsPerRun(1000, func() { _ = p.Do(context.Background(), run, ok) })
	}
	off, on := allocs(nil), allocs(nop{})
	if off > 3 || on != off {
		t.Errorf("allocations per Do: %v without Metrics (want <= 3), %v with (want the same)", off, on)
	}
}

// BenchmarkDoWithMetrics is BenchmarkDo with a Metrics that does nothing:
// the cost of the hook's calls themselves.
func BenchmarkDoWithMetrics(b *testing.B) {
	cfg := unlimited()
	cfg.Metrics = nop{}
	benchDo(b, cfg)
}

// TestAForgottenProviderReportsNothing: once a registry drops a provider
// shared among processes and tells Metrics to Forget its key, the
// provider reports nothing more. Its lease renewal, armed while it was in
// use, ran after the drop, gave its share back and reported the new rate:
// the exporter made the key's series again (rate 1000, share 1.25, a cut)
// and kept them for good, a stale gauge for a provider no longer held.
func TestAForgottenProviderReportsNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := &recorder{}
		cfg := fast()
		cfg.Shares = budgettest.NewShareStore()
		reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: cfg, Metrics: m, IdleTTL: time.Minute, MaxProviders: 10})
		if err != nil {
			t.Fatal(err)
		}
		call := func(key string) { callOK(t, reg, key) }
		call("shared.example")
		for i := range 11 { // one over MaxProviders: shared.example, the least recently used, goes
			call(fmt.Sprintf("host%02d", i))
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Minute) // its renewals, if any, have run
		forgotten := false
		for _, l := range m.take() {
			switch {
			case l == "shared.example forget":
				forgotten = true
			case forgotten && strings.HasPrefix(l, "shared.example "):
				t.Errorf("reported after its Forget: %s", l)
			}
		}
		if !forgotten {
			t.Fatal("shared.example was not forgotten over MaxProviders")
		}
	})
}

// meetingRecords is a record store whose loads wait until two are under
// way: two creators of one key both build their provider.
type meetingRecords struct {
	budget.RecordStore
	mu  sync.Mutex
	n   int
	met chan struct{}
}

func (m *meetingRecords) LoadRecord(ctx context.Context, key string) (forage.ProviderRecord, bool, error) {
	m.mu.Lock()
	m.n++
	if m.n == 2 {
		close(m.met)
	}
	m.mu.Unlock()
	<-m.met
	return m.RecordStore.LoadRecord(ctx, key)
}

// TestACreatorThatLosesTheRaceReportsNothing: of two creators of one key,
// the one that loses the race drops its provider, which reports nothing
// to Metrics. Made shared (Config.Shares), it had joined the lease
// document and watched it like the winner: the pause a 429 to the winner
// set reached it too, and the one pause was reported twice
// (forage_pauses_total 2) and logged twice; its later renewals reported rates, after the
// winner had been dropped and forgotten too, remaking the key's series
// for a provider no registry held (found by a property over random calls
// and evictions).
func TestACreatorThatLosesTheRaceReportsNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := &recorder{}
		cfg := fast()
		cfg.Shares = budgettest.NewShareStore()
		var logged atomic.Int32
		cfg.Logger = slog.New(hookHandler{func(r slog.Record) {
			if r.Message == "budget: provider paused" {
				logged.Add(1)
			}
		}})
		records := &meetingRecords{RecordStore: &fakeRecords{}, met: make(chan struct{})}
		reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: cfg, Metrics: m, Records: records})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := reg.Get("raced.example"); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		m.take()
		_ = provider(reg, "raced.example").Do(context.Background(), nil, status(429, time.Second), budget.CallOption{NoRetry: true})
		time.Sleep(time.Minute)
		pauses := 0
		for _, l := range m.take() {
			if strings.HasPrefix(l, "raced.example pause ") {
				pauses++
			}
		}
		if pauses != 1 || logged.Load() != 1 {
			t.Errorf("one 429 with Retry-After reported as %d pauses and logged as %d; want 1 and 1", pauses, logged.Load())
		}
	})
}
