package budget_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/retry"
	"pgregory.net/rapid"
)

// fast is a provider config that paces quickly and never opens its breaker,
// so tests see the retry and envelope logic alone.
func fast() budget.Config {
	return budget.Config{
		Adaptive:       aimd.Config{Initial: 1000, Max: 1000},
		Breaker:        breaker.Config{MinRequests: 1 << 20},
		AttemptTimeout: budget.NoTimeout,
		MaxWait:        10 * time.Minute,
	}
}

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func newLocal(tb tb, cfg budget.Config) budget.Provider {
	tb.Helper()
	p, err := budget.NewLocal("test", cfg)
	if err != nil {
		tb.Fatalf("NewLocal: %v", err)
	}
	return p
}

func newRun(tb tb, env budget.Envelope) *budget.Run {
	tb.Helper()
	r, err := budget.NewRun(env)
	if err != nil {
		tb.Fatalf("NewRun(%+v): %v", env, err)
	}
	return r
}

// status returns an attempt that answers code with the given Retry-After.
func status(code int, retryAfter time.Duration) func(context.Context) forage.Outcome {
	return func(context.Context) forage.Outcome {
		return forage.Outcome{Status: code, RetryAfter: retryAfter}
	}
}

func reasonOf(t tb, err error) forage.Reason {
	t.Helper()
	r, ok := budget.ReasonOf(err)
	if !ok {
		t.Fatalf("error %v carries no reason", err)
	}
	return r
}

// TestPropertyEnvelope drives many concurrent calls with random outcomes
// against one run and checks the envelope's promises: never more attempts
// than MaxRequests, retries within Ratio·first attempts + MinRetries, the
// run's count equal to the attempts made, and permanent errors attempted
// once.
func TestPropertyEnvelope(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			maxReq := rapid.IntRange(1, 60).Draw(rt, "maxRequests")
			minRetries := rapid.IntRange(0, 4).Draw(rt, "minRetries")
			workers := rapid.IntRange(1, 6).Draw(rt, "workers")
			calls := rapid.IntRange(1, 12).Draw(rt, "callsPerWorker")
			codes := rapid.SliceOfN(rapid.SampledFrom([]int{200, 200, 429, 503, 500, 404, 408}), 1, 40).Draw(rt, "codes")
			env := budget.Envelope{MaxRequests: maxReq, MinRetries: minRetries}
			if minRetries == 0 {
				env.MinRetries = retry.NoRetries
			}
			run := newRun(rt, env)
			p := newLocal(rt, fast())
			var made, firsts, retries, permanentTwice atomic.Int64
			var next atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range calls {
						n := 0
						permanent := false
						_ = p.Do(context.Background(), run, func(context.Context) forage.Outcome {
							if permanent {
								permanentTwice.Add(1)
							}
							n++
							made.Add(1)
							code := codes[int(next.Add(1))%len(codes)]
							permanent = code == 404
							return forage.Outcome{Status: code}
						})
						if n > 0 {
							firsts.Add(1)
							retries.Add(int64(n - 1))
						}
					}
				})
			}
			wg.Wait()
			if got := made.Load(); got > int64(maxReq) {
				rt.Fatalf("made %d attempts, MaxRequests %d", got, maxReq)
			}
			if got, want := int64(run.Attempts()), made.Load(); got != want {
				rt.Fatalf("run counted %d attempts, %d were made", got, want)
			}
			if bound := 0.2*float64(firsts.Load()) + float64(minRetries); float64(retries.Load()) > bound+1e-9 {
				rt.Fatalf("%d retries for %d first attempts, bound %.1f", retries.Load(), firsts.Load(), bound)
			}
			if permanentTwice.Load() != 0 {
				rt.Fatalf("a permanent error was retried %d times", permanentTwice.Load())
			}
		})
	})
}

