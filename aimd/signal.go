package aimd

import (
	"math"
	"time"

	"github.com/forage-go/forage"
)

// Signal is what the controller learns from one response. Only Class is
// required; every other field is optional and zero means "not known".
// Signal is a value; it is safe for concurrent use.
//
// The Quota (IETF RateLimit-*, X-RateLimit-*, X-MBX-USED-WEIGHT-1M
// and the like) counts when what is left of it is known
// ([forage.Quota.Left]): Remaining, or Limit and Used. The controller reads
// it conservatively, because the same headers mean different things for a
// fixed window (Reset is the end of the window) and a token bucket (Reset
// is the time to refill the whole burst):
//
//   - Nothing left with Reset > 0 on a refusal: the quota is spent; pause
//     until now + Reset. So does a refusal whose Quota gives a Reset and
//     nothing of what is left: the refusal says it is spent. Not "Limit 1,
//     0 left, Reset 1" from a provider whose answers saying so came
//     faster than that: a token bucket that allows no burst says it after
//     every request, its Reset one interval rounded up to a second; the
//     refusal's cut spaces the requests that follow, as for a bare one.
//
// A Quota with neither Remaining nor Limit and Used counts only so (a
// Reset alone on a refusal), and not otherwise.
//   - Limit and Window both set: a windowed quota. Limit/Window becomes a
//     ceiling the rate never exceeds from then on (or what is left over
//     what is left of the window, when that is more: a window entered
//     late is spent by its reset, not left to lapse), and on a Success the rate
//     is set to what is left over Reset (less half a second when Reset is in
//     whole seconds, as providers round it up), which spends the rest of
//     the window evenly. A Permanent response's Quota sets neither.
//   - Without Window, the controller watches whether the provider keeps to
//     its word: a provider that admits more than it said was left before
//     its reset is a token bucket, whose Remaining/Reset is no rate (far
//     below the refill rate when the bucket is low) and whose "0 left"
//     after every request sent at its rate is no pause; the rate holds at
//     it instead. Until it shows itself a bucket, a Quota with a Reset of 2s
//     or more paces like a window, and a response the limit let through (a
//     Success, or a Transient or Permanent failure behind it) saying the
//     quota is spent pauses until Reset when that is over a second.
type Signal struct {
	// Class classifies the response (see [forage.Class]): a Success is
	// evidence that the current rate is sustainable, so the rate may grow;
	// Throttled (429, or 418 as some providers use for a ban) and
	// Overloaded (503: the provider sheds load) are pressure, and the rate
	// decreases once per overshoot; a Transient failure (other 5xx, 408, a
	// timeout, a reset) says little about the rate, which holds (only its
	// latency can count as pressure); a Permanent one (a broken request,
	// not a rate problem) and a Canceled one never move the rate.
	Class forage.Class

	// Latency is the time from sending the request to receiving the
	// response. It feeds the latency signal (see [Config.LatencyTarget]) and,
	// when Sent is zero, dates the request as now - Latency.
	Latency time.Duration

	// RetryAfter is the provider's Retry-After: the controller pauses until
	// now + RetryAfter (see [Snapshot].PausedUntil). Zero or negative means
	// none.
	RetryAfter time.Duration

	// Sent is when the request was sent. It lets the controller tell a new
	// overshoot from the echo of one it already reacted to: a refusal for a
	// request sent before the last decrease does not decrease again. Zero
	// means unknown: now - Latency is used, or [Config.CoolOff] when Latency
	// is zero too.
	Sent time.Time

	// Quota is the provider's rate-limit headers, parsed by the caller
	// (e.g. with [forage.ParseQuota]). The zero Quota means none. The
	// controller reads it as the type [Signal] documents.
	Quota forage.Quota
}

// hint is the controller's reading of a Signal's Quota: zero fields are
// unknown, and the zero hint means none.
type hint struct {
	// limit is the quota per window, in requests (or the provider's weight
	// units, if the caller paces weights).
	limit float64
	// left is what is left of the quota now; 0 with reset > 0 means spent.
	left float64
	// reset is the time until the quota resets.
	reset time.Duration
	// window is the length of the quota window, when the provider tells it.
	window time.Duration
}

// hintOf reads q: nothing unless what is left of it is known (usage
// without a limit gives nothing to pace by). A count that is not a finite
// number (a host's own Outcome may carry a NaN parsed from a body) is not
// known: what is left, then only the limit and window stand; the limit,
// then no limit. What is left under 0 is 0 (over the quota: spent). (A NaN
// limit once made the ceiling NaN, and the rate fell to its least for
// good.)
func hintOf(q forage.Quota) hint {
	left, ok := q.Left()
	if !ok {
		return hint{}
	}
	var h hint
	if q.Limit >= 0 && finite(q.Limit) {
		h.limit, h.window = q.Limit, max(q.Window, 0)
	}
	if finite(left) {
		h.left, h.reset = max(left, 0), max(q.Reset, 0)
	}
	return h
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// exhausted reports whether h says the quota is spent until reset.
func (h hint) exhausted() bool {
	return h.left <= 0 && h.reset > 0
}

// ceiling returns limit/window in requests per second, or 0 without both.
func (h hint) ceiling() float64 {
	if h.limit <= 0 || h.window <= 0 {
		return 0
	}
	return h.limit / h.window.Seconds()
}
