package budget_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/gcra"
	"pgregory.net/rapid"
)

// hourly is a provider that knows its quota: 3 requests per hour. With the
// default Burst of 1 the limit paces at 3 per hour with a margin of 2 s, so
// after a request the next one waits hourSlot.
const hourSlot = 20*time.Minute + 2*time.Second

func hourly() budget.Config {
	cfg := fast()
	cfg.MaxWait = 0 // the default, 1 minute
	cfg.Limits = []budget.Limit{{Name: "3/h", Count: 3, Per: time.Hour}}
	return cfg
}

// quotaStop returns err's *budget.Error, failing unless it is a stop for a
// spent known quota.
func quotaStop(t tb, err error) *budget.Error {
	t.Helper()
	var e *budget.Error
	if !errors.As(err, &e) || e.Reason != forage.ReasonQuota || !e.Reason.SourcePressure() || e.Until.IsZero() {
		t.Fatalf("Do = %v, want a quota stop (source pressure) with Until", err)
	}
	return e
}

// TestSpentQuotaStopsAtOnce: once a 3/h quota is spent, the next call
// returns at once, before any request, with Until at the reset (30
// minutes), instead of blocking for the whole wait; nothing is counted
// against the run; a call at Until goes at once.
func TestSpentQuotaStopsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newLocal(t, hourly())
		run := newRun(t, budget.Envelope{MaxRequests: 10})
		start := time.Now()
		if err := p.Do(t.Context(), run, status(200, 0)); err != nil {
			t.Fatalf("first call: %v", err)
		}
		attempted := false
		err := p.Do(t.Context(), run, func(context.Context) forage.Outcome {
			attempted = true
			return forage.Outcome{Status: 200}
		})
		e := quotaStop(t, err)
		switch {
		case attempted:
			t.Fatal("a request was sent against a spent quota")
		case time.Since(start) != 0:
			t.Fatalf("Do blocked for %v, want an immediate stop", time.Since(start))
		case e.Until.Sub(start) != hourSlot:
			t.Fatalf("Until = +%v, want +%v (the limit's next slot)", e.Until.Sub(start), hourSlot)
		case run.Attempts() != 1:
			t.Fatalf("run counts %d attempts, want 1 (the refused call is not counted)", run.Attempts())
		}
		time.Sleep(time.Until(e.Until))
		if err := p.Do(t.Context(), run, status(200, 0)); err != nil || time.Since(e.Until) != 0 {
			t.Fatalf("at Until: Do = %v after %v, want nil at once", err, time.Since(e.Until))
		}
	})
}

// TestSpentQuotaUnderRunDeadline: under a run deadline, a spent quota is
// still source pressure with Until (before: deadline, which a scheduler
// re-queues within a second); and under a deadline the wait would outlast,
// even a wait shorter than MaxWait stops at once.
func TestSpentQuotaUnderRunDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := hourly()
		cfg.MaxWait = time.Hour
		p := newLocal(t, cfg)
		start := time.Now()
		run := newRun(t, budget.Envelope{Deadline: start.Add(10 * time.Minute)})
		if err := p.Do(t.Context(), run, status(200, 0)); err != nil {
			t.Fatalf("first call: %v", err)
		}
		e := quotaStop(t, p.Do(t.Context(), run, status(200, 0)))
		if time.Since(start) != 0 || e.Until.Sub(start) != hourSlot {
			t.Fatalf("stopped after %v with Until +%v, want at once with +%v", time.Since(start), e.Until.Sub(start), hourSlot)
		}
	})
}

// TestQuotaWaitWithinMaxWait: a wait no longer than MaxWait is slept
// through inside Do, as before.
func TestQuotaWaitWithinMaxWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := hourly()
		cfg.MaxWait = time.Hour
		p := newLocal(t, cfg)
		start := time.Now()
		for i, want := range []time.Duration{0, hourSlot, 2 * hourSlot} {
			if err := p.Do(t.Context(), nil, status(200, 0)); err != nil || time.Since(start) != want {
				t.Fatalf("call %d: Do = %v at +%v, want nil at +%v", i, err, time.Since(start), want)
			}
		}
	})
}

// TestQuotaStopBooksNothing: calls refused for a spent quota leave the
// limit as they found it: however many are refused, the next slot stays
// where it was.
func TestQuotaStopBooksNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := hourly()
		cfg.Limits = append(cfg.Limits, budget.Limit{Name: "100/d", Count: 100, Per: 24 * time.Hour})
		p := newLocal(t, cfg)
		start := time.Now()
		if err := p.Do(t.Context(), nil, status(200, 0)); err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if e := quotaStop(t, p.Do(t.Context(), nil, status(200, 0))); e.Until.Sub(start) != hourSlot {
				t.Fatalf("refusal %d: Until +%v, want +%v", i, e.Until.Sub(start), hourSlot)
			}
		}
	})
}

