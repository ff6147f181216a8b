package aimd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// gcraShape is a GCRA provider's rate and burst.
type gcraShape struct {
	rate  float64
	burst int
}

// eachProvider runs, in a subtest per provider, a controller with the
// default Config against it (answering with answer) for dur, with one
// request in flight and 5ms of latency, and hands check the result.
func eachProvider(t *testing.T, providers []gcraShape, answer answer, dur time.Duration, check func(t *testing.T, p gcraShape, r simResult)) {
	for _, p := range providers {
		t.Run(fmt.Sprintf("%.0f/s burst %d", p.rate, p.burst), func(t *testing.T) {
			c, err := aimd.New(aimd.Config{})
			if err != nil {
				t.Fatal(err)
			}
			check(t, p, simulate(c, gcra(p.rate, p.burst, answer)(), dur, 5*time.Millisecond, 0))
		})
	}
}

// burstProviders are providers with a burst allowance: small and large
// next to their rate, fast and slow. A pause of a second refills the
// allowance of the first ones in part and idles the rest of the pause; it
// refills that of the last ones (40/s burst 40, 100/s burst 30 and the
// like) no further than their rate over the pause, so they deliver exactly
// their limit from refusal to refusal.
var burstProviders = []gcraShape{{30, 20}, {50, 10}, {50, 20}, {100, 10}, {10, 3}, {20, 5}, {40, 40}, {80, 20}, {100, 30}}

// TestBurstAllowanceLearnedFromPauses: a provider with a burst allowance
// that answers 429 with a whole-second Retry-After refills the allowance
// in every pause, so each episode after one delivers the allowance on top
// of the limit and, alone, overstates it. Episodes held at one rate tell
// the two apart (two of different lengths, or the rate delivered from
// refusal to refusal): within 30 s the controller settles at 90-100% of
// the limit with at most 4 refusals (each is a second of the whole
// provider), or, where the bucket fit names the limit, within a per cent
// over it (the fit's band is a grid step or two wide, and the ceiling goes
// to its middle). Before, it took up to 14 refusals and settled above the
// limit; and a provider whose pause refills its allowance as far as its
// rate over the pause (40/s burst 40) drew a refusal every 1.5 s all run
// long.
func TestBurstAllowanceLearnedFromPauses(t *testing.T) {
	eachProvider(t, burstProviders, answer429, 30*time.Second, func(t *testing.T, p gcraShape, r simResult) {
		t.Logf("goodput %.1f%%, %d refused, final rate %.1f", 100*r.goodput, r.refused, r.finalRate)
		if r.refused > 4 || r.finalRate < 0.9*p.rate || r.finalRate > 1.01*p.rate {
			t.Errorf("%d refused in 30 s, final rate %.1f; want at most 4, in [%.1f, %.1f]",
				r.refused, r.finalRate, 0.9*p.rate, 1.01*p.rate)
		}
	})
}

// TestBurstAllowanceLearnedWithRequestsInFlight: the same providers at 60ms
// of latency (jittered by 30ms), where several requests are in flight at
// each refusal, draw at most 5 refusals in 30 s, get 75% of the limit or
// more, and end at 85% of it or more. The episode and two-point estimates
// cannot count requests still on their way; the bucket fit judges a
// refusal once every request sent before it is answered. Before it, 20/s
// burst 5 reached 82% here, and 50/s burst 20, 80/s burst 20 and 100/s
// burst 30 74-77%. Slow start doubling every 250 ms then got 85-94%, but
// its end drew 7 to 22 refusals: the allowance ran out with the rate far
// over the limit and that many requests in flight, a ban from a provider
// that bans at five. Paced for the round trip (see exitAccel), it draws 2
// to 5 and climbs for longer: 76-94%.
func TestBurstAllowanceLearnedWithRequestsInFlight(t *testing.T) {
	for _, p := range burstProviders {
		t.Run(fmt.Sprintf("%.0f/s burst %d", p.rate, p.burst), func(t *testing.T) {
			c, err := aimd.New(aimd.Config{})
			if err != nil {
				t.Fatal(err)
			}
			r := simulate(c, gcra(p.rate, p.burst, answer429)(), 30*time.Second, 60*time.Millisecond, 30*time.Millisecond)
			t.Logf("goodput %.1f%%, %d refused, final rate %.1f", 100*r.goodput, r.refused, r.finalRate)
			if r.refused > 5 || r.goodput < 0.75 || r.finalRate < 0.85*p.rate {
				t.Errorf("%d refused, goodput %.1f%%, final rate %.1f; want <= 5, >= 75%%, >= %.1f", r.refused, 100*r.goodput, r.finalRate, 0.85*p.rate)
			}
		})
	}
}

