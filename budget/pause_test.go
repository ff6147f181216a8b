package budget_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// fakeRecords is an in-memory RecordStore whose saves and loads can be
// made to fail or to wait, and which counts them.
type fakeRecords struct {
	mu        sync.Mutex
	m         map[string]forage.ProviderRecord
	saves     int
	failSave  error
	failLoads error
	block     chan struct{} // if set, a save waits for it to close (or for its ctx)
	onSave    func()        // if set, runs at the start of each save, outside the lock
}

func (f *fakeRecords) LoadRecord(_ context.Context, key string) (forage.ProviderRecord, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.m[key]
	return r, ok, f.failLoads
}

func (f *fakeRecords) SaveRecord(ctx context.Context, r forage.ProviderRecord) error {
	f.mu.Lock()
	block, onSave := f.block, f.onSave
	f.mu.Unlock()
	if onSave != nil {
		onSave()
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saves++
	if f.failSave != nil {
		return f.failSave
	}
	if f.m == nil {
		f.m = map[string]forage.ProviderRecord{}
	}
	if old, ok := f.m[r.Key]; ok && r.PausedUntil.Before(old.PausedUntil) {
		r.PausedUntil, r.PauseReason = old.PausedUntil, old.PauseReason
	}
	f.m[r.Key] = r
	return nil
}

func (f *fakeRecords) get(key string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[key].PausedUntil
}

func (f *fakeRecords) reason(key string) forage.Reason {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[key].PauseReason
}

// record returns the record saved for key and how many saves were made.
func (f *fakeRecords) record(key string) (forage.ProviderRecord, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[key], f.saves
}

// fromHeaders is an attempt answering code with the given headers, read by
// forage.FromHTTP as a real response would be.
func fromHeaders(code int, kv ...string) func(context.Context) forage.Outcome {
	return func(context.Context) forage.Outcome {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return forage.FromHTTP(&http.Response{StatusCode: code, Header: h}, nil)
	}
}

// stopOf returns err as a *budget.Error, failing the test otherwise.
func stopOf(t tb, err error) *budget.Error {
	t.Helper()
	var e *budget.Error
	if !errors.As(err, &e) {
		t.Fatalf("Do = %v, want a *budget.Error", err)
	}
	return e
}

// countingAttempt answers 200 and counts its calls.
func countingAttempt(n *int) func(context.Context) forage.Outcome {
	return func(context.Context) forage.Outcome {
		*n++
		return forage.Outcome{Status: 200}
	}
}

// TestMaxPauseClampsHostileHeaders: "Retry-After: 99999999999999999999" on
// a 429, or "RateLimit-Remaining: 0, RateLimit-Reset: 999999" on a 200,
// pause the provider for at most MaxPause (1 hour by default), not the 72
// hours the parsers allow (issue 12 item 6).
func TestMaxPauseClampsHostileHeaders(t *testing.T) {
	t.Parallel()
	for name, attempt := range map[string]func(context.Context) forage.Outcome{
		"retry-after":  fromHeaders(429, "Retry-After", "99999999999999999999"),
		"spent-quota":  fromHeaders(200, "RateLimit-Remaining", "0", "RateLimit-Reset", "999999"),
		"x-ratelimit":  fromHeaders(200, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "999999"),
		"ban-with-418": fromHeaders(418, "Retry-After", "259200"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				cfg := fast()
				cfg.MaxWait = time.Minute
				p := newLocal(t, cfg)
				start := time.Now()
				_ = p.Do(context.Background(), nil, attempt)
				want := start.Add(time.Hour)
				if got := p.Snapshot().PausedUntil; !got.Equal(want) {
					t.Fatalf("paused until %v after start, want %v", got.Sub(start), time.Hour)
				}
				stop := stopOf(t, p.Do(context.Background(), nil, status(200, 0)))
				if !stop.Reason.SourcePressure() || !stop.Until.Equal(want) {
					t.Fatalf("next call: %v until +%v, want source pressure until +%v", stop, stop.Until.Sub(start), time.Hour)
				}
			})
		})
	}
}

