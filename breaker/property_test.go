package breaker_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage/breaker"
	"pgregory.net/rapid"
)

// The closed-state properties run inside a synctest bubble (rapid.SyncTest)
// so that the Window never elapses on its own, however slow the machine.

// TestPropertyNeverOpensBeforeMinRequests: whatever the ratio and however
// the outcomes mix, the breaker stays closed while fewer than MinRequests
// outcomes are counted in the window — in particular a cold start of only
// failures.
func TestPropertyNeverOpensBeforeMinRequests(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			cfg, _ := drawConfig(rt)
			b := mustNew(rt, cfg, nil)
			seq := rapid.SliceOfN(outcomes(), 0, 40).Draw(rt, "outcomes")
			counted := 0
			for i, o := range seq {
				if counted >= cfg.MinRequests-1 {
					return // the next counted outcome may legitimately open it
				}
				report(rt, b, o)
				if o != breaker.Ignored {
					counted++
				}
				if s := b.State(); s != breaker.StateClosed {
					rt.Fatalf("step %d: State() = %v after %d counted outcomes, MinRequests %d", i, s, counted, cfg.MinRequests)
				}
			}
		})
	})
}

// TestPropertyOpensExactlyAtFailureRatio: the closed breaker opens on the
// first Failure after which the window holds at least MinRequests counted
// outcomes and Failures/(Successes+Failures) >= FailureRatio (compared here
// as exact fractions), and not a step earlier.
func TestPropertyOpensExactlyAtFailureRatio(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			cfg, ratio := drawConfig(rt)
			b := mustNew(rt, cfg, nil)
			seq := rapid.SliceOfN(outcomes(), 1, 40).Draw(rt, "outcomes")
			var successes, failures uint64
			for i, o := range seq {
				report(rt, b, o)
				switch o {
				case breaker.Success:
					successes++
				case breaker.Failure:
					failures++
				}
				n := successes + failures
				tripped := n >= uint64(cfg.MinRequests) && o == breaker.Failure && 100*failures >= ratio*n
				got := b.State()
				switch {
				case tripped && got != breaker.StateOpen:
					rt.Fatalf("step %d: State() = %v with %d/%d failures, ratio %d%%, MinRequests %d; want open",
						i, got, failures, n, ratio, cfg.MinRequests)
				case !tripped && got != breaker.StateClosed:
					rt.Fatalf("step %d: State() = %v with %d/%d failures, ratio %d%%, MinRequests %d; want closed",
						i, got, failures, n, ratio, cfg.MinRequests)
				case tripped:
					return // open: the rest of the sequence would be rejected
				}
			}
		})
	})
}

// TestPropertyIgnoredNeverChangesCounts: from any reachable state, a request
// admitted and reported Ignored leaves Counts, State and the transitions
// exactly as they were.
func TestPropertyIgnoredNeverChangesCounts(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			cfg, _ := drawConfig(rt)
			var got []breaker.Transition
			b := mustNew(rt, cfg, &got)
			// Drive it somewhere: outcomes and waits, probes left in flight.
			for i, n := 0, rapid.IntRange(0, 30).Draw(rt, "steps"); i < n; i++ {
				if rapid.Bool().Draw(rt, "wait") {
					time.Sleep(time.Duration(rapid.IntRange(0, 60).Draw(rt, "wait100ms")) * 100 * time.Millisecond)
					continue
				}
				if done, err := b.Allow(); err == nil && rapid.IntRange(0, 9).Draw(rt, "leaveInFlight") > 0 {
					done(outcomes().Draw(rt, "outcome"))
				}
			}
			before, state, transitions := b.Counts(), b.State(), len(got)
			done, err := b.Allow()
			if err != nil {
				rt.Skipf("Allow() in state %v: %v", state, err)
			}
			done(breaker.Ignored)
			if after := b.Counts(); after != before {
				rt.Fatalf("Counts() = %v after an Ignored request, want %v (state %v)", after, before, state)
			}
			if s := b.State(); s != state || len(got) != transitions {
				rt.Fatalf("State() = %v (transitions %d) after an Ignored request, want %v (%d)", s, len(got), state, transitions)
			}
		})
	})
}