// TestPropertyParentEnvelope: runs that are turns of one parent run (a
// command's envelope) share its cap: concurrent calls through several
// children never make more attempts than the parent allows nor than each
// child allows, every attempt is counted in its child and in the parent,
// and a child's deadline is the earlier of its own and its parent's.
func TestPropertyParentEnvelope(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			now := time.Now()
			parentCap := rapid.IntRange(1, 40).Draw(rt, "parentCap")
			parentEnd := now.Add(rapid.SampledFrom([]time.Duration{0, time.Minute, time.Hour}).Draw(rt, "parentEnd"))
			if parentEnd.Equal(now) {
				parentEnd = time.Time{}
			}
			parent := newRun(rt, budget.Envelope{MaxRequests: parentCap, Deadline: parentEnd})
			kids := rapid.IntRange(1, 4).Draw(rt, "children")
			caps := make([]int, kids)
			runs := make([]*budget.Run, kids)
			for i := range runs {
				caps[i] = rapid.IntRange(0, 30).Draw(rt, "childCap")
				end := now.Add(rapid.SampledFrom([]time.Duration{30 * time.Second, 2 * time.Hour}).Draw(rt, "childEnd"))
				runs[i] = newRun(rt, budget.Envelope{MaxRequests: caps[i], Deadline: end, Parent: parent})
				want := end
				if !parentEnd.IsZero() && parentEnd.Before(end) {
					want = parentEnd
				}
				if d, ok := runs[i].Deadline(); !ok || !d.Equal(want) {
					rt.Fatalf("child deadline %v, %v; want %v (own %v, parent %v)", d, ok, want, end, parentEnd)
				}
			}
			p := newLocal(rt, fast())
			made := make([]atomic.Int64, kids)
			var wg sync.WaitGroup
			for i := range kids {
				for range 2 {
					wg.Go(func() {
						for range 15 {
							_ = p.Do(context.Background(), runs[i], func(context.Context) forage.Outcome {
								made[i].Add(1)
								return forage.Outcome{Status: 200}
							})
						}
					})
				}
			}
			wg.Wait()
			total := int64(0)
			for i := range kids {
				n := made[i].Load()
				total += n
				if caps[i] > 0 && n > int64(caps[i]) {
					rt.Fatalf("child %d made %d attempts, its cap %d", i, n, caps[i])
				}
				if int64(runs[i].Attempts()) != n {
					rt.Fatalf("child %d counted %d attempts, %d made", i, runs[i].Attempts(), n)
				}
			}
			if total > int64(parentCap) || int64(parent.Attempts()) != total {
				rt.Fatalf("%d attempts made, parent counted %d, parent cap %d", total, parent.Attempts(), parentCap)
			}
			if total == int64(parentCap) {
				if why, spent := runs[0].ExhaustedAt(now); !spent || why != forage.ReasonRequestCap {
					rt.Fatalf("parent spent, child ExhaustedAt = %v, %v; want request_cap", why, spent)
				}
			}
		})
	})
}

// TestPropertyPermanentAttemptedOnce: any 4xx but 408, 418 and 429 is
// attempted exactly once and stops the call as permanent.
func TestPropertyPermanentAttemptedOnce(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		code := rapid.IntRange(400, 499).Filter(func(c int) bool { return c != 408 && c != 418 && c != 429 }).Draw(rt, "code")
		p := newLocal(rt, fast())
		n := 0
		err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			n++
			return forage.Outcome{Status: code}
		})
		if n != 1 {
			rt.Fatalf("status %d attempted %d times, want 1", code, n)
		}
		if r := reasonOf(rt, err); r != forage.ReasonPermanent {
			rt.Fatalf("status %d stopped with %q, want permanent", code, r)
		}
	})
}

