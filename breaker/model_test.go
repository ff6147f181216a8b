package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// model is a from-scratch specification of the breaker, written from the
// documentation (Config, Counts, the package doc's trip rule, and
// gobreaker's documented lazy evaluation), not from the implementation:
// states, generations, the rolling window of buckets (or the fixed window
// when there is one bucket), the evidence floor, the ratio rule with the
// ratio as an exact fraction, the burst rule, the open timeout and the
// half-open probe gate.
type model struct {
	cfg     breaker.Config // every field set; FailureRatio = ratioPercent/100
	ratio   uint64         // FailureRatio in percent, for exact comparisons
	buckets int            // Window / BucketPeriod
	state   breaker.State
	gen     int       // bumped on every state change and fixed-window reset
	start   time.Time // when the current generation started
	age     int       // the current bucket, counted from start
	total   tally     // the window (or the current state's) counts
	ring    []tally   // the window's buckets; bucket a is ring[a%buckets]
	want    []breaker.Transition
}

// tally is the counts of a bucket or of the window. Requests includes the
// Ignored ones; exclusions counts those.
type tally struct {
	requests, exclusions, successes, failures uint32
	runS, runF                                uint32 // the consecutive successes (failures) it ends with
}

func (t *tally) success() { t.successes, t.runS, t.runF = t.successes+1, t.runS+1, 0 }
func (t *tally) failure() { t.failures, t.runF, t.runS = t.failures+1, t.runF+1, 0 }

func newModel(cfg breaker.Config, ratioPercent uint64, now time.Time) *model {
	n := int(cfg.Window / cfg.BucketPeriod)
	return &model{cfg: cfg, ratio: ratioPercent, buckets: n, start: now, ring: make([]tally, n)}
}

// counts is what Counts reports.
func (m *model) counts() breaker.Counts {
	t := m.total
	return breaker.Counts{
		Requests: t.requests - min(t.requests, t.exclusions), Successes: t.successes, Failures: t.failures,
		ConsecutiveSuccesses: t.runS, ConsecutiveFailures: t.runF,
	}
}

// advance applies what gobreaker evaluates lazily at the start of every call:
// in the closed state the window rolls to the bucket now is in (a fixed
// window is cleared strictly after it elapsed), in the open state the open
// timeout turns it half-open once it has elapsed (at OpenUntil, not after).
func (m *model) advance(now time.Time) {
	switch {
	case m.state == breaker.StateClosed && m.buckets == 1:
		if now.After(m.start.Add(m.cfg.Window)) {
			m.newGeneration(now)
		}
	case m.state == breaker.StateClosed:
		m.roll(int(now.Sub(m.start) / m.cfg.BucketPeriod))
	case m.state == breaker.StateOpen:
		if !now.Before(m.start.Add(m.cfg.OpenTimeout)) {
			m.transition(now, breaker.StateHalfOpen, breaker.ReasonOpenTimeout, breaker.Counts{})
		}
	}
}

// roll moves the window to bucket age: every bucket it passes leaves the
// window, or all of them at once if it passes a whole window.
func (m *model) roll(age int) {
	if age-m.age >= m.buckets {
		m.age, m.total = age, tally{}
		clear(m.ring)
		return
	}
	for m.age < age {
		m.age++
		m.leave(m.age % m.buckets)
	}
}

// leave takes bucket i out of the window. A run of the window loses the
// bucket's run if it reaches back into it: if it equals the bucket's run
// plus every outcome of its kind in the other buckets.
func (m *model) leave(i int) {
	b, t := m.ring[i], &m.total
	var others tally
	for j, o := range m.ring {
		if j != i {
			others.successes += o.successes
			others.failures += o.failures
		}
	}
	if t.runS == b.runS+others.successes {
		t.runS -= min(t.runS, b.runS)
	}
	if t.runF == b.runF+others.failures {
		t.runF -= min(t.runF, b.runF)
	}
	t.requests -= min(t.requests, b.requests)
	t.exclusions -= min(t.exclusions, b.exclusions)
	t.successes -= min(t.successes, b.successes)
	t.failures -= min(t.failures, b.failures)
	m.ring[i] = tally{}
}

