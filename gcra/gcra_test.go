package gcra_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/gcra"
)

func mustNew(t testing.TB, cfg gcra.Config) *gcra.Limiter {
	t.Helper()
	lim, err := gcra.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return lim
}

func TestNewZeroConfigIsDefaults(t *testing.T) {
	t.Parallel()
	lim := mustNew(t, gcra.Config{})
	if lim.Rate() != 1 || lim.Burst() != 1 || lim.Interval() != time.Second {
		t.Fatalf("zero Config: Rate %v Burst %d Interval %v, want 1/s, 1, 1s", lim.Rate(), lim.Burst(), lim.Interval())
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  gcra.Config
		want string
	}{
		{gcra.Config{Rate: -1}, "gcra: Config.Rate must be > 0 and finite (got -1)"},
		{gcra.Config{Rate: math.NaN()}, "gcra: Config.Rate must be > 0 and finite (got NaN)"},
		{gcra.Config{Rate: math.Inf(1)}, "gcra: Config.Rate must be > 0 and finite (got +Inf)"},
		{gcra.Config{Rate: 3e9}, "gcra: Config.Rate must be at most 1e9 per second"},
		{gcra.Config{Rate: 1e-19}, "gcra: Config.Rate must be large enough"},
		{gcra.Config{Burst: -1}, "gcra: Config.Burst must be >= 0 (got -1)"},
		{gcra.Config{Rate: 1, Burst: math.MaxInt64/int(time.Second) + 1}, "gcra: Config.Burst must be small enough that Burst × interval"},
	} {
		_, err := gcra.New(tc.cfg)
		if !errors.Is(err, gcra.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q… wrapping ErrInvalidConfig", tc.cfg, err, tc.want)
		}
	}
}

func TestSetRateRejectsInvalidRateAndKeepsTheOld(t *testing.T) {
	t.Parallel()
	lim := mustNew(t, gcra.Config{Rate: 20, Burst: 5})
	for _, r := range []float64{0, -5, math.NaN(), math.Inf(1), 2e9} {
		if err := lim.SetRateAt(time.Unix(0, 0), r); !errors.Is(err, gcra.ErrInvalidConfig) {
			t.Errorf("SetRateAt(%v) = %v, want ErrInvalidConfig", r, err)
		}
	}
	if lim.Rate() != 20 {
		t.Fatalf("rate after rejected changes: %v, want 20", lim.Rate())
	}
}

// TestExplicitTimesBeforeCreation: the Unix epoch is 56 years before the
// limiter's base; it must behave like any other time.
func TestExplicitTimesBeforeCreation(t *testing.T) {
	t.Parallel()
	lim := mustNew(t, gcra.Config{Rate: 10, Burst: 2})
	t0 := time.Unix(0, 0)
	got := []bool{lim.AllowNAt(t0, 1).Allowed, lim.AllowNAt(t0, 1).Allowed, lim.AllowNAt(t0, 1).Allowed,
		lim.AllowNAt(t0.Add(100*time.Millisecond), 1).Allowed}
	if want := []bool{true, true, false, true}; !slicesEqual(got, want) {
		t.Fatalf("admits at the Unix epoch: %v, want %v", got, want)
	}
}

func slicesEqual(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConcurrentAdmitsNeverOverAdmit: 8 goroutines hammering one frozen
// instant admit exactly Burst unit requests between them.
func TestConcurrentAdmitsNeverOverAdmit(t *testing.T) {
	t.Parallel()
	const burst, goroutines, calls = 50, 8, 2000
	lim := mustNew(t, gcra.Config{Rate: 100, Burst: burst})
	now := time.Now()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range calls {
				if lim.AllowNAt(now, 1).Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != burst {
		t.Fatalf("%d goroutines × %d admits at one instant: %d admitted, want exactly Burst %d", goroutines, calls, got, burst)
	}
}

// admitWhileChanging runs 6 goroutines admitting costs of 1 and 2 at one
// frozen instant while another calls change(i) for i = 0, 1, 2, … until
// they are done, and returns the units admitted.
func admitWhileChanging(t *testing.T, lim *gcra.Limiter, now time.Time, change func(i int) error) int64 {
	t.Helper()
	const goroutines, calls = 6, 2000
	var admitted atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := change(i); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var admits sync.WaitGroup
	for g := range goroutines {
		admits.Go(func() {
			for range calls {
				if n := 1 + g%2; lim.AllowNAt(now, n).Allowed {
					admitted.Add(int64(n))
				}
			}
		})
	}
	admits.Wait()
	close(stop)
	wg.Wait()
	return admitted.Load()
}

// TestConcurrentRateChangesNeverOverAdmit: while one goroutine flips the rate
// back and forth at a frozen instant, concurrent admits there never take more
// than Burst units: a rate change keeps the backlog's size in units.
func TestConcurrentRateChangesNeverOverAdmit(t *testing.T) {
	t.Parallel()
	const burst = 40
	lim := mustNew(t, gcra.Config{Rate: 100, Burst: burst})
	now := time.Now()
	got := admitWhileChanging(t, lim, now, func(i int) error { return lim.SetRateAt(now, []float64{100, 37, 250}[i%3]) })
	if got > burst {
		t.Fatalf("admitted %d units at one instant across rate changes, Burst is %d", got, burst)
	}
}

// TestConcurrentBurstChangesNeverOverAdmit: while one goroutine moves Burst
// between 10 and 40 at a frozen instant, concurrent admits there never take
// more than the largest Burst: a decision made with a Burst that has since
// changed decides again.
func TestConcurrentBurstChangesNeverOverAdmit(t *testing.T) {
	t.Parallel()
	const most = 40
	lim := mustNew(t, gcra.Config{Rate: 100, Burst: 10})
	got := admitWhileChanging(t, lim, time.Now(), func(i int) error { return lim.SetBurst([]int{10, most, 25}[i%3]) })
	if got > most {
		t.Fatalf("admitted %d units at one instant across Burst changes, the largest Burst is %d", got, most)
	}
}

// TestConcurrentAllowUnderSynctest: inside a bubble the clock stands still
// while goroutines run, so the clock-reading Allow admits exactly Burst.
func TestConcurrentAllowUnderSynctest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const burst = 30
		lim := mustNew(t, gcra.Config{Rate: 50, Burst: burst})
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 500 {
					if lim.Allow() {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := admitted.Load(); got != burst {
			t.Fatalf("Allow from 8 goroutines at one fake instant: %d admitted, want %d", got, burst)
		}
		time.Sleep(lim.Interval())
		if !lim.Allow() || lim.Allow() {
			t.Fatalf("one interval later exactly one more request should conform")
		}
	})
}

func TestHotPathsAllocateNothing(t *testing.T) {
	lim := mustNew(t, gcra.Config{Rate: 1e6, Burst: 10})
	now := time.Now()
	rates := []float64{1e6, 2e6}
	i := 0
	for name, f := range map[string]func(){
		"AllowNAt 1": func() { now = now.Add(time.Microsecond); lim.AllowNAt(now, 1) },
		"AllowNAt":   func() { lim.AllowNAt(now, 3) },
		"Allow":      func() { lim.Allow() },
		"ReserveNAt": func() { lim.ReserveNAt(now, 1); lim.UnreserveNAt(now, 1) },
		"SetRateAt":  func() { i++; _ = lim.SetRateAt(now, rates[i%2]) },
		"PauseUntil": func() { lim.PauseUntil(now) },
	} {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, a)
		}
	}
}