// TestMaxPauseIsConfigurable: a provider known to ban for days may be
// trusted with a longer MaxPause; a negative one is refused.
func TestMaxPauseIsConfigurable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.MaxPause = 72 * time.Hour
		p := newLocal(t, cfg)
		start := time.Now()
		stop := stopOf(t, p.Do(context.Background(), nil, status(418, 48*time.Hour)))
		if stop.Reason != forage.ReasonBanned || !stop.Until.Equal(start.Add(48*time.Hour)) {
			t.Fatalf("Do = %v until +%v, want banned until +48h", stop, stop.Until.Sub(start))
		}
	})
	cfg := fast()
	cfg.MaxPause = -time.Second
	if _, err := budget.NewLocal("p", cfg); !errors.Is(err, budget.ErrInvalidConfig) {
		t.Fatalf("NewLocal with MaxPause -1s = %v, want ErrInvalidConfig", err)
	}
}

// sleepyPacer honours a pause by sleeping until it ends or ctx does, as a
// host's pacer may: it does not fail fast on a deadline.
type sleepyPacer struct {
	mu    sync.Mutex
	until time.Time
}

func (s *sleepyPacer) WaitN(ctx context.Context, _ int) error {
	s.mu.Lock()
	d := time.Until(s.until)
	s.mu.Unlock()
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *sleepyPacer) SetRate(float64) error { return nil }

func (s *sleepyPacer) PauseUntil(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.After(s.until) {
		s.until = t
	}
}

// TestPauseBeyondDeadlineStopsAtOnce: a pause the call could wait through
// (shorter than MaxWait) but that ends after the run's deadline, or the
// caller's, ends the call at once as source pressure with Until set,
// whatever the pacer: no sleeping until the deadline to learn it (issue 12
// item 6).
func TestPauseBeyondDeadlineStopsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		pacer bool // a sleepyPacer instead of the local one
		run   bool // the deadline is the run's, not the caller's
	}{
		{"run/local", false, true}, {"run/sleepy", true, true},
		{"ctx/local", false, false}, {"ctx/sleepy", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				cfg := fast()
				cfg.MaxWait = 10 * time.Minute
				if tc.pacer {
					cfg.Pacer = &sleepyPacer{}
				}
				p := newLocal(t, cfg)
				start := time.Now()
				_ = p.Do(context.Background(), nil, status(429, 5*time.Minute), budget.CallOption{NoRetry: true})
				ctx, run := context.Background(), (*budget.Run)(nil)
				if tc.run {
					run = newRun(t, budget.Envelope{Deadline: start.Add(2 * time.Minute)})
				} else {
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadline(ctx, start.Add(2*time.Minute))
					defer cancel()
				}
				calls := 0
				stop := stopOf(t, p.Do(ctx, run, countingAttempt(&calls)))
				if stop.Reason != forage.ReasonThrottled || !stop.Until.Equal(start.Add(5*time.Minute)) {
					t.Fatalf("Do = %v (%s) until +%v, want throttled until +5m", stop, stop.Reason, stop.Until.Sub(start))
				}
				if waited := time.Since(start); waited != 0 || calls != 0 {
					t.Fatalf("the call waited %v and made %d attempts, want neither", waited, calls)
				}
				if run.Attempts() != 0 {
					t.Fatalf("the run was charged %d attempts for a call never made", run.Attempts())
				}
			})
		})
	}
}

// TestPauseSurvivesRestart: a 429 with Retry-After: 120 saved in the
// RecordStore holds a provider created later on the same store (a restart):
// its first call stops at once with the pause's end, no request sent
// (issue 12 item 5).
func TestPauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		cfg := fast()
		cfg.MaxWait = time.Minute
		cfg.Records = store
		first, err := budget.NewLocal("api.example.com", cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = first.Do(context.Background(), nil, status(429, 120*time.Second))
		until := start.Add(120 * time.Second)

		cfg.Records = nil // the registry's store serves every provider
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg, Records: store})
		calls := 0
		stop := stopOf(t, provider(reg, "api.example.com").Do(context.Background(), nil, countingAttempt(&calls)))
		if stop.Reason != forage.ReasonThrottled || !stop.Until.Equal(until) || calls != 0 {
			t.Fatalf("after a restart: %v until +%v with %d attempts, want throttled until +2m and none", stop, stop.Until.Sub(start), calls)
		}
		time.Sleep(120 * time.Second)
		if err := provider(reg, "api.example.com").Do(context.Background(), nil, countingAttempt(&calls)); err != nil || calls != 1 {
			t.Fatalf("after the pause: %v with %d attempts, want one success", err, calls)
		}
	})
}