// TestOpenBreakerMakesNoAttempt: with the breaker open, Do fails fast with
// circuit_open, makes no attempt, counts nothing against the run and leaves
// its retry budget untouched.
func TestOpenBreakerMakesNoAttempt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.Breaker = breaker.Config{MinRequests: 1, OpenTimeout: time.Minute}
		p := newLocal(t, cfg)
		_ = p.Do(context.Background(), nil, status(500, 0), budget.CallOption{NoRetry: true})
		run := newRun(t, budget.Envelope{MaxRequests: 10})
		tokens := budget.RetriesOf(run).Stats().Tokens
		called := false
		err := p.Do(context.Background(), run, func(context.Context) forage.Outcome {
			called = true
			return forage.Outcome{Status: 200}
		})
		var stop *budget.Error
		if !errors.As(err, &stop) || stop.Reason != forage.ReasonCircuitOpen {
			t.Fatalf("Do = %v, want circuit_open", err)
		}
		if called {
			t.Fatal("an attempt was made through an open breaker")
		}
		if run.Attempts() != 0 || budget.RetriesOf(run).Stats().Tokens != tokens {
			t.Fatalf("run charged: attempts %d, tokens %v (was %v)", run.Attempts(), budget.RetriesOf(run).Stats().Tokens, tokens)
		}
		if want := time.Now().Add(time.Minute); !stop.Until.Equal(want) {
			t.Fatalf("Until = %v, want %v (open timeout)", stop.Until, want)
		}
		if !stop.Reason.SourcePressure() || stop.Reason.Exhausted() {
			t.Fatal("circuit_open must be source pressure, not exhaustion")
		}
	})
}

// TestOpenBreakerNamesTheLastFailure: the circuit_open stop says what the
// provider did, not only that the breaker is open: the last failure's
// status, or, for an attempt that got no answer or a 2xx answer the host
// could not read, its error with the URL's query values masked; never the
// body of an answer with an error status.
func TestOpenBreakerNamesTheLastFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		out  forage.Outcome
		want string
	}{
		{"refused", forage.Outcome{Err: forage.Mark(errors.New(`Get "http://h/x?apikey=S3CRET": dial tcp 127.0.0.1:1: connect: connection refused`), forage.Transient)}, "connection refused"},
		{"502", forage.Outcome{Status: 502, Err: errors.New("body: S3CRET")}, "the last failure: HTTP 502"},
		// A 2xx the host could not read: why, not only "HTTP 200".
		{"200 not JSON", forage.Outcome{Status: 200, Err: forage.Mark(errors.New("klines: the answer is not JSON (text/html)"), forage.Transient)},
			"the last failure: HTTP 200: klines: the answer is not JSON (text/html)"},
	} {
		synctest.Test(t, func(t *testing.T) {
			cfg := fast()
			cfg.Breaker = breaker.Config{MinRequests: 1, OpenTimeout: time.Minute}
			p := newLocal(t, cfg)
			_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome { return tc.out }, budget.CallOption{NoRetry: true})
			err := p.Do(context.Background(), nil, status(200, 0))
			var stop *budget.Error
			if !errors.As(err, &stop) || stop.Reason != forage.ReasonCircuitOpen || !errors.Is(err, breaker.ErrOpen) {
				t.Fatalf("%s: Do = %v, want circuit_open", tc.name, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "S3CRET") {
				t.Fatalf("%s: Do = %q, want it to name %q and no secret", tc.name, msg, tc.want)
			}
		})
	}
}