// TestBurstAllowanceNeverBanned: the same providers, banning after 5
// refusals within a minute (Binance's policy, as providertest models it),
// with one request in flight, are never triggered in five minutes. Before,
// five of them were, within 10 s: the episodes after each pause looked
// like a provider that served the whole rate sent, and each cut was a few
// per cent.
func TestBurstAllowanceNeverBanned(t *testing.T) {
	eachProvider(t, burstProviders, answerBan, 5*time.Minute, func(t *testing.T, _ gcraShape, r simResult) {
		if r.bans > 0 || r.goodput < 0.9 {
			t.Errorf("%d bans, goodput %.1f%%, %d refused; want none, >= 90%%", r.bans, 100*r.goodput, r.refused)
		}
	})
}

// slowProviders allow a few requests a second, with an allowance of a few
// seconds' worth or more (an API's free tier; Shopify's 2/s with a bucket
// of 40): a pause of a second refills only a request or two of it.
var slowProviders = []gcraShape{{1, 5}, {1, 10}, {1, 20}, {1, 40}, {2, 40}, {3, 3}, {5, 3}, {8, 4}}

// TestSlowProvidersNeverBanned: a slow provider's allowance hides its
// limit from the climb, which meets the first refusal at many times the
// limit; each episode after a second's pause then admits the request or
// two the pause refilled and is refused, a refusal a second. Banning
// after 5 refusals within a minute, such a provider is never triggered in
// five minutes: a second short episode in a row drops the rate to what
// the pause refilled, and a fourth refusal within the minute to what the
// provider surely admits. Before, 1/s, 2/s and 3/s were banned within
// 10 s here, the rate cut by 10-20% a refusal (all five, with several
// workers, through the budget package). And 1/s with an allowance of 10,
// 20 or 40 was banned within 20 s: each pause admitted one request, which
// gave the fourth refusal no floor to drop to, so the cuts halved the
// rate from 30/s or more until the fifth; and when one did, the ceiling
// stayed over the limit. Now a run of single successes after pauses drops
// the rate to what the pauses refilled, and the fourth refusal sets the
// ceiling there too.
func TestSlowProvidersNeverBanned(t *testing.T) {
	eachProvider(t, slowProviders, answerBan, 5*time.Minute, func(t *testing.T, _ gcraShape, r simResult) {
		t.Logf("goodput %.1f%%, %d refused, %d bans", 100*r.goodput, r.refused, r.bans)
		if r.bans > 0 || r.goodput < 0.7 {
			t.Errorf("%d bans, goodput %.1f%%, %d refused; want none, >= 70%%", r.bans, 100*r.goodput, r.refused)
		}
	})
}

// TestProbeRefusedJustOverTheCeilingKeepsIt: once the limit is found, the
// rate climbs back to the ceiling after each refusal, holds there, and
// probes above it; a probe refused within a few per cent over the ceiling
// shows the ceiling was right (it held all through the plateau), so it
// stays, and over five minutes the provider is served within a few per
// cent of its limit. Before, each such refusal put the ceiling 5% under
// the rate the probe reached, a few per cent under the limit: a final rate
// of 0.95-0.96 of the limit (now 0.98-1.0), 93.5-94.6% served (now
// 93.9-96.5%).
func TestProbeRefusedJustOverTheCeilingKeepsIt(t *testing.T) {
	for _, p := range []gcraShape{{10, 1}, {17, 2}, {100, 2}} {
		t.Run(fmt.Sprintf("%.0f/s burst %d", p.rate, p.burst), func(t *testing.T) {
			c, err := aimd.New(aimd.Config{})
			if err != nil {
				t.Fatal(err)
			}
			r := simulate(c, gcra(p.rate, p.burst, answer429)(), 5*time.Minute, 5*time.Millisecond, 0)
			if r.goodput < 0.935 || r.finalRate < 0.97*p.rate {
				t.Errorf("goodput %.1f%%, final rate %.3g of the limit, %d refused; want >= 93.5%%, >= 0.97", 100*r.goodput, r.finalRate/p.rate, r.refused)
			}
		})
	}
}

