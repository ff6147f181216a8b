package aimd_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/aimd"
)

// noisy returns srv failing every every-th request its limit admitted
// from from on.
func noisy(srv func() *simServer, every int, from time.Duration) func() *simServer {
	return func() *simServer {
		s := srv()
		s.faultEvery, s.faultFrom = every, from
		return s
	}
}

// TestNoiseDoesNotLowerWhatAnEpisodeDelivered: a provider that allows no
// burst, refused once by arrival jitter a few seconds after the limit is
// found, and failing a steady share of the requests its limit admitted
// with a 5xx (a gateway behind the rate limiter). The failures counted
// against the limit as much as the successes did, so the episode that
// ended with the jitter's refusal delivered its whole rate, and the rate
// and ceiling after it are those of the same provider without the
// failures. Before, an episode counted its successes only: 10% of
// failures set the ceiling 10% lower, and a 17/s provider was held at
// 12.8/s for the rest of a 30 s run (13.5/s with 5%, 14.2/s without);
// real runs with 5% random 503s held the same provider at 11-14/s.
func TestNoiseDoesNotLowerWhatAnEpisodeDelivered(t *testing.T) {
	for _, limit := range []float64{10, 17, 40, 100} {
		for _, at := range []time.Duration{5 * time.Second, 8 * time.Second, 12 * time.Second} {
			run := func(every int) simResult {
				c := mustNew(t, aimd.Config{})
				return simulate(c, spurious(noisy(gcra(limit, 1, answer429), every, at-2*time.Second), at)(), 30*time.Second, 5*time.Millisecond, 0)
			}
			quiet := run(0)
			for _, every := range []int{20, 10} {
				t.Run(fmt.Sprintf("%.0f/s, jitter at %v, 1 in %d fails", limit, at, every), func(t *testing.T) {
					if r := run(every); r.finalRate < 0.97*quiet.finalRate {
						t.Errorf("final rate %.3g of the limit; %.3g without the failures", r.finalRate/limit, quiet.finalRate/limit)
					}
				})
			}
		}
	}
}

// TestPropertyAHiccupAfterAPauseCostsSeconds: a provider that allows no
// burst refuses the first request after one of its pauses too (a hiccup,
// another client's request, arrival jitter), after the first, second or
// third refusal of the run. 30 s into the run the rate is back at 85% of
// the limit or more, with no ban. Before, the two refusals a second apart
// read as a spent quota (two pauses of a second back to back) and set the
// ceiling to the rate delivered over the cycle: a 17/s provider was held
// at 7.6/s for the rest of the run; with that mended, the cut for it (by
// half, as for refusals that go on) climbed back over a whole Recovery,
// 45% of the limit at first and 85% only 20 s later.
func TestPropertyAHiccupAfterAPauseCostsSeconds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := float64(rapid.IntRange(8, 100).Draw(t, "limit"))
		after := rapid.IntRange(2, 3).Draw(t, "after")
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		srv := gcra(limit, 1, answer429)()
		srv.refuseAgain = after
		r := simulate(c, srv, 30*time.Second, 5*time.Millisecond, 0)
		if r.finalRate < 0.85*limit || r.bans > 0 {
			t.Fatalf("rate %.3g of the limit at 30 s, %d bans (%v)", r.finalRate/limit, r.bans, r)
		}
	})
}

// TestPropertyA503LimitIsNotNoise: a provider that sheds load with 503
// (no Retry-After) once its limit is spent, behind a burst allowance that
// hides the limit from slow start, tens of milliseconds away. The cuts
// after slow start's overshoot meet 503s until they reach the limit: that
// is pressure, not a gateway's noise, and after a minute the rate is at
// most a probe's step over the limit, with few of the last half-minute's
// requests refused. Before, 503s before any success since a cut counted
// as cuts that failed: the provider was found noisy, the cuts undone and
// slow start resumed, and a 7/s provider with an allowance of 24 was sent
// 10/s with 32% refused for good.
func TestPropertyA503LimitIsNotNoise(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(2, 60).Draw(t, "limit")
		burst := rapid.IntRange(1, 40).Draw(t, "burst")
		latency := time.Duration(rapid.IntRange(5, 60).Draw(t, "latency_ms")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		r := simulate(c, gcra(limit, burst, answer503)(), time.Minute, latency, latency/2)
		if r.finalRate > 1.2*limit {
			t.Fatalf("final rate %.3g of the limit (%v)", r.finalRate/limit, r)
		}
	})
}