// TestReasons pins the reason of every kind of stop.
func TestReasons(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     budget.Envelope
		left    time.Duration // deadline relative to the bubble's start, if any
		cfg     func(*budget.Config)
		attempt func(context.Context) forage.Outcome
		want    forage.Reason
	}{
		{"request cap", budget.Envelope{MaxRequests: 2}, 0, nil, status(500, 0), forage.ReasonRequestCap},
		{"deadline", budget.Envelope{}, -time.Second, nil, status(200, 0), forage.ReasonDeadline},
		{"retry budget spent: what the provider did", budget.Envelope{MinRetries: retry.NoRetries, RetryRatio: retry.NoRetries}, 0, nil, status(503, 0), forage.ReasonUnavailable},
		{"retry budget spent on a 429", budget.Envelope{MinRetries: retry.NoRetries, RetryRatio: retry.NoRetries}, 0, nil, status(429, 0), forage.ReasonThrottled},
		{"throttled after max attempts", budget.Envelope{}, 0, func(c *budget.Config) { c.MaxAttempts = 3 }, status(429, 0), forage.ReasonThrottled},
		{"unavailable after max attempts", budget.Envelope{}, 0, func(c *budget.Config) { c.MaxAttempts = 2 }, status(503, 0), forage.ReasonUnavailable},
		{"banned", budget.Envelope{}, 0, nil, status(418, time.Minute), forage.ReasonBanned},
		{"retry-after past the deadline", budget.Envelope{}, 10 * time.Second, nil, status(429, time.Hour), forage.ReasonThrottled},
		{"retry-after past MaxWait", budget.Envelope{}, 0, func(c *budget.Config) { c.MaxWait = time.Second }, status(429, time.Minute), forage.ReasonThrottled},
		{"permanent", budget.Envelope{}, 0, nil, status(404, 0), forage.ReasonPermanent},
		{"marked permanent", budget.Envelope{}, 0, nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 200, Err: forage.Mark(errors.New("bad schema"), forage.Permanent)}
		}, forage.ReasonPermanent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				env := tc.env
				if tc.left != 0 {
					env.Deadline = time.Now().Add(tc.left)
				}
				cfg := fast()
				if tc.cfg != nil {
					tc.cfg(&cfg)
				}
				err := newLocal(t, cfg).Do(context.Background(), newRun(t, env), tc.attempt)
				if got := reasonOf(t, err); got != tc.want {
					t.Fatalf("reason %q, want %q (err %v)", got, tc.want, err)
				}
				if !errors.Is(err, budget.ErrStopped) {
					t.Fatalf("%v does not match ErrStopped", err)
				}
			})
		})
	}
}

// TestRetryAfterFloorsTheSleep: a 429 with Retry-After 3s is retried no
// sooner than 3s later, and the retry succeeds.
func TestRetryAfterFloorsTheSleep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newLocal(t, fast())
		var times []time.Time
		err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			times = append(times, time.Now())
			if len(times) == 1 {
				return forage.Outcome{Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second}
			}
			return forage.Outcome{Status: http.StatusOK}
		})
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		if len(times) != 2 || times[1].Sub(times[0]) < 3*time.Second {
			t.Fatalf("attempts at %v, want a retry >= 3s after the first", times)
		}
	})
}

// TestAttemptTimeoutIsTransient: an attempt that outlives AttemptTimeout is
// cancelled, classified transient and retried.
func TestAttemptTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.AttemptTimeout = time.Second
		p := newLocal(t, cfg)
		n := 0
		err := p.Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
			n++
			if n == 1 {
				<-ctx.Done()
				return forage.Outcome{Err: ctx.Err()}
			}
			return forage.Outcome{Status: 200}
		})
		if err != nil || n != 2 {
			t.Fatalf("Do = %v after %d attempts, want success on the 2nd", err, n)
		}
		if s := p.Snapshot(); s.Transient != 1 || s.OK != 1 {
			t.Fatalf("snapshot %+v, want 1 transient and 1 ok", s)
		}
	})
}

// TestCancelStopsWithoutCharge: a cancelled caller stops with canceled.
func TestCancelStopsWithoutCharge(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	run := newRun(t, budget.Envelope{})
	err := newLocal(t, fast()).Do(ctx, run, status(200, 0))
	if reasonOf(t, err) != forage.ReasonCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want canceled wrapping context.Canceled", err)
	}
	if run.Attempts() != 0 {
		t.Fatalf("run charged %d attempts", run.Attempts())
	}
}

// TestBulkheadCapsInFlight: MaxInFlight attempts at most are in flight.
func TestBulkheadCapsInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.MaxInFlight = 3
		p := newLocal(t, cfg)
		var cur, peak atomic.Int64
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() {
				_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
					n := cur.Add(1)
					for {
						old := peak.Load()
						if n <= old || peak.CompareAndSwap(old, n) {
							break
						}
					}
					time.Sleep(100 * time.Millisecond)
					cur.Add(-1)
					return forage.Outcome{Status: 200}
				})
			})
		}
		wg.Wait()
		if peak.Load() != 3 {
			t.Fatalf("peak in flight %d, want 3", peak.Load())
		}
		if p.Snapshot().Saturated == 0 {
			t.Fatal("no call reported saturation")
		}
	})
}

