package aimd_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/aimd"
)

// TestPropertyAnAllowanceFarAwayIsNeverBanned: a provider of 4-60
// requests a second with an allowance of 2-25, 10-60 ms away (and up to a
// third more), that answers 429 with Retry-After and bans after 5 refused
// requests a minute, is never triggered in a minute, however many
// requests are in flight. The allowance hides the limit from slow start;
// what ends slow start is the allowance running out, and every request
// then in flight over the limit is refused. Doubling every 250 ms, slow
// start was at several times the limit by then: 47/s with an allowance of
// 24, 34 ms away, was left at 198/s with seven requests refused in flight,
// a ban. Its pace is now fitted to the round trip (see exitAccel), the
// echoes of its end lower the rate by what they show (see echoCut), and
// the fourth refused request of the minute holds the rate at what the
// provider surely admits.
func TestPropertyAnAllowanceFarAwayIsNeverBanned(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(4, 60).Draw(t, "limit")
		burst := rapid.IntRange(2, 25).Draw(t, "burst")
		latency := time.Duration(rapid.IntRange(10, 60).Draw(t, "latency_ms")) * time.Millisecond
		if r := minuteFarAway(t, limit, burst, latency, answerBan); r.bans > 0 {
			t.Fatalf("banned: %d refused in a minute at most (%s)", r.perMinute, r)
		}
	})
}

// TestPropertyABareRefusalFarAwayIsNeverBanned: a provider of 2-15
// requests a second with an allowance of 1-6, 10-80 ms away, that refuses
// with a bare 429 (no pause asked) and bans after 5 refused requests a
// minute, is never triggered in a minute. With no pause between them, the
// refusals of slow start's end and the descent after it come one request
// after another: the fourth refused request of the minute holds the rate
// whether a pause was asked or not; a fourth that cuts under the rate slow
// start began at, with next to nothing admitted since the first, holds it
// at 1/s; and the hold keeps the climb under what the provider admitted
// since the first even when the cut went under it. (Before: 2/s with an
// allowance of 3, 10 ms away, was held at 2.6/s; 4.95/s with 4, 20 ms
// away, climbed back over its limit: 122 of 2,268 such providers of
// 2-6/s, 10-40 ms away, were banned.) With allowances of 5-8 the fourth
// comes over 4/s; when the provider admitted a request among the four,
// the rate holds at half that trickle (349 of 2,268 on that grid drew the
// fifth before, 15 since). Known limit: allowances of 7 and more, with
// none admitted among the four, where a fixed window that refuses every
// request to its end looks the same, and holding at 1/s, or lowering the
// ceiling, costs a window most of a minute (44 a second: 83% -> 6% over
// 30 s).
func TestPropertyABareRefusalFarAwayIsNeverBanned(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(2, 15).Draw(t, "limit")
		burst := rapid.IntRange(1, 6).Draw(t, "burst")
		latency := time.Duration(rapid.IntRange(10, 80).Draw(t, "latency_ms")) * time.Millisecond
		if r := minuteFarAway(t, limit, burst, latency, answerBareBan); r.bans > 0 {
			t.Fatalf("banned: %d refused in a minute at most (%s)", r.perMinute, r)
		}
	})
}

// TestABareRefusalHoldsUnderWhatWasAdmitted: the fourth refusal in a
// minute, none paused for (a bare 429), holds the climb under what the
// provider admitted since the first, also when the cut went under that:
// left to climb back towards the ceiling, each of these drew the fifth
// refused request, and the ban. (In real time, one worker 60 ms from 4.1/s
// with an allowance of 4 went from 2.5/s back to 4.24/s.)
func TestABareRefusalHoldsUnderWhatWasAdmitted(t *testing.T) {
	t.Parallel()
	for _, p := range []struct {
		limit   float64
		burst   int
		latency time.Duration
	}{
		{4.952, 4, 20 * time.Millisecond},
		{2.81, 4, 50 * time.Millisecond},
		{2.24, 5, 80 * time.Millisecond},
		{8.727, 8, 10 * time.Millisecond},
		// Faster than slow start began, with a request or two admitted
		// between the refusals: held at the cut's rate, over the limit
		// (see trickle).
		{4, 6, 20 * time.Millisecond},
		{5, 7, 15 * time.Millisecond},
		{3.75, 8, 20 * time.Millisecond},
		{6, 8, 15 * time.Millisecond},
	} {
		if r := minuteFarAway(t, p.limit, p.burst, p.latency, answerBareBan); r.bans > 0 {
			t.Errorf("%.3g/s with an allowance of %d, %v away: banned, %d refused in a minute at most (%s)", p.limit, p.burst, p.latency, r.perMinute, r)
		}
	}
}

// minuteFarAway runs a zero-Config controller for a minute, open loop,
// against a GCRA provider of limit/s with burst answering a, latency away
// and up to a third more.
func minuteFarAway(t interface{ Fatal(...any) }, limit float64, burst int, latency time.Duration, a answer) simResult {
	c, err := aimd.New(aimd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return simulate(c, gcra(limit, burst, a)(), time.Minute, latency, latency/3)
}

// TestABareRefusalsHoldRestsOnTheFit: the ban guard's hold at the fourth
// refused request of a minute, none paused for (a bare 429), rests on the
// bucket fit when the fit shows more than the refusals' trickle: each of
// these providers (an allowance that hides the limit from slow start,
// 5-60 ms away) refuses slow start's end and the descent after it a few
// requests apart, so what it admitted between refusals measures next to
// nothing, and the hold at half the refused rate held it at 49-67% of its
// limit for the minute (in real time, 35.9/s with an allowance of 12,
// 18 ms from three ohlcv streams: 50-63% over 30 s). Every token bucket
// that answered every request of the run as the provider did, slow
// start's included, admits the bottom of the fit's band: the hold goes
// just under it, and the climb stays there until the refusals age out.
// Banning at five, none is banned.
func TestABareRefusalsHoldRestsOnTheFit(t *testing.T) {
	t.Parallel()
	for _, p := range []struct {
		limit   float64
		burst   int
		latency time.Duration
	}{
		{35.9, 20, 18 * time.Millisecond},
		{30, 20, 30 * time.Millisecond},
		{15, 16, 60 * time.Millisecond},
		{60, 25, 10 * time.Millisecond},
		{25.5, 16, 30 * time.Millisecond},
		{4, 2, 5 * time.Millisecond},
	} {
		r := minuteFarAway(t, p.limit, p.burst, p.latency, answerBare429)
		if r.goodput < 0.75 || r.perMinute > 4 {
			t.Errorf("%.3g/s with an allowance of %d, %v away: goodput %.1f%%, %d refused in a minute; want >= 75%%, <= 4 (%s)",
				p.limit, p.burst, p.latency, 100*r.goodput, r.perMinute, r)
		}
		if r := minuteFarAway(t, p.limit, p.burst, p.latency, answerBareBan); r.bans > 0 {
			t.Errorf("%.3g/s with an allowance of %d, %v away, banning at five: banned (%s)", p.limit, p.burst, p.latency, r)
		}
	}
}
