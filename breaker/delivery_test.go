package breaker

// Internal tests of transition delivery: they compare what the hook received
// with the number of transitions queued (b.enqueued), which only the package
// can read.

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
)

// guard fails the test if f does not return within a generous wall-clock
// limit: a deadlock on a mutex does not let a synctest bubble's fake clock
// advance, so the guard must live outside the bubble. It sleeps on the wall
// clock only when f hangs.
func guard(t *testing.T, f func()) {
	t.Helper()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		f()
	}()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("breaker hung: a hook calling back into the breaker deadlocked")
	}
}

// TestHookMayCallBackIntoBreaker: a hook that calls State, Counts, Allow and
// done on every transition (including probes that make further transitions)
// does not deadlock, and sees the state it is told about.
func TestHookMayCallBackIntoBreaker(t *testing.T) {
	t.Parallel()
	guard(t, func() {
		synctest.Test(t, func(t *testing.T) {
			var b *Breaker
			var got []Transition
			b, err := New(Config{MinRequests: 1, OpenTimeout: time.Second, OnTransition: func(tr Transition) {
				got = append(got, tr)
				if s := b.State(); s != tr.To {
					t.Errorf("hook for %v: State() = %v", tr, s)
				}
				_ = b.Counts()
				if done, err := b.Allow(); err == nil {
					done(forage.Success) // from half-open this probe closes the breaker
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			done, _ := b.Allow()
			done(forage.Transient) // closed → open
			time.Sleep(2 * time.Second)
			b.State() // open → half-open, then the hook's probe: half-open → closed
			want := []string{ReasonConsecutiveFailures, ReasonOpenTimeout, ReasonProbesSucceeded}
			if len(got) != len(want) {
				t.Fatalf("got %d transitions %v, want reasons %v", len(got), got, want)
			}
			for i, tr := range got {
				if tr.Reason != want[i] {
					t.Errorf("transition %d = %v, want reason %s", i, tr, want[i])
				}
			}
		})
	})
}

// TestHookPanicDoesNotStopDelivery: a panicking hook does not leave the
// breaker stuck "delivering"; the transitions it did not get to are
// delivered by the next call.
func TestHookPanicDoesNotStopDelivery(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var got []Transition
		b, _ := New(Config{MinRequests: 1, OpenTimeout: time.Second, OnTransition: func(tr Transition) {
			got = append(got, tr)
			if len(got) == 1 {
				panic("hook bug")
			}
		}})
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the hook's panic did not reach the caller")
				}
			}()
			done, _ := b.Allow()
			done(forage.Transient)
		}()
		time.Sleep(2 * time.Second)
		if s := b.State(); s != StateHalfOpen {
			t.Fatalf("State() = %v, want half-open", s)
		}
		if len(got) != 2 || got[1].Reason != ReasonOpenTimeout {
			t.Fatalf("got transitions %v, want consecutive_failures then open_timeout", got)
		}
	})
}

// TestPropertyTransitionsDeliveredInOrderOnce: with many goroutines driving
// the breaker concurrently (fake time, re-entrant hook), every transition
// gobreaker makes is delivered exactly once, one at a time, in order: each
// starts where the previous one ended, times never go backwards, the count
// matches the transitions queued, and the last one ends in the final state.
func TestPropertyTransitionsDeliveredInOrderOnce(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		workers := rapid.IntRange(2, 6).Draw(rt, "workers")
		ops := rapid.IntRange(1, 100).Draw(rt, "opsPerWorker")
		seed := rapid.Uint64().Draw(rt, "seed")
		probes := rapid.IntRange(1, 3).Draw(rt, "halfOpenProbes")
		rapid.SyncTest(rt, func(rt *rapid.T) {
			var got []Transition // appended without a lock: the race detector flags concurrent delivery
			var inHook atomic.Int32
			var b *Breaker
			b, err := New(Config{
				MinRequests: 3, OpenTimeout: time.Second, Window: 5 * time.Second, HalfOpenProbes: probes,
				OnTransition: func(tr Transition) {
					if inHook.Add(1) != 1 {
						rt.Error("two goroutines in the hook at once")
					}
					got = append(got, tr)
					_, _ = b.State(), b.Counts()
					// A slow hook (fake time) lets the other workers make
					// transitions while this one is being delivered.
					time.Sleep(10 * time.Millisecond)
					inHook.Add(-1)
				},
			})
			if err != nil {
				rt.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := range workers {
				rng := rand.New(rand.NewPCG(seed, uint64(w)))
				wg.Go(func() { work(b, rng, ops) })
			}
			wg.Wait()
			final := b.State()

			b.mu.Lock()
			enqueued := b.enqueued
			b.mu.Unlock()
			if uint64(len(got)) != enqueued {
				rt.Fatalf("delivered %d transitions, queued %d", len(got), enqueued)
			}
			from := StateClosed
			for i, tr := range got {
				if tr.From != from {
					rt.Fatalf("transition %d = %v, want it to start from %v", i, tr, from)
				}
				if i > 0 && tr.At.Before(got[i-1].At) {
					rt.Fatalf("transition %d at %v, before transition %d at %v", i, tr.At, i-1, got[i-1].At)
				}
				from = tr.To
			}
			if from != final {
				rt.Fatalf("last transition ends in %v, State() = %v", from, final)
			}
		})
	})
}

// work is one worker: requests with random outcomes, some held in flight
// across a fake-time sleep, some waits that let OpenTimeout or Window pass.
func work(b *Breaker, rng *rand.Rand, ops int) {
	for range ops {
		done, err := b.Allow()
		if err != nil {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			continue
		}
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		}
		done([]forage.Class{forage.Success, forage.Transient, forage.Transient, forage.Canceled}[rng.IntN(4)])
	}
}