// TestPacingAtInitialRate: before any response the provider paces at the
// conservative initial rate.
func TestPacingAtInitialRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newLocal(t, budget.Config{Adaptive: aimd.Config{Initial: 2, Increase: 1e-9, DisableSlowStart: true}})
		start := time.Now()
		for range 5 {
			if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got < 1900*time.Millisecond {
			t.Fatalf("5 calls at 2/s took %v, want about 2s", got)
		}
	})
}

// TestWeightAboveBurstRefused: a call heavier than both a weighted limit's
// burst and half its count is refused as permanent without an attempt.
func TestWeightAboveBurstRefused(t *testing.T) {
	t.Parallel()
	cfg := fast()
	cfg.Limits = []budget.Limit{{Count: 10, Per: time.Minute, Weighted: true, Burst: 5}}
	called := false
	err := newLocal(t, cfg).Do(context.Background(), nil, func(context.Context) forage.Outcome {
		called = true
		return forage.Outcome{}
	}, budget.CallOption{Weight: 6})
	if called || !errors.Is(err, budget.ErrInvalidConfig) || reasonOf(t, err) != forage.ReasonPermanent {
		t.Fatalf("Do = %v (attempted %v), want permanent ErrInvalidConfig and no attempt", err, called)
	}
}

// TestKnownLimitHolds: a published limit of 10 per second is never exceeded
// in any window of one second, weights included.
func TestKnownLimitHolds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.Limits = []budget.Limit{{Name: "weight/1s", Count: 10, Per: time.Second, Weighted: true, Burst: 2}}
		p := newLocal(t, cfg)
		type sent struct {
			at time.Time
			w  int
		}
		var log []sent
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				for range 10 {
					w := 1 + i%2
					_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
						mu.Lock()
						log = append(log, sent{time.Now(), w})
						mu.Unlock()
						return forage.Outcome{Status: 200}
					}, budget.CallOption{Weight: w})
				}
			})
		}
		wg.Wait()
		for i := range log {
			sum := 0
			for j := i; j < len(log) && log[j].at.Sub(log[i].at) < time.Second; j++ {
				sum += log[j].w
			}
			if sum > 10 {
				t.Fatalf("window from %v carries %d units, limit 10", log[i].at, sum)
			}
		}
	})
}

// TestReconcileWithProviderUsage: when the provider reports more usage than
// the local count (another client shares the quota), the known limit is
// tightened to what the provider says is left.
func TestReconcileWithProviderUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		reported forage.Quota
		want     int // calls that go at once after the first
	}{
		{"no headers", forage.Quota{}, 9},
		{"binance used weight", forage.Quota{Used: 95, Window: time.Minute, HasUsed: true, HasWindow: true}, 5},
		{"ietf remaining", forage.Quota{Limit: 100, Remaining: 2, Window: time.Minute, HasLimit: true, HasRemaining: true, HasWindow: true}, 2},
		{"other window ignored", forage.Quota{Used: 95, Window: time.Second, HasUsed: true, HasWindow: true}, 9},
		// Headers that say nothing of usage (a limit, a window, a reset
		// alone) leave the count alone: they used to book all that was left.
		{"limit alone", forage.Quota{Limit: 100, Window: time.Minute, HasLimit: true, HasWindow: true}, 9},
		{"reset alone", forage.Quota{Reset: 30 * time.Second, HasReset: true}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				cfg := fast()
				cfg.Limits = []budget.Limit{{Name: "weight/1m", Count: 100, Per: time.Minute, Weighted: true}} // burst 10
				cfg.Burst = 50                                                                                 // the adaptive pacer is not what is tested
				p := newLocal(t, cfg)
				first := true
				err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
					out := forage.Outcome{Status: 200}
					if first {
						out.Quota = tc.reported
						first = false
					}
					return out
				})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				n := 0
				for time.Since(start) == 0 && n < 20 {
					if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
						t.Fatal(err)
					}
					if time.Since(start) == 0 {
						n++
					}
				}
				if n != tc.want {
					t.Fatalf("%d calls went at once, want %d", n, tc.want)
				}
			})
		})
	}
}