// TestRefusalOnAHeldPlateauKeepsTheCeiling: a provider that allows no
// burst refuses one conforming request a minute (arrival jitter's tail, a
// hiccup of its own). Each comes while the rate holds at the learned
// ceiling, which it has done for many seconds, so the ceiling is not over
// the limit (that is refused within moments): it stays, and over four
// minutes the provider is served at 91-93% with a final rate within 5% of
// its limit. Before, each such refusal set the ceiling 5% lower, for good:
// 86-88%, a final rate of 0.86-0.88 of the limit.
func TestRefusalOnAHeldPlateauKeepsTheCeiling(t *testing.T) {
	for _, rate := range []float64{10, 17, 50, 100} {
		t.Run(fmt.Sprintf("%.0f/s", rate), func(t *testing.T) {
			c, err := aimd.New(aimd.Config{})
			if err != nil {
				t.Fatal(err)
			}
			srv := spurious(gcra(rate, 1, answer429), time.Minute, 2*time.Minute, 3*time.Minute)()
			r := simulate(c, srv, 4*time.Minute, 5*time.Millisecond, 0)
			if r.goodput < 0.9 || r.finalRate < 0.95*rate {
				t.Errorf("goodput %.1f%%, final rate %.3g of the limit, %d refused; want >= 90%%, >= 0.95", 100*r.goodput, r.finalRate/rate, r.refused)
			}
		})
	}
}

// TestSparseJitterDoesNotCollapseTheRate: a provider that allows no burst
// refuses two conforming requests, seconds apart, after the limit is found
// (arrival jitter on a busy machine: real runs over loopback saw them at
// 93-98% of a 17/s limit). Each comes at the end of a steady episode of
// seconds, which a burst allowance the pause refilled could not have
// lasted through, so the first is a small cut under the kept ceiling
// rather than a burst estimate; the second, the fourth refusal in a
// minute, drops the rate to the best rate an episode in the minute surely
// delivered, not to the last short episode's. The rate at the end stays
// at 0.7 of the limit or more: before, one case in three ended under
// 0.75, the worst at 0.66 (and a real 30 s run at 55-60% of the limit).
func TestSparseJitterDoesNotCollapseTheRate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := float64(rapid.IntRange(8, 60).Draw(t, "limit"))
		first := time.Duration(rapid.IntRange(15000, 25000).Draw(t, "first_ms")) * time.Millisecond
		gap := time.Duration(rapid.IntRange(4500, 10000).Draw(t, "gap_ms")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		r := simulate(c, spurious(gcra(limit, 1, answer429), first, first+gap)(), 50*time.Second, 5*time.Millisecond, 0)
		if r.finalRate < 0.7*limit || r.bans > 0 {
			t.Fatalf("final rate %.3g of the limit, %d bans (%v); want >= 0.7, none", r.finalRate/limit, r.bans, r)
		}
	})
}

// TestHalvingAfterASteadyEpisode: a limit that halves while the rate has
// held steady for seconds is first refused at the end of a long episode,
// which reads as arrival jitter (a small cut, the ceiling kept: see
// TestSparseJitterDoesNotCollapseTheRate). The next refusal, within a
// request or two of the pause, shows it was not: the cut is deep at once,
// and the halving costs five refusals in all, not six.
func TestHalvingAfterASteadyEpisode(t *testing.T) {
	halvedWithin(t, []float64{17, 20, 40, 60}, 15*time.Second, 30*time.Second, 5)
}

// halvedWithin runs a controller for dur against each burst-1 provider of
// rates whose limit halves at at, and wants at most refused refusals and
// a final rate within 15% of the halved limit.
func halvedWithin(t *testing.T, rates []float64, at, dur time.Duration, refused int) {
	t.Helper()
	for _, rate := range rates {
		t.Run(fmt.Sprintf("%.0f/s", rate), func(t *testing.T) {
			c := mustNew(t, aimd.Config{})
			r := simulate(c, halving(rate, 1, answer429, at)(), dur, 5*time.Millisecond, 2500*time.Microsecond)
			if r.refused > refused || r.finalRate < 0.85*rate/2 {
				t.Errorf("%d refused, final rate %.3g of the halved limit; want <= %d, >= 0.85", r.refused, 2*r.finalRate/rate, refused)
			}
		})
	}
}