// TestA503LimitFoundAgainIsNotNoise: the draws of
// TestPropertyA503LimitIsNotNoise that found its rule too narrow. Slow
// start's overshoot of an allowance that hid the limit went to eight times
// the limit; the cuts after it stopped the 503s, and the climb met the
// limit again, short of the 30 successes that prove a cut worked. A 503 at
// the limit then came at an eighth of the rate the first came at, which
// read as a descent that no cut stopped: noise, the cuts undone, and the
// provider was sent 1.3-1.7 times its limit with 27-42% refused for good.
// A 503 sent after the climb took the rate more than halfway back to where
// the last cut began, with successes since it, is the limit met again: the
// descent starts over from there.
func TestA503LimitFoundAgainIsNotNoise(t *testing.T) {
	for _, p := range []struct {
		limit   float64
		burst   int
		latency time.Duration
	}{{10.1640625, 16, 53 * time.Millisecond}, {7.4375, 38, 49 * time.Millisecond}} {
		t.Run(fmt.Sprintf("%.1f/s burst %d, %v", p.limit, p.burst, p.latency), func(t *testing.T) {
			c, err := aimd.New(aimd.Config{})
			if err != nil {
				t.Fatal(err)
			}
			r := simulate(c, gcra(p.limit, p.burst, answer503)(), time.Minute, p.latency, p.latency/2)
			if r.finalRate > 1.2*p.limit || r.refusedShare > 0.05 {
				t.Errorf("final rate %.3g of the limit, %.1f%% refused (%v); want <= 1.2, <= 5%%", r.finalRate/p.limit, 100*r.refusedShare, r)
			}
		})
	}
}

// TestAnOutageOf503sHoldsTheRate: a provider that answers nothing but 503
// (down for maintenance) after serving 17/s for 10 s. The first 503s cut
// the rate, as a shedder's would; once nothing but 503s came back for a
// moment, they no longer cut at each answer: the rate goes down by 30% a
// second to 1/s, and the provider is called often enough for a breaker (in
// budget: nine failures within its 10 s window) to count the failures and
// open. Before, they were read as noise (the cuts that did not stop them),
// which also let a provider shedding load be sent ten times its limit;
// with that mended, they cut the rate to the floor, one request every
// 20 s, and a breaker never saw enough of them to open.
func TestAnOutageOf503sHoldsTheRate(t *testing.T) {
	c := mustNew(t, aimd.Config{})
	r := simulate(c, falling(17, 1, answer503, 1e-9, 10*time.Second)(), 30*time.Second, 5*time.Millisecond, 0)
	if r.finalRate < 1 || r.refused < 25 {
		t.Fatalf("rate %.3g after 20 s of 503s, %d refused; want >= 1, >= 25", r.finalRate, r.refused)
	}
}

// TestALongRetryAfterOnABucket: a token bucket (34.6/s, an allowance of 9)
// that asks for 5 s after every refusal, whatever the true wait. The first
// long refusal reads as a spent window (the rate its cycle delivered, 5/s,
// unconfirmed), and the climb from there is a new episode: over two
// minutes the provider is served at 70% of its limit or more (each refusal
// costs it 5 s). Before, the episode was judged against the rate before
// that refusal (52/s): the climb's refusal at 45/s read as a steady rate
// the provider delivered far less of, and the ceiling went to 14.5/s for
// good: 40%.
func TestALongRetryAfterOnABucket(t *testing.T) {
	c := mustNew(t, aimd.Config{})
	srv := gcra(34.6, 9, answer429)()
	srv.fixedRA = 5 * time.Second
	if r := simulate(c, srv, 2*time.Minute, time.Millisecond, 500*time.Microsecond); r.goodput < 0.7 {
		t.Fatalf("%v: want >= 70%% served", r)
	}
}

// TestAShedderWhoseAllowanceHidItsLimit: providers that shed the excess
// with 503 behind an allowance (7.2/s with 24, 28 ms away; 10/s with 6;
// 4.9/s with 3; 2/s with 13; 5.1/s with 2). Slow start overshoots far over the limit before the
// allowance runs out, and the cuts down to it meet 503s with at most a
// success or two between: none of them is a failed cut, the provider is
// not found noisy, and after a minute the rate is within a fifth of the
// limit. Before,
// the cuts were undone as noise's, slow start resumed, and the provider was
// sent 10/s with a third refused for good.
func TestAShedderWhoseAllowanceHidItsLimit(t *testing.T) {
	for _, p := range []struct {
		limit   float64
		burst   int
		latency time.Duration
	}{{7.23, 24, 28 * time.Millisecond}, {9.99, 6, 5 * time.Millisecond}, {4.875, 3, 38 * time.Millisecond}, {2, 13, 25 * time.Millisecond}, {5.09375, 2, 8 * time.Millisecond}} {
		c := mustNew(t, aimd.Config{})
		if r := simulate(c, gcra(p.limit, p.burst, answer503)(), time.Minute, p.latency, p.latency/2); r.finalRate > 1.2*p.limit {
			t.Errorf("%.4g/s burst %d: final rate %.3g of the limit (%v)", p.limit, p.burst, r.finalRate/p.limit, r)
		}
	}
}