// TestStatusDecidesOverExplainingError: an outcome carrying both a status
// and an error explaining it (the provider's message) is classified by the
// status: a 429 with a message is retried, not taken as permanent.
func TestStatusDecidesOverExplainingError(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n := 0
		err := newLocal(t, fast()).Do(context.Background(), nil, func(context.Context) forage.Outcome {
			n++
			if n == 1 {
				return forage.Outcome{Status: 429, Err: errors.New("too much request weight used")}
			}
			return forage.Outcome{Status: 200}
		})
		if err != nil || n != 2 {
			t.Fatalf("Do = %v after %d attempts, want success after a retry", err, n)
		}
	})
}

// TestCallerCancelIsNotTheProvidersFault: a caller whose context ends during
// an attempt stops with canceled, and the provider is not charged a
// transient failure (no breaker count, no aimd pressure).
func TestCallerCancelIsNotTheProvidersFault(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newLocal(t, fast())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := p.Do(ctx, nil, func(actx context.Context) forage.Outcome {
			<-actx.Done()
			return forage.Outcome{Err: actx.Err()}
		})
		if r := reasonOf(t, err); r != forage.ReasonCanceled {
			t.Fatalf("reason %q, want canceled", r)
		}
		if s := p.Snapshot(); s.Transient != 0 || s.Requests != 1 {
			t.Fatalf("snapshot %+v: the caller's cancel was charged to the provider", s)
		}
	})
}

// TestBreakerOpeningDuringPacingStopsTheAttempt: a call that passed the
// breaker while it was closed, then waited for its pacing slot while the
// breaker opened, makes no attempt.
func TestBreakerOpeningDuringPacingStopsTheAttempt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newLocal(t, budget.Config{
			Adaptive:       aimd.Config{Initial: 1, DisableSlowStart: true, Increase: 1e-6},
			Breaker:        breaker.Config{MinRequests: 1, OpenTimeout: time.Hour},
			AttemptTimeout: budget.NoTimeout,
		})
		inFlight := make(chan struct{})
		go func() {
			_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
				close(inFlight)
				time.Sleep(100 * time.Millisecond)
				return forage.Outcome{Status: 500}
			}, budget.CallOption{NoRetry: true})
		}()
		<-inFlight
		called := false
		err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			called = true
			return forage.Outcome{Status: 200}
		})
		if called || reasonOf(t, err) != forage.ReasonCircuitOpen {
			t.Fatalf("Do = %v (attempted: %v), want circuit_open and no attempt", err, called)
		}
	})
}

// TestHeldPauseLongerThanMaxWait: once a provider asked for a pause longer
// than MaxWait, later calls stop at once with throttled and the pause's end,
// rather than sleeping through it in the pacer.
func TestHeldPauseLongerThanMaxWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.MaxWait = time.Minute
		cfg.MaxPause = 4 * time.Hour // a provider known to pause for hours
		p := newLocal(t, cfg)
		_ = p.Do(context.Background(), nil, status(429, 3*time.Hour))
		start := time.Now()
		var stop *budget.Error
		err := p.Do(context.Background(), nil, status(200, 0))
		if !errors.As(err, &stop) || stop.Reason != forage.ReasonThrottled || !stop.Until.Equal(start.Add(3*time.Hour)) {
			t.Fatalf("Do = %v, want throttled until +3h", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the call waited %v for a pause longer than MaxWait", waited)
		}
	})
}

// TestPanickingAttemptReleasesItsSlot: an attempt that panics gives back
// its bulkhead slot, so later calls are not blocked forever.
func TestPanickingAttemptReleasesItsSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.MaxInFlight = 1
		p := newLocal(t, cfg)
		func() {
			defer func() { _ = recover() }()
			_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome { panic("fetcher bug") })
		}()
		if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
			t.Fatalf("Do after a panicking attempt: %v", err)
		}
		if s := p.Snapshot(); s.InFlight != 0 || s.Breaker != "closed" {
			t.Fatalf("snapshot %+v after the panic", s)
		}
	})
}

