package budget_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/retry"
)

// The tests of this file come from a review of the gate's promises with
// calls already waiting inside Do: each failed before its fix.

// sends records when each attempt was made and its weight.
type sends struct {
	mu sync.Mutex
	at []time.Time
	w  []int
}

func (s *sends) add(w int) {
	s.mu.Lock()
	s.at, s.w = append(s.at, time.Now()), append(s.w, w)
	s.mu.Unlock()
}

// most returns the most units (weights, or 1 each when !weighted) sent
// within any window of length per.
func (s *sends) most(per time.Duration, weighted bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := make([]int, len(s.at))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return s.at[a].Compare(s.at[b]) })
	units := func(i int) int {
		if weighted {
			return s.w[i]
		}
		return 1
	}
	best, sum, j := 0, 0, 0
	for _, i := range idx {
		sum += units(i)
		for ; !s.at[idx[j]].Add(per).After(s.at[i]); j++ {
			sum -= units(idx[j])
		}
		best = max(best, sum)
	}
	return best
}

// TestTwoLimitsNeverBunch: with two known limits, a call is sent when both
// count it. Light calls passed limit A (10 a second) at its pace, then
// waited in B (weighted, behind heavy calls) and went out together when B
// freed up: 41 in 40 ms.
func TestTwoLimitsNeverBunch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, err := budget.NewLocal("x", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}, Limits: []budget.Limit{
			{Name: "A", Count: 10, Per: time.Second},
			{Name: "B", Count: 10000, Per: 10 * time.Second, Weighted: true, Burst: 1000},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var s sends
		var wg sync.WaitGroup
		call := func(w int) {
			wg.Go(func() {
				_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome { s.add(w); return forage.Outcome{Status: 200} }, budget.CallOption{Weight: w})
			})
		}
		for range 5 {
			call(1000)
		}
		time.Sleep(time.Millisecond)
		for range 40 {
			call(1)
		}
		wg.Wait()
		if a, b := s.most(time.Second, false), s.most(10*time.Second, true); a > 10 || b > 10000 {
			t.Fatalf("at most %d calls in a second (limit A: 10), %d units in 10 s (limit B: 10000)", a, b)
		}
	})
}

// TestACancelledWaitNeverHandsOnALaterSlot: calls queued in a weighted
// limit, some cancelled while they wait, then new calls: no window carries
// more than the limit. Giving back a cancelled call's slots took time off
// the end of the queue, and the new calls landed on slots already queued
// calls held: 150 units in a second against 100.
func TestACancelledWaitNeverHandsOnALaterSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, err := budget.NewLocal("x", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000},
			Limits: []budget.Limit{{Name: "A", Count: 100, Per: time.Second, Weighted: true, Burst: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		var s sends
		var wg sync.WaitGroup
		call := func(ctx context.Context) {
			wg.Go(func() {
				_ = p.Do(ctx, nil, func(context.Context) forage.Outcome { s.add(10); return forage.Outcome{Status: 200} }, budget.CallOption{Weight: 10}, budget.CallOption{NoRetry: true})
			})
			synctest.Wait()
		}
		var cancels []context.CancelFunc
		for range 30 {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			call(ctx)
		}
		time.Sleep(50 * time.Millisecond)
		for _, cancel := range cancels[2:7] {
			cancel()
		}
		synctest.Wait()
		for range 5 {
			call(context.Background())
		}
		wg.Wait()
		for _, cancel := range cancels {
			cancel()
		}
		if n := s.most(time.Second, true); n > 100 {
			t.Fatalf("%d units in one second, limit 100", n)
		}
	})
}

// TestRetryAfterHoldsCallsWaitingInALimit: a Retry-After that comes while
// other calls wait for their known limit's slot holds them too. They were
// sent during the pause: seven within a second of a 30 s Retry-After.
func TestRetryAfterHoldsCallsWaitingInALimit(t *testing.T) {
	t.Parallel()
	for name, lim := range map[string]budget.Limit{
		"weighted": {Count: 100, Per: time.Second, Weighted: true, Burst: 10},
		"unit":     {Count: 10, Per: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := budget.NewLocal("r", budget.Config{MaxWait: time.Minute, Adaptive: aimd.Config{Initial: 1000, Max: 1000}, Limits: []budget.Limit{lim}})
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				var pauseEnd time.Time
				var inPause, n atomic.Int32
				attempt := func(context.Context) forage.Outcome {
					mu.Lock()
					if time.Now().Before(pauseEnd) {
						inPause.Add(1)
					}
					mu.Unlock()
					if n.Add(1) == 1 {
						time.Sleep(300 * time.Millisecond) // the answer takes a while: others queue
						mu.Lock()
						pauseEnd = time.Now().Add(30 * time.Second)
						mu.Unlock()
						return forage.Outcome{Status: 429, RetryAfter: 30 * time.Second}
					}
					return forage.Outcome{Status: 200}
				}
				var wg sync.WaitGroup
				for range 10 {
					wg.Go(func() {
						_ = p.Do(context.Background(), nil, attempt, budget.CallOption{NoRetry: true}, budget.CallOption{Weight: min(10, lim.Burst+1)})
					})
				}
				wg.Wait()
				if inPause.Load() > 0 {
					t.Fatalf("%d attempts before the Retry-After ended", inPause.Load())
				}
			})
		})
	}
}