// TestFallingLimitWithAnAllowanceNotBanned: a provider with a burst
// allowance that bans after 5 refusals a minute, whose limit halves or
// drops to a tenth after the controller has held it for seconds. Each
// pause refills the allowance, so a short episode after it delivers about
// the old rate: the best rate of the minute does not stand for such an
// episode's floor (only one of more than 1.5 s that delivered what it was
// sent at), and the fourth refusal in the minute puts the ceiling at most
// half what a falling episode delivered, or half the refused rate after a
// brief one (its own floor after two brief ones in a row). Before, each of
// these was banned within seconds of the fall. (Limits that fall to a
// tenth with a small allowance still ban, as they did: the known limits.)
func TestFallingLimitWithAnAllowanceNotBanned(t *testing.T) {
	for _, p := range []struct {
		rate, factor float64
		burst        int
		at           time.Duration
	}{
		{20, 0.5, 3, 10 * time.Second}, {20, 0.5, 3, 30 * time.Second}, {30, 0.5, 3, 45 * time.Second},
		{120, 0.5, 3, 10 * time.Second}, {120, 0.5, 10, 30 * time.Second}, {200, 0.5, 10, 20 * time.Second},
		{10, 0.1, 10, 60 * time.Second}, {50, 0.1, 10, 90 * time.Second}, {5, 0.5, 40, 45 * time.Second},
	} {
		t.Run(fmt.Sprintf("%.0f/s burst %d x%.1f at %v", p.rate, p.burst, p.factor, p.at), func(t *testing.T) {
			c := mustNew(t, aimd.Config{})
			srv := falling(p.rate, p.burst, answerBan, p.factor, p.at)()
			if r := simulate(c, srv, 3*time.Minute, 5*time.Millisecond, 2500*time.Microsecond); r.bans > 0 {
				t.Errorf("%d bans (%v); want none", r.bans, r)
			}
		})
	}
}

// TestHalvedAfterALongHoldLeftInTwoRefusals: a limit that allows no burst
// and halves after the controller held it for many seconds. The first
// refusal ends a long steady episode and may be arrival jitter, so it cuts
// a step; a second refusal on the second request after its pause shows
// the limit fell, and cuts deep. It took a third refusal (a Decrease step
// first), each a second of Retry-After: a real 20/s provider halving to
// 10/s mid-run was refused on the first request after each of two pauses.
func TestHalvedAfterALongHoldLeftInTwoRefusals(t *testing.T) {
	// Two to find the limit, at most one of jitter, two to leave it.
	halvedWithin(t, []float64{10, 17, 20, 40, 60, 100}, 25*time.Second, 40*time.Second, 5)
}

// TestNoFitUnderAProvenFloor: a floor (n-1 successes in the T seconds
// from a refusal to the next, pause included) proves the limit is at least
// that. Two episodes after pauses whose counts happen to agree with a lower
// floor must not fit the limit there, with a burst allowance to make up the
// rest: a real 15/s provider that allows no burst, refused by arrival
// jitter a second or so after each pause, was fitted at 5.9/s with an
// allowance of 7, its ceiling confirmed, and eight processes sharing it
// then split it by rate rather than take turns, and were banned. Here: 31
// successes in the 2.1 s after a refusal (14.3/s at least), then 27 in 3.5
// s after the next (a 2 s pause): fitted at 7.4/s with an allowance of 16.
func TestNoFitUnderAProvenFloor(t *testing.T) {
	c := mustNew(t, aimd.Config{Initial: 20})
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success})
	now = now.Add(10 * ms)
	c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Sent: now.Add(-5 * ms), RetryAfter: 100 * ms})
	episode := func(start time.Time, n int, d time.Duration) time.Time {
		step := d / time.Duration(n)
		for range n {
			start = start.Add(step)
			c.ObserveAt(start.Add(5*ms), aimd.Signal{Class: forage.Success, Sent: start})
		}
		return start
	}
	refuse := func(sent time.Time, pause time.Duration) {
		c.ObserveAt(sent.Add(5*ms), aimd.Signal{Class: forage.Throttled, Sent: sent, RetryAfter: pause})
	}
	now = episode(now.Add(100*ms), 31, 2*time.Second).Add(10 * ms)
	refuse(now, 2*time.Second)
	now = episode(now.Add(5*ms+2*time.Second), 27, 1500*ms).Add(10 * ms)
	refuse(now, time.Second)
	if s := c.Snapshot(); s.Ceiling < 14 || s.Allowance > 0 {
		t.Errorf("after an episode that proved 14.3/s: ceiling %.3g, allowance %.3g; want >= 14, none fitted", s.Ceiling, s.Allowance)
	}
}