// TestPropertyQuotaBounded: with a known limit (weighted or not),
// concurrent calls never exceed it in any window of its length, and no
// call blocks longer than MaxWait; a call stopped for the quota made no request and names a
// time after its allowed wait.
func TestPropertyQuotaBounded(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			per := rapid.SampledFrom([]time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour}).Draw(rt, "per")
			count := rapid.IntRange(1, 12).Draw(rt, "count")
			burst := 0
			if count > 1 {
				burst = rapid.IntRange(0, count-1).Draw(rt, "burst")
			}
			cfg := fast()
			cfg.MaxWait = time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(2*per)).Draw(rt, "maxWait"))
			weighted := rapid.Bool().Draw(rt, "weighted")
			cfg.Limits = []budget.Limit{{Name: "l", Count: count, Per: per, Burst: burst, Weighted: weighted}}
			maxWeight := 1
			if weighted { // the limit's burst, or half its count, as Limit.Burst documents it
				maxWeight = max(min(max(burst, count/10, 1), max(count-1, 1)), count/2)
				// A weighted limit sets no ceiling: the adaptive pacer
				// (1000/s) is not the quota, and its queue is not tested.
				cfg.Burst = 64
			}
			p := newLocal(rt, cfg)
			workers := rapid.IntRange(1, 4).Draw(rt, "workers")
			sleeps := rapid.SliceOfN(rapid.Int64Range(0, int64(per)), 1, 15).Draw(rt, "sleeps")
			weights := rapid.SliceOfN(rapid.IntRange(1, maxWeight), len(sleeps), len(sleeps)).Draw(rt, "weights")

			type send struct {
				at time.Time
				w  int
			}
			var mu sync.Mutex
			var sent []send
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i, sleep := range sleeps {
						time.Sleep(time.Duration(sleep) / time.Duration(w+1))
						start, made := time.Now(), false
						err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
							made = true
							mu.Lock()
							sent = append(sent, send{time.Now(), weights[i]})
							mu.Unlock()
							return forage.Outcome{Status: 200}
						}, budget.CallOption{Weight: weights[i]})
						if took := time.Since(start); took > cfg.MaxWait {
							rt.Errorf("worker %d call %d blocked %v, MaxWait %v", w, i, took, cfg.MaxWait)
						}
						if err == nil {
							continue
						}
						e := quotaStop(rt, err)
						if made || !e.Until.After(start) {
							rt.Errorf("worker %d call %d: quota stop with a request made (%v) or Until +%v", w, i, made, e.Until.Sub(start))
						}
					}
				})
			}
			wg.Wait()
			slices.SortFunc(sent, func(a, b send) int { return a.at.Compare(b.at) })
			for i := range sent {
				n := 0
				for j := i; j < len(sent) && sent[j].at.Sub(sent[i].at) < per; j++ {
					n += sent[j].w
				}
				if n > count {
					rt.Fatalf("the window of %v from attempt %d carries %d units, limit %d", per, i, n, count)
				}
			}
		})
	})
}

// TestQuotaBoundsThePacer: with a known limit of 30 per hour the pacer runs
// at one request every 2 minutes; that wait is the quota's too, and past
// MaxWait it stops the call at once, for the local pacer and for one the
// host supplies. The local pacer takes the limit's burst (3), which the host
// declared the provider admits back to back; the host's, its own (1).
func TestQuotaBoundsThePacer(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"local", "host"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				cfg := hourly()
				cfg.Limits = []budget.Limit{{Count: 30, Per: time.Hour}} // burst 3
				if name == "host" {
					cfg.Pacer = must(gcra.New(gcra.Config{}))
				}
				p := newLocal(t, cfg)
				start := time.Now()
				free, next := 3, (3600 * time.Second / 28 * 101 / 100).Round(time.Millisecond) // the limit's burst, then its slot: 1h/(30−3+1) and 1%
				if name == "host" {
					free, next = 1, 2*time.Minute // the host's pacer: one at a time, at 30 per hour
				}
				for range free {
					if err := p.Do(t.Context(), nil, status(200, 0)); err != nil {
						t.Fatal(err)
					}
				}
				e := quotaStop(t, p.Do(t.Context(), nil, status(200, 0)))
				if time.Since(start) != 0 || e.Until.Sub(start).Round(time.Millisecond) != next {
					t.Fatalf("stopped after %v with Until +%v, want at once with +%v", time.Since(start), e.Until.Sub(start), next)
				}
				time.Sleep(time.Until(e.Until))
				if err := p.Do(t.Context(), nil, status(200, 0)); err != nil || time.Since(e.Until) != 0 {
					t.Fatalf("at Until: Do = %v after %v, want nil at once", err, time.Since(e.Until))
				}
			})
		})
	}
}

// must returns v, panicking on err (setup).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
