package budget_test

import (
	"context"
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
		if got := reg.ReadyAt("a", now, 1); !got.Equal(now) {
			t.Fatalf("ReadyAt of an unknown key = %v, want now %v", got, now)
		}
		p := provider(reg, "a")
		ok := func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} }
		if err := p.Do(t.Context(), nil, ok); err != nil {
			t.Fatal(err)
		}
		want := now.Add(100 * time.Millisecond)
		for i := range 100 {
			if got := reg.ReadyAt("a", time.Now(), 1); !got.Equal(want) {
				t.Fatalf("ask %d: ReadyAt = %v after now, want %v", i, got.Sub(now), want.Sub(now))
			}
		}
		time.Sleep(time.Until(want))
		if got := reg.ReadyAt("a", time.Now(), 1); !got.Equal(time.Now()) {
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

// TestReadyAtNUnits: ReadyAt with n names when n units could start at
// once, booking nothing: at 10/s with a burst of 1, an idle provider has
// room for any n now; after one call, one unit 100ms on, two 200ms on,
// three 300ms on. An n under 1 counts as 1.
func TestReadyAtNUnits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: pinned(10)})
		p := provider(reg, "a")
		now := time.Now()
		for _, n := range []int{0, 1, 2, 3} {
			if got := reg.ReadyAt("a", now, n); !got.Equal(now) {
				t.Errorf("idle: ReadyAt(n=%d) = now+%v, want now", n, got.Sub(now))
			}
		}
		if err := p.Do(t.Context(), nil, func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} }); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			n    int
			want time.Duration
		}{{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 300 * time.Millisecond}, {1, 100 * time.Millisecond}} {
			if got := reg.ReadyAt("a", now, tc.n).Sub(now); got != tc.want {
				t.Errorf("after one call: ReadyAt(n=%d) = now+%v, want now+%v", tc.n, got, tc.want)
			}
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
		if got, want := reg.ReadyAt("a", time.Now(), 1), start.Add(30*time.Second); !got.Equal(want) {
			t.Fatalf("paused: ReadyAt = %v after start, want %v", got.Sub(start), want.Sub(start))
		}
		tripping := pinned(100)
		tripping.MaxAttempts = 1
		tripping.Breaker = breaker.Config{MinRequests: 1, OpenTimeout: 10 * time.Second}
		reg2 := newRegistry(t, budget.RegistryConfig{Defaults: tripping})
		_ = provider(reg2, "c").Do(t.Context(), nil, func(context.Context) forage.Outcome { return forage.Outcome{Status: 500} })
		if got, want := reg2.ReadyAt("c", time.Now(), 1), start.Add(10*time.Second); !got.Equal(want) {
			t.Fatalf("breaker open: ReadyAt = %v after start, want %v (snapshot %+v)", got.Sub(start), want.Sub(start), provider(reg2, "c").Snapshot())
		}
		if err := reg.SetStatus(t.Context(), "b", budget.StatusPaused, "maintenance"); err != nil {
			t.Fatal(err)
		}
		if got, want := reg.ReadyAt("b", start, 1), start.Add(5*time.Second); !got.Equal(want) {
			t.Fatalf("operator-paused: ReadyAt = %v after now, want %v", got.Sub(start), want.Sub(start))
		}
	})
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
				at := reg.ReadyAt("h", time.Now(), 1)
				if again := reg.ReadyAt("h", time.Now(), 1); !again.Equal(at) {
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

// BenchmarkReadyAt is the readiness question a crawler's frontier asks of a host
// per pick: a registry lookup and reads of the pause, breaker, bulkhead
// and pacer, allocating nothing.
func BenchmarkReadyAt(b *testing.B) {
	reg := newRegistry(b, budget.RegistryConfig{Defaults: pinned(1e6)})
	provider(reg, "h")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		reg.ReadyAt("h", now, 1)
	}
}