// TestPropertySlowProvidersWithAnAllowanceNeverBanned: a provider of
// 1-3 requests a second with an allowance of 1-12, a few milliseconds
// away, that bans after 5 refusals a minute, is never triggered in two
// minutes. Slow start spends the allowance; each pause then refills about
// one request, so the episodes after it each admit one and are refused at
// the next: a run of them drops the rate to what the pauses refill
// (spreadCut under it when slow start met a small allowance: the refills
// say the limit within a token, not surely under it), and the fourth
// refusal of the minute sets the ceiling at what the provider surely
// admits. Before, 0.5/s with an allowance of 3, 5 or 9 and 0.7/s with 4
// were banned within 9-14 s (the cuts halved the rate from 15/s each
// time, no floor to drop to), and 1/s with 9 after 44 s (a ceiling over
// the limit drained the allowance into a fifth refusal): of 192 such
// providers of 0.3-3/s, 76 were banned, now 15, all under 1/s (the
// package's known limits).
func TestPropertySlowProvidersWithAnAllowanceNeverBanned(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(1, 3).Draw(t, "limit")
		burst := rapid.IntRange(1, 12).Draw(t, "burst")
		latency := time.Duration(rapid.IntRange(2, 10).Draw(t, "latency_ms")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if r := simulate(c, gcra(limit, burst, answerBan)(), 2*time.Minute, latency, latency/2); r.bans > 0 {
			t.Fatalf("banned (%v)", r)
		}
	})
}

// TestSlowProvidersUnderOnePerSecondWithAFewTokens: the slow providers of
// the known limits' edge that the fourth refusal's margin saves: 0.5/s with
// an allowance of 2 (an episode of two successes showed 0.53/s, over its
// limit) and 0.7/s with 4 (its pauses' refills showed 0.77/s), a few
// milliseconds away, are not banned in two minutes.
func TestSlowProvidersUnderOnePerSecondWithAFewTokens(t *testing.T) {
	for _, p := range []gcraShape{{0.5, 3}, {0.5, 5}, {0.7, 4}, {1, 9}} {
		t.Run(fmt.Sprintf("%.1f/s burst %d", p.rate, p.burst), func(t *testing.T) {
			c := mustNew(t, aimd.Config{})
			if r := simulate(c, gcra(p.rate, p.burst, answerBan)(), 2*time.Minute, 4*time.Millisecond, 2*time.Millisecond); r.bans > 0 {
				t.Fatalf("banned (%v)", r)
			}
		})
	}
}

// TestAFastProvidersFourthRefusalIsNoSlowLimit: a 200/s provider that
// allows no burst, refused by arrival jitter at 5, 11 and 17 s and then on
// the third request after the last pause (two went through): the fourth
// refusal of the minute. Slow start was admitted hundreds of requests, so
// the episode's floor (two requests in about a second, pause included) is
// no slow limit to sit a token under: the rate stays over a fifth of the
// limit. Before, it went to 0.8-2.5/s for the rest of the minute (a real
// 30 s crawl: 5% of the limit).
func TestAFastProvidersFourthRefusalIsNoSlowLimit(t *testing.T) {
	for _, at := range []time.Duration{18020 * time.Millisecond, 18028 * time.Millisecond, 18036 * time.Millisecond} {
		c := mustNew(t, aimd.Config{})
		srv := spurious(gcra(200, 1, answer429), 5*time.Second, 11*time.Second, 17*time.Second, at)()
		if r := simulate(c, srv, 40*time.Second, 3*time.Millisecond, time.Millisecond); r.finalRate < 40 {
			t.Errorf("fourth refusal at %v: final rate %.3g (%v); want >= 40", at, r.finalRate, r)
		}
	}
}