// TestPauseSurvivesRestartWithFileStore is TestPauseSurvivesRestart across
// a real close and reopen of a checkpoint file store (real clock: no call
// waits, each stops at once).
func TestPauseSurvivesRestartWithFileStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fast()
	cfg.MaxWait = time.Minute
	reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg, Records: store})
	_ = provider(reg, "api.example.com").Do(context.Background(), nil, status(429, 120*time.Second))
	rec, _, err := store.LoadRecord(context.Background(), "api.example.com")
	saved := rec.PausedUntil
	if err != nil || time.Until(saved) < 100*time.Second {
		t.Fatalf("saved pause %v (in %v), %v; want about 2 minutes ahead", saved, time.Until(saved), err)
	}
	store.Close()

	store, err = checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg = newRegistry(t, budget.RegistryConfig{Defaults: cfg, Records: store})
	calls := 0
	stop := stopOf(t, provider(reg, "api.example.com").Do(context.Background(), nil, countingAttempt(&calls)))
	if stop.Reason != forage.ReasonThrottled || !stop.Until.Equal(saved) || calls != 0 {
		t.Fatalf("after reopening: %v until %v with %d attempts, want throttled until %v and none", stop, stop.Until, calls, saved)
	}
}

// TestPauseSaveFailure: a store that cannot save loses nothing in memory:
// the pause holds, the failure is counted, and the save is tried again by
// the next call the pause refuses, so it lands once the store recovers.
func TestPauseSaveFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeRecords{failSave: errors.New("disk full")}
		cfg := fast()
		cfg.MaxWait = time.Minute
		cfg.Records = store
		p := newLocal(t, cfg)
		start := time.Now()
		_ = p.Do(context.Background(), nil, status(429, 120*time.Second))
		if n := p.Snapshot().SaveErrors; n < 1 {
			t.Fatalf("SaveErrors = %d, want at least 1", n)
		}
		stop := stopOf(t, p.Do(context.Background(), nil, status(200, 0)))
		if !stop.Until.Equal(start.Add(120 * time.Second)) {
			t.Fatalf("the pause was lost with the save: %v", stop)
		}
		store.mu.Lock()
		store.failSave = nil
		store.mu.Unlock()
		_ = p.Do(context.Background(), nil, status(200, 0))
		if got := store.get("test"); !got.Equal(start.Add(120 * time.Second)) {
			t.Fatalf("saved %v once the store recovered, want +2m", got)
		}
	})
}

// TestPauseLoad: a pause loaded longer than MaxPause is clamped to it; a
// store that cannot load makes the provider fail to build rather than
// forget a ban.
func TestPauseLoad(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		store := &fakeRecords{m: map[string]forage.ProviderRecord{"p": {Key: "p", PausedUntil: start.Add(5 * time.Hour)}}}
		cfg := fast()
		cfg.Records = store
		p, err := budget.NewLocal("p", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Snapshot().PausedUntil; !got.Equal(start.Add(time.Hour)) {
			t.Fatalf("loaded pause ends at +%v, want +%v", got.Sub(start), time.Hour)
		}
		if store.saves != 0 {
			t.Fatalf("loading saved the pause back %d times", store.saves)
		}
		store.mu.Lock() // the provider reads the record in the background too (see readStatus)
		store.failLoads = errors.New("unreadable")
		store.mu.Unlock()
		if _, err := budget.NewLocal("p", cfg); err == nil {
			t.Fatal("NewLocal with a failing RecordStore = nil error")
		}
		reg := newRegistry(t, budget.RegistryConfig{Records: store})
		if _, err := reg.Get("q"); err == nil {
			t.Fatal("Registry.Get with a failing RecordStore = nil error")
		}
	})
}