func (m *model) newGeneration(now time.Time) {
	m.gen++
	m.start, m.age, m.total = now, 0, tally{}
	clear(m.ring)
}

func (m *model) transition(now time.Time, to breaker.State, reason string, c breaker.Counts) {
	m.want = append(m.want, breaker.Transition{
		Name: m.cfg.Name, From: m.state, To: to, Reason: reason, At: now, Counts: c,
	})
	m.state = to
	m.newGeneration(now)
}

// ticket is where a request was admitted: its generation and bucket.
type ticket struct{ gen, age int }

// allow returns the ticket of an admitted request, or the error.
func (m *model) allow(now time.Time) (ticket, error) {
	m.advance(now)
	valid := m.total.requests - min(m.total.requests, m.total.exclusions)
	switch {
	case m.state == breaker.StateOpen:
		return ticket{}, breaker.ErrOpen
	case m.state == breaker.StateHalfOpen && valid >= uint32(m.cfg.HalfOpenProbes):
		return ticket{}, breaker.ErrTooManyProbes
	}
	m.total.requests++
	m.ring[m.age%m.buckets].requests++
	return ticket{m.gen, m.age}, nil
}

// done reports the outcome of the request admitted with tk: dropped if its
// generation is over, left out of the counts if its bucket has left the
// window.
func (m *model) done(now time.Time, tk ticket, o forage.Class) {
	m.advance(now)
	if tk.gen != m.gen {
		return
	}
	counted := m.age-tk.age < m.buckets
	b, t := &m.ring[tk.age%m.buckets], &m.total
	switch {
	case o == forage.Canceled && counted:
		b.exclusions++
		t.exclusions++
	case o == forage.Success && counted:
		b.success()
		t.success()
		if m.state == breaker.StateHalfOpen && t.runS >= uint32(m.cfg.HalfOpenProbes) {
			m.transition(now, breaker.StateClosed, breaker.ReasonProbesSucceeded, m.counts())
		}
	case o == forage.Transient && m.state == breaker.StateHalfOpen:
		m.transition(now, breaker.StateOpen, breaker.ReasonProbeFailed, breaker.Counts{
			Requests: t.successes + 1, Successes: t.successes, Failures: 1, ConsecutiveFailures: 1,
		})
	case o == forage.Transient:
		if counted {
			b.failure()
			t.failure()
		}
		// Checked on every reported Failure, counted or not.
		if reason := m.tripReason(); reason != "" {
			m.transition(now, breaker.StateOpen, reason, m.counts())
		}
	}
}

// tripReason is the package doc's trip rule, in exact integer arithmetic:
// the reason of the rule that holds, or "".
func (m *model) tripReason() string {
	n := uint64(m.total.successes) + uint64(m.total.failures)
	run, floor := uint64(m.total.runF), uint64(m.cfg.MinRequests)
	switch {
	case n < floor:
		return ""
	case n >= 6*floor && 100*uint64(m.total.failures) >= m.ratio*n:
		return breaker.ReasonFailureRatio
	case run >= floor && 6*run >= n:
		return breaker.ReasonConsecutiveFailures
	}
	return ""
}

// inflight is an admitted request not yet reported.
type inflight struct {
	done func(forage.Class)
	tk   ticket
}

// drawConfig draws a small configuration so that every state is reachable
// within a few dozen steps.
func drawConfig(t *rapid.T) (breaker.Config, uint64) {
	ratio := rapid.Uint64Range(1, 100).Draw(t, "ratioPercent")
	bucket := time.Duration(rapid.IntRange(1, 10).Draw(t, "bucketPeriod100ms")) * 100 * time.Millisecond
	return breaker.Config{
		Name:           "m",
		FailureRatio:   float64(ratio) / 100,
		MinRequests:    rapid.IntRange(1, 6).Draw(t, "minRequests"),
		Window:         time.Duration(rapid.IntRange(1, 6).Draw(t, "buckets")) * bucket,
		BucketPeriod:   bucket,
		OpenTimeout:    time.Duration(rapid.IntRange(1, 50).Draw(t, "openTimeout100ms")) * 100 * time.Millisecond,
		HalfOpenProbes: rapid.IntRange(1, 3).Draw(t, "halfOpenProbes"),
	}, ratio
}