// TestPropertyBanNeverTriggeredUnderArrivalJitter: a provider that allows
// no burst, answers 429 with a second's Retry-After and bans at five
// refusals in a minute, with each request held up on its way by up to
// 15-30% of the interval at random (a busy machine's network stack, a
// path across the internet), and several requests in flight: the fourth
// refusal of a minute holds the rate twice the arrival jitter the
// latencies show under the ceiling's interval until the refusals age out,
// so jitter does not draw the fifth. (It cut to 0.9 of the refused rate,
// still within the jitter of the limit: 8/s with 25 ms at random, four
// workers, was banned in 4 runs of 24, and 30 ms in 6.)
func TestPropertyBanNeverTriggeredUnderArrivalJitter(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(5, 40).Draw(t, "limit")
		late := time.Duration(rapid.Float64Range(0.15, 0.3).Draw(t, "jitter share") * float64(time.Second) / limit)
		latency := time.Duration(rapid.IntRange(1, 40).Draw(t, "latencyMs")) * time.Millisecond
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 3))
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		srv := gcra(limit, 1, answerBan)()
		srv.late = func() time.Duration { return time.Duration(rng.Int64N(int64(late))) }
		if r := simulate(c, srv, 2*time.Minute, latency, 0); r.bans > 0 {
			t.Fatalf("%.1f/s, up to %v late, %v away: banned (%d refused, %d in a minute)", limit, late, latency, r.refused, r.perMinute)
		}
	})
}

// TestPropertyArrivalJitterNeverHalvesTheLimit: a provider that allows no
// burst, answering 429 with a second's Retry-After, each request held up
// on its way by up to 5-15% of the interval at random: arrival jitter
// refuses a request about a second after each pause, so from one refusal
// to the next (the pause included) the provider delivers about half its
// rate. Two such episodes agreed with a bucket at that rate whose pauses
// refill an allowance of its rate over the pause, and the two-point
// estimate took it as measured: the rate, and the ceiling, confirmed, went
// to half the limit (a 9.9/s provider 9.5 ms of jitter held at 4.6/s, a
// 17/s one at 8/s). Slow start refutes such a bucket: from full, a bucket
// admits its whole allowance before it refuses anything, and slow start
// was refused after fewer. The rate now ends at 60% of the limit or more.
// (Up to 12% of the interval: at 13-15%, a millisecond away, the fourth
// refusal of a minute now and then comes two or three requests after a
// pause, too soon to tell from a limit that fell; 7 of 18,200 simulated
// providers were held under 60%, some at a fifth of the limit. See the
// package's known limits.)
func TestPropertyArrivalJitterNeverHalvesTheLimit(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(8, 40).Draw(t, "limit")
		share := rapid.Float64Range(0.05, 0.12).Draw(t, "jitter share")
		latency := time.Duration(rapid.IntRange(1, 10).Draw(t, "latencyMs")) * time.Millisecond
		checkJitterKeepsTheLimit(t, limit, share, latency, rapid.Uint64().Draw(t, "seed"))
	})
}

// TestArrivalJitterNeverHalvesTheLimit is the draw of
// TestPropertyArrivalJitterNeverHalvesTheLimit that found it (1 in about
// 500 before).
func TestArrivalJitterNeverHalvesTheLimit(t *testing.T) {
	checkJitterKeepsTheLimit(t, 9.875, 0.09375, time.Millisecond, 0x2c01)
}