// TestAPanickingClassifyOrBanReleasesItsSlot: a Config.Classify or
// Config.Ban that panics (a hook reading Err.Error() of an answer that
// has none) gives back the attempt's bulkhead slot and breaker ticket on
// the way up, as a panicking attempt does: a host that recovers (net/http
// and the scheduler do) is not left with a provider whose every call
// waits for a slot once MaxInFlight hooks have panicked.
func TestAPanickingClassifyOrBanReleasesItsSlot(t *testing.T) {
	t.Parallel()
	for _, hook := range []string{"Classify", "Ban"} {
		t.Run(hook, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := fast()
				cfg.MaxInFlight = 1
				boom := func(o forage.Outcome) bool {
					if o.Status == 500 {
						_ = o.Err.Error() // a status-only outcome has no Err
					}
					return false
				}
				if hook == "Classify" {
					cfg.Classify = func(o forage.Outcome) forage.Class { boom(o); return o.Class() }
				} else {
					cfg.Ban = boom
				}
				p := newLocal(t, cfg)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				for range 3 {
					func() {
						defer func() { _ = recover() }()
						_ = p.Do(ctx, nil, status(500, 0))
					}()
				}
				if err := p.Do(ctx, nil, status(200, 0)); err != nil {
					t.Fatalf("Do after %s panicked: %v", hook, err)
				}
				if s := p.Snapshot(); s.InFlight != 0 || s.Breaker != "closed" {
					t.Fatalf("snapshot %+v after the panics", s)
				}
			})
		})
	}
}

// TestMarkedThrottleStillThrottles: a host that marks the error explaining
// a 429 as permanent does not hide the throttling: the status decides.
func TestMarkedThrottleStillThrottles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newLocal(t, fast())
		n := 0
		err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			n++
			if n == 1 {
				return forage.Outcome{Status: 429, Err: forage.Mark(errors.New("cannot decode the error body"), forage.Permanent)}
			}
			return forage.Outcome{Status: 200}
		})
		if err != nil || n != 2 || p.Snapshot().Throttled != 1 {
			t.Fatalf("Do = %v after %d attempts, throttled %d; want a retried 429", err, n, p.Snapshot().Throttled)
		}
	})
}

// TestSlowKnownLimit: a published limit slower than the controller's
// default floor (100 per hour) is accepted and bounds the rate.
func TestSlowKnownLimit(t *testing.T) {
	t.Parallel()
	cfg := budget.Config{Limits: []budget.Limit{{Count: 100, Per: time.Hour}}}
	p, err := budget.NewLocal("slow", cfg)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	if r := p.Snapshot().Rate; r > 100.0/3600 {
		t.Fatalf("rate %v above the known limit", r)
	}
	if _, err := budget.NewRegistry(budget.RegistryConfig{Defaults: cfg}); err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
}

// TestAProviderThatNeverAnswersIsNoSpentBudget: calls to a provider that
// refuses every connection stop as unavailable, the first (out of
// attempts) and every later one (out of retry tokens), never as a spent
// budget: they stopped as retry_budget, which reads as a planned hand-off,
// and a scheduler behind them counted no failure, for good. The budget's
// word is in the error.
func TestAProviderThatNeverAnswersIsNoSpentBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newLocal(t, fast())
		run := newRun(t, budget.Envelope{})
		refused := func(context.Context) forage.Outcome {
			return forage.FromHTTP(nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
		}
		spent := false
		for i := range 20 {
			err := p.Do(context.Background(), run, refused)
			got := reasonOf(t, err)
			if got != forage.ReasonUnavailable || got.Exhausted() {
				t.Fatalf("call %d: reason %q (err %v), want unavailable", i, got, err)
			}
			spent = spent || errors.Is(err, retry.ErrBudgetExhausted)
		}
		if !spent {
			t.Fatal("no call said the retry budget was spent")
		}
	})
}