// outcomes draws outcomes, failures twice as often so that breakers trip.
// A fresh generator per use: rapid generators shared between parallel tests
// race on their lazy initialisation.
func outcomes() *rapid.Generator[forage.Class] {
	return rapid.SampledFrom([]forage.Class{forage.Success, forage.Transient, forage.Transient, forage.Canceled})
}

// TestStateMachine runs random sequences of Allow, done, State, Counts and
// fake-time waits (inside a synctest bubble via rapid.SyncTest) against the
// model, and checks after every step that the breaker delivered exactly the
// model's transitions, in order, with their reasons, times and counts.
func TestStateMachine(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			cfg, ratio := drawConfig(rt)
			var got []breaker.Transition
			var b *breaker.Breaker
			cfg.OnTransition = func(tr breaker.Transition) {
				got = append(got, tr)
				_ = b.State() // re-entry must neither hang nor change anything at this instant
			}
			b, err := breaker.New(cfg)
			if err != nil {
				rt.Fatal(err)
			}
			m := newModel(cfg, ratio, time.Now())
			var open []inflight
			var reported []func(forage.Class)
			step := 0

			allow := func(rt *rapid.T) (inflight, bool) {
				done, err := b.Allow()
				tk, wantErr := m.allow(time.Now())
				if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
					rt.Fatalf("step %d: Allow() error = %v, want %v (model state %v, counts %v)", step, err, wantErr, m.state, m.counts())
				}
				return inflight{done, tk}, err == nil
			}
			rt.Repeat(map[string]func(*rapid.T){
				"allow": func(rt *rapid.T) {
					if r, ok := allow(rt); ok {
						open = append(open, r)
					}
				},
				"allowThenDone": func(rt *rapid.T) {
					if r, ok := allow(rt); ok {
						o := outcomes().Draw(rt, "outcome")
						r.done(o)
						m.done(time.Now(), r.tk, o)
						reported = append(reported, r.done)
					}
				},
				"done": func(rt *rapid.T) {
					if len(open) == 0 {
						rt.Skip("nothing in flight")
					}
					i := rapid.IntRange(0, len(open)-1).Draw(rt, "request")
					o := outcomes().Draw(rt, "outcome")
					r := open[i]
					open = append(open[:i], open[i+1:]...)
					r.done(o)
					m.done(time.Now(), r.tk, o)
					reported = append(reported, r.done)
				},
				"doneAgain": func(rt *rapid.T) {
					if len(reported) == 0 {
						rt.Skip("nothing reported yet")
					}
					// A second report of the same request is ignored.
					rapid.SampledFrom(reported).Draw(rt, "reported")(outcomes().Draw(rt, "outcome"))
				},
				"wait": func(rt *rapid.T) {
					d := rapid.SampledFrom([]time.Duration{
						time.Nanosecond, cfg.Window, cfg.OpenTimeout, cfg.Window + time.Nanosecond,
						cfg.OpenTimeout + time.Nanosecond, cfg.OpenTimeout - time.Nanosecond, 250 * time.Millisecond,
						cfg.BucketPeriod, cfg.BucketPeriod - time.Nanosecond, cfg.BucketPeriod + time.Nanosecond,
					}).Draw(rt, "wait")
					time.Sleep(d)
				},
				"state": func(rt *rapid.T) {
					got := b.State()
					m.advance(time.Now())
					if got != m.state {
						rt.Fatalf("step %d: State() = %v, want %v", step, got, m.state)
					}
				},
				"counts": func(rt *rapid.T) {
					got := b.Counts()
					m.advance(time.Now())
					if want := m.counts(); got != want {
						rt.Fatalf("step %d: Counts() = %v, want %v (state %v)", step, got, want, m.state)
					}
				},
				"": func(rt *rapid.T) {
					if diff := cmp.Diff(m.want, got); diff != "" {
						rt.Fatalf("step %d: transitions (-model +breaker):\n%s", step, diff)
					}
					step++
				},
			})
			for _, r := range open { // leave nothing dangling in the bubble
				r.done(forage.Canceled)
			}
		})
	})
}