// TestAPauseOverMaxWaitStopsCallsAlreadyWaiting: a Retry-After longer than
// MaxWait that comes while calls wait for the pacer stops them within
// MaxWait, with the pause's reason (a 418's: banned). Without a known
// limit they slept through all 10 minutes of it and were then sent; with
// one they stopped, but said quota.
func TestAPauseOverMaxWaitStopsCallsAlreadyWaiting(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg    budget.Config
		status int
		want   forage.Reason
	}{
		"429, no known limit": {budget.Config{MaxWait: time.Minute, Adaptive: aimd.Config{Initial: 1, Max: 1}}, 429, forage.ReasonThrottled},
		"418, a known limit":  {budget.Config{MaxWait: time.Minute, Limits: []budget.Limit{{Count: 10, Per: 10 * time.Second, Burst: 1}}}, 418, forage.ReasonBanned},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := budget.NewLocal("r", tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				var n atomic.Int32
				attempt := func(context.Context) forage.Outcome {
					if n.Add(1) == 1 {
						time.Sleep(2 * time.Second)
						return forage.Outcome{Status: tc.status, RetryAfter: 10 * time.Minute}
					}
					return forage.Outcome{Status: 200}
				}
				var wg sync.WaitGroup
				for i := range 8 {
					wg.Go(func() {
						start := time.Now()
						err := p.Do(context.Background(), nil, attempt, budget.CallOption{NoRetry: true})
						took := time.Since(start)
						var e *budget.Error
						switch {
						case took > time.Minute:
							t.Errorf("call %d: returned after %v, over MaxWait (1m)", i, took)
						case i > 0 && err != nil && (!errors.As(err, &e) || e.Reason != tc.want || e.Until.IsZero()):
							// (A call whose slot came before the answer succeeds.)
							t.Errorf("call %d: %v; want a stop for %s with Until", i, err, tc.want)
						}
					})
					synctest.Wait()
				}
				wg.Wait()
			})
		})
	}
}

// TestOperatorPauseStopsCallsInsideDo: an operator's pause stops a call
// already inside Do: one sleeping before a retry, and one waiting for its
// known limit's slot. Both made their attempts: the pause was read once,
// as the call began.
func TestOperatorPauseStopsCallsInsideDo(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]budget.Config{
		"before a retry":      {Backoff: retry.BackoffConfig{Base: 2 * time.Second, Rand: retry.NoJitter}},
		"waiting for a limit": {Limits: []budget.Limit{{Count: 2, Per: 10 * time.Second, Burst: 1}}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
				p, err := reg.Get("k")
				if err != nil {
					t.Fatal(err)
				}
				var n atomic.Int32
				status := 500 // the retry case: a failure, then a sleep before the retry
				if len(cfg.Limits) > 0 {
					status = 200
					_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome { n.Add(1); return forage.Outcome{Status: 200} })
				}
				before := n.Load()
				errc := make(chan error, 1)
				go func() {
					errc <- p.Do(context.Background(), nil, func(context.Context) forage.Outcome { n.Add(1); return forage.Outcome{Status: status} })
				}()
				time.Sleep(500 * time.Millisecond)
				if err := reg.SetStatus(context.Background(), "k", budget.StatusPaused, "maintenance"); err != nil {
					t.Fatal(err)
				}
				err = <-errc
				r, _ := budget.ReasonOf(err)
				want := before + 1 // the retry case: its first attempt
				if len(cfg.Limits) > 0 {
					want = before // the limit case: none
				}
				if n.Load() != want || r != forage.ReasonPaused {
					t.Fatalf("%d attempts after the pause began, stop %q (%v); want %d, paused", n.Load()-before, r, err, want-before)
				}
			})
		})
	}
}