// checkJitterKeepsTheLimit runs a minute against a provider of limit/s
// that allows no burst, each request held up by up to share of its
// interval, latency away, and fails when the rate ends under 60% of the
// limit.
func checkJitterKeepsTheLimit(t interface{ Fatalf(string, ...any) }, limit, share float64, latency time.Duration, seed uint64) {
	late := time.Duration(share * float64(time.Second) / limit)
	rng := rand.New(rand.NewPCG(seed, 3))
	c, err := aimd.New(aimd.Config{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	srv := gcra(limit, 1, answer429)()
	srv.late = func() time.Duration { return time.Duration(rng.Int64N(int64(late))) }
	if r := simulate(c, srv, time.Minute, latency, 0); r.finalRate < 0.6*limit {
		t.Fatalf("%.1f/s, up to %v late, %v away: final rate %.1f (%.0f%% of the limit), goodput %.1f%%; want >= 60%%", limit, late, latency, r.finalRate, 100*r.finalRate/limit, 100*r.goodput)
	}
}

// TestARefusedProbeOfAGuessIsNotProbedAgain: the refill rule's ceiling is a
// guess (a fast provider with an allowance of two refills as much after a
// pause as a slow one with more), which the climb probes once while the
// minute's refusals leave room for one more. A refusal of that probe can
// look like two short episodes again; read as a new guess, the probe went
// on after the refusals aged out, far over a slow limit whose allowance
// had idled full, and drew five refusals within the next minute: 1.09/s
// with an allowance of 3, 5 ms away, was banned after 78 s.
func TestARefusedProbeOfAGuessIsNotProbedAgain(t *testing.T) {
	c, err := aimd.New(aimd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if r := simulate(c, gcra(1.0859375, 3, answerBan)(), 2*time.Minute, 5*time.Millisecond, 2500*time.Microsecond); r.bans > 0 {
		t.Fatalf("banned (%v)", r)
	}
}

// TestAJitterRefusalAfterAPauseIsNotAFall: a fast provider that allows no
// burst, whose requests now and then reach it a few milliseconds late,
// refuses a request or two a minute by arrival jitter, each with a pause.
// When the fourth of a minute comes a few requests after a pause, the
// episode since the refusal before (the pause counted) admitted next to
// nothing, as a limit that fell far would; but the episode before it
// showed a floor no limit that steady could have held to (see unsteady).
// The ban guard holds at half the best floor of the minute, not at this
// one's. Each of these was held at 4-21% of its limit (9/s for 80 s at
// 200/s), as a real 200/s provider was held at 1/s for 40 s.
func TestAJitterRefusalAfterAPauseIsNotAFall(t *testing.T) {
	for _, p := range []struct {
		limit, p float64
		big      time.Duration
		seed     uint64
	}{
		{200, 0.003, 5 * time.Millisecond, 19},
		{200, 0.003, 5 * time.Millisecond, 15},
		{60, 0.004, 13 * time.Millisecond, 8},
		{150, 0.004, 6666 * time.Microsecond, 8},
	} {
		t.Run(fmt.Sprintf("%.0f/s %v late at %.1f%%", p.limit, p.big, 100*p.p), func(t *testing.T) {
			if m := jitterFloor(t, p.limit, p.p, p.big, p.seed); m < 0.25*p.limit {
				t.Errorf("held at %.1f/s (%.0f%% of the limit); want >= 25%%", m, 100*m/p.limit)
			}
		})
	}
}

// TestPropertyJitterAfterAPauseNeverCollapsesTheRate: see
// TestAJitterRefusalAfterAPauseIsNotAFall. Never under a twentieth of the
// limit (121 of 10,000 draws were, before; 6 of 10,000 still fall under a
// fifth, when two short episodes after pauses admit about as many
// requests by chance and agree with a limit that fell: 1 of 30,000 under a
// twentieth).
func TestPropertyJitterAfterAPauseNeverCollapsesTheRate(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(60, 200).Draw(t, "limit")
		p := rapid.Float64Range(0.001, 0.004).Draw(t, "late share")
		big := time.Duration(rapid.Float64Range(0.5, 1).Draw(t, "lateness in intervals") * float64(time.Second) / limit)
		if m := jitterFloor(t, limit, p, big, rapid.Uint64().Draw(t, "seed")); m < 0.05*limit {
			t.Fatalf("held at %.1f/s (%.1f%% of the limit); want >= 5%%", m, 100*m/limit)
		}
	})
}

// jitterFloor runs 40 s against a provider of limit/s that allows no
// burst and refuses with a Retry-After, each request reaching it up to a
// tenth of big late, a share p of them up to big late, and returns the
// lowest rate the controller set after the first 5 s.
func jitterFloor(t interface{ Fatalf(string, ...any) }, limit, p float64, big time.Duration, seed uint64) float64 {
	c, err := aimd.New(aimd.Config{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	srv := gcra(limit, 1, answer429)()
	srv.late = func() time.Duration {
		if rng.Float64() < p {
			return time.Duration(rng.Int64N(int64(big)))
		}
		return time.Duration(rng.Int64N(int64(big / 10)))
	}
	m := &minRate{c: c, from: simEpoch.Add(5 * time.Second), min: math.Inf(1)}
	simulate(m, srv, 40*time.Second, 3*time.Millisecond, 4*time.Millisecond)
	return m.min
}

// minRate passes signals to a Controller and keeps the lowest rate it set
// from from on.
type minRate struct {
	c    *aimd.Controller
	from time.Time
	min  float64
}

func (m *minRate) Snapshot() aimd.Snapshot { return m.c.Snapshot() }
func (m *minRate) ObserveAt(now time.Time, s aimd.Signal) {
	m.c.ObserveAt(now, s)
	if !now.Before(m.from) {
		m.min = min(m.min, m.c.Snapshot().Rate)
	}
}