// TestPropertyPauseDurableAndBounded: whatever the answers (any status,
// any Retry-After up to the parsers' 72 hours), the pause in force never
// ends later than MaxPause after the answer that set it, the store holds
// exactly the pause in force, and a provider built on the store after any
// step (a restart) holds the same pause.
func TestPropertyPauseDurableAndBounded(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			store := checkpoint.NewMemoryStore(checkpoint.Config{})
			cfg := fast()
			cfg.MaxWait = time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, "maxWait"))
			cfg.MaxPause = rapid.OneOf(rapid.Just(time.Duration(0)), // the default
				rapid.Map(rapid.Int64Range(int64(time.Second), int64(80*time.Hour)), func(n int64) time.Duration { return time.Duration(n) })).Draw(rt, "maxPause")
			cfg.Records = store
			maxPause := cfg.MaxPause
			if maxPause == 0 {
				maxPause = time.Hour
			}
			p, err := budget.NewLocal("p", cfg)
			if err != nil {
				rt.Fatal(err)
			}
			steps := rapid.IntRange(1, 12).Draw(rt, "steps")
			for i := range steps {
				time.Sleep(time.Duration(rapid.Int64Range(0, int64(2*time.Hour)).Draw(rt, "sleep")))
				code := rapid.SampledFrom([]int{200, 418, 429, 503}).Draw(rt, "code")
				ra := time.Duration(rapid.Int64Range(0, int64(72*time.Hour)).Draw(rt, "retryAfter"))
				before := time.Now()
				_ = p.Do(context.Background(), nil, status(code, ra), budget.CallOption{NoRetry: true})
				now := time.Now()
				pu := p.Snapshot().PausedUntil
				if pu.After(now.Add(maxPause)) {
					rt.Fatalf("step %d: paused until +%v after the call began, MaxPause %v", i, pu.Sub(before), maxPause)
				}
				if !pu.After(now) {
					continue
				}
				rec, _, err := store.LoadRecord(context.Background(), "p")
				if saved := rec.PausedUntil; err != nil || !saved.Equal(pu) {
					rt.Fatalf("step %d: store holds %v, %v; the pause in force ends %v", i, saved, err, pu)
				}
				restarted, err := budget.NewLocal("p", cfg)
				if err != nil {
					rt.Fatal(err)
				}
				if got := restarted.Snapshot().PausedUntil; !got.Equal(pu) {
					rt.Fatalf("step %d: a restart holds until %v, want %v", i, got, pu)
				}
			}
		})
	})
}

// TestDeadlineStopSaysWhenTheSlotComes: a call whose next pacing slot
// comes after its run's deadline stops at once, "deadline", with Until the
// slot: a host that runs again then, not at once, does not spin on a pace
// slower than its runs (the scheduler's TestSlowPacedTurnsDoNotSpin).
func TestDeadlineStopSaysWhenTheSlotComes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, err := budget.NewLocal("slow", budget.Config{Adaptive: aimd.Config{Initial: 0.2, Max: 0.2, Min: 0.2}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		run, err := budget.NewRun(budget.Envelope{Deadline: start.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Do(context.Background(), run, status(200, 0))
		var be *budget.Error
		if !errors.As(err, &be) || be.Reason != forage.ReasonDeadline {
			t.Fatalf("Do with the slot 5 s away and 1 s left = %v; want a deadline stop", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the stop came after %v; want at once", waited)
		}
		if d := be.Until.Sub(start); d < 4*time.Second || d > 5*time.Second {
			t.Errorf("Until is %v from now; want the next slot, about 5 s", d)
		}
	})
}

// TestACallersDeadlineBeforeTheSlotSaysWhenItComes: a call whose own ctx
// deadline comes before its next pacing slot is refused at once,
// "canceled" (the caller's bound, not the run's), with Until the slot: the
// caller that tries again knows when to. Until was zero, and a worker's
// loop tried again 54,000 times a second.
func TestACallersDeadlineBeforeTheSlotSaysWhenItComes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, err := budget.NewLocal("slow", budget.Config{Adaptive: aimd.Config{Initial: 0.2, Max: 0.2, Min: 0.2}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = p.Do(ctx, nil, status(200, 0))
		var be *budget.Error
		if !errors.As(err, &be) || be.Reason != forage.ReasonCanceled || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do with the slot 5 s away and 1 s left in ctx = %v; want canceled, wrapping context.DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the stop came after %v; want at once", waited)
		}
		if d := be.Until.Sub(start); d < 4*time.Second || d > 5*time.Second {
			t.Errorf("Until is %v from now; want the next slot, about 5 s", d)
		}
		// A ctx that has ended has no slot to name.
		cancel()
		if err := p.Do(ctx, nil, status(200, 0)); !errors.As(err, &be) || !be.Until.IsZero() {
			t.Errorf("Do with an ended ctx = %v (until %v); want canceled with no Until", err, be.Until)
		}
	})
}
