package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/forage-go/forage/breaker"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// model is a from-scratch specification of the breaker, written from the
// documentation (and gobreaker's documented lazy evaluation), not from the
// implementation: states, generations, the fixed counting window, the
// minimum-throughput guard, the failure ratio as an exact fraction, the open
// timeout and the half-open probe gate.
type model struct {
	cfg    breaker.Config // every field set; FailureRatio = ratioPercent/100
	ratio  uint64         // FailureRatio in percent, for exact comparisons
	state  breaker.State
	gen    int       // bumped on every state change and window reset
	start  time.Time // when the current generation started
	counts breaker.Counts
	want   []breaker.Transition
}

func newModel(cfg breaker.Config, ratioPercent uint64, now time.Time) *model {
	return &model{cfg: cfg, ratio: ratioPercent, start: now}
}

// advance applies what gobreaker evaluates lazily at the start of every call:
// an elapsed window (closed) or an elapsed open timeout, both strictly after.
func (m *model) advance(now time.Time) {
	switch m.state {
	case breaker.StateClosed:
		if now.After(m.start.Add(m.cfg.Window)) {
			m.newGeneration(now)
		}
	case breaker.StateOpen:
		if now.After(m.start.Add(m.cfg.OpenTimeout)) {
			m.transition(now, breaker.StateHalfOpen, breaker.ReasonOpenTimeout, breaker.Counts{})
		}
	}
}

func (m *model) newGeneration(now time.Time) {
	m.gen++
	m.start = now
	m.counts = breaker.Counts{}
}

func (m *model) transition(now time.Time, to breaker.State, reason string, c breaker.Counts) {
	m.want = append(m.want, breaker.Transition{
		Name: m.cfg.Name, From: m.state, To: to, Reason: reason, At: now, Counts: c,
	})
	m.state = to
	m.newGeneration(now)
}

// allow returns the generation the request is admitted in, or the error.
func (m *model) allow(now time.Time) (int, error) {
	m.advance(now)
	switch {
	case m.state == breaker.StateOpen:
		return 0, breaker.ErrOpen
	case m.state == breaker.StateHalfOpen && m.counts.Requests >= uint32(m.cfg.HalfOpenProbes):
		return 0, breaker.ErrTooManyProbes
	}
	m.counts.Requests++
	return m.gen, nil
}

// done reports the outcome of a request admitted in generation gen; outcomes
// of an earlier generation are dropped.
func (m *model) done(now time.Time, gen int, o breaker.Outcome) {
	m.advance(now)
	if gen != m.gen {
		return
	}
	c := &m.counts
	switch o {
	case breaker.Ignored:
		c.Requests--
	case breaker.Success:
		c.Successes++
		c.ConsecutiveSuccesses++
		c.ConsecutiveFailures = 0
		if m.state == breaker.StateHalfOpen && c.ConsecutiveSuccesses >= uint32(m.cfg.HalfOpenProbes) {
			m.transition(now, breaker.StateClosed, breaker.ReasonProbesSucceeded, *c)
		}
	case breaker.Failure:
		if m.state == breaker.StateHalfOpen {
			m.transition(now, breaker.StateOpen, breaker.ReasonProbeFailed, breaker.Counts{
				Requests: c.Successes + 1, Successes: c.Successes, Failures: 1, ConsecutiveFailures: 1,
			})
			return
		}
		c.Failures++
		c.ConsecutiveFailures++
		c.ConsecutiveSuccesses = 0
		counted := uint64(c.Successes) + uint64(c.Failures)
		if counted >= uint64(m.cfg.MinRequests) && 100*uint64(c.Failures) >= m.ratio*counted {
			m.transition(now, breaker.StateOpen, breaker.ReasonFailureRatio, *c)
		}
	}
}

// inflight is an admitted request not yet reported.
type inflight struct {
	done func(breaker.Outcome)
	gen  int
}

// drawConfig draws a small configuration so that every state is reachable
// within a few dozen steps.
func drawConfig(t *rapid.T) (breaker.Config, uint64) {
	ratio := rapid.Uint64Range(1, 100).Draw(t, "ratioPercent")
	return breaker.Config{
		Name:           "m",
		FailureRatio:   float64(ratio) / 100,
		MinRequests:    rapid.IntRange(1, 6).Draw(t, "minRequests"),
		Window:         time.Duration(rapid.IntRange(1, 50).Draw(t, "window100ms")) * 100 * time.Millisecond,
		OpenTimeout:    time.Duration(rapid.IntRange(1, 50).Draw(t, "openTimeout100ms")) * 100 * time.Millisecond,
		HalfOpenProbes: rapid.IntRange(1, 3).Draw(t, "halfOpenProbes"),
	}, ratio
}

// outcomes draws outcomes, failures twice as often so that breakers trip.
// A fresh generator per use: rapid generators shared between parallel tests
// race on their lazy initialisation.
func outcomes() *rapid.Generator[breaker.Outcome] {
	return rapid.SampledFrom([]breaker.Outcome{breaker.Success, breaker.Failure, breaker.Failure, breaker.Ignored})
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
			var reported []func(breaker.Outcome)
			step := 0

			allow := func(rt *rapid.T) (inflight, bool) {
				done, err := b.Allow()
				gen, wantErr := m.allow(time.Now())
				if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
					rt.Fatalf("step %d: Allow() error = %v, want %v (model state %v, counts %v)", step, err, wantErr, m.state, m.counts)
				}
				return inflight{done, gen}, err == nil
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
						m.done(time.Now(), r.gen, o)
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
					m.done(time.Now(), r.gen, o)
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
						cfg.OpenTimeout + time.Nanosecond, 250 * time.Millisecond,
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
					if got != m.counts {
						rt.Fatalf("step %d: Counts() = %v, want %v (state %v)", step, got, m.counts, m.state)
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
				r.done(breaker.Ignored)
			}
		})
	})
}
