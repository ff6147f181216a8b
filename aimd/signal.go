package aimd

import (
	"fmt"
	"time"
)

// Kind classifies one response for the controller. The zero Kind is
// [Success]. Kind is a value; it is safe for concurrent use.
type Kind int

const (
	// Success is a response the provider served (2xx, 3xx): evidence that the
	// current rate is sustainable, so the rate may grow.
	Success Kind = iota
	// Throttled is an explicit rate-limit refusal: 429 Too Many Requests, or
	// 418 as some providers use for a ban. Pressure: the rate decreases once
	// per overshoot.
	Throttled
	// Overloaded is 503 Service Unavailable: the provider is shedding load.
	// Pressure, handled like Throttled.
	Overloaded
	// Transient is a failure that says little about the rate: other 5xx, 408,
	// a timeout, a connection reset. The rate holds (never grows on it); only
	// its latency can count as pressure.
	Transient
	// Permanent is a client error (4xx other than 408, 418 and 429): a broken
	// request, not a rate problem. It never moves the rate.
	Permanent
)

// String returns the kind's name, e.g. "throttled".
func (k Kind) String() string {
	switch k {
	case Success:
		return "success"
	case Throttled:
		return "throttled"
	case Overloaded:
		return "overloaded"
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Signal is what the controller learns from one response. Only Kind is
// required; every other field is optional and zero means "not known".
// Signal is a value; it is safe for concurrent use.
type Signal struct {
	// Kind classifies the response.
	Kind Kind

	// Latency is the time from sending the request to receiving the
	// response. It feeds the latency signal (see [Config.LatencyTarget]) and,
	// when Sent is zero, dates the request as now - Latency.
	Latency time.Duration

	// RetryAfter is the provider's Retry-After: the controller pauses until
	// now + RetryAfter (see [Controller.PausedUntil]). Zero or negative means
	// none.
	RetryAfter time.Duration

	// Sent is when the request was sent. It lets the controller tell a new
	// overshoot from the echo of one it already reacted to: a refusal for a
	// request sent before the last decrease does not decrease again. Zero
	// means unknown: now - Latency is used, or [Config.CoolOff] when Latency
	// is zero too.
	Sent time.Time

	// Hint is the provider's rate-limit headers, parsed by the caller. The
	// zero Hint means none.
	Hint Hint
}

// Hint is rate-limit header information (IETF RateLimit-*, X-RateLimit-*,
// X-MBX-USED-WEIGHT-1M and the like) parsed by the caller. The zero Hint
// means no headers. Hint is a value; it is safe for concurrent use.
//
// The controller reads a Hint conservatively, because the same headers mean
// different things for a fixed window (Reset is the end of the window) and a
// token bucket (Reset is the time to refill the whole burst):
//
//   - Remaining == 0 with Reset > 0 on a refusal or a Permanent response:
//     the quota is spent; pause until now + Reset.
//   - Limit and Window both set: a windowed quota. Limit/Window becomes a
//     ceiling the rate never exceeds from then on, and on a Success the rate
//     is set to Remaining over Reset (less half a second when Reset is in
//     whole seconds, as providers round it up), which spends the rest of
//     the window evenly. A Permanent response's Hint sets neither.
//   - Without Window, the controller watches whether the provider keeps to
//     its word: a provider that admits more than it said was left before
//     its reset is a token bucket, whose Remaining/Reset is no rate (far
//     below the refill rate when the bucket is low) and whose "0 left"
//     after every request sent at its rate is no pause; the rate holds at
//     it instead. Until it shows itself a bucket, a Hint with a Reset of 2s
//     or more paces like a window, and a served response saying the quota
//     is spent pauses until Reset when that is over a second.
type Hint struct {
	// Limit is the quota per Window, in requests (or the provider's weight
	// units, if the caller paces weights). Zero means unknown.
	Limit float64
	// Remaining is what is left of the quota now. Zero (or less) together
	// with Reset > 0 means spent: send only a Hint whose Remaining is known.
	Remaining float64
	// Reset is the time until the quota resets. Zero means unknown.
	Reset time.Duration
	// Window is the length of the quota window, when the provider tells it
	// (e.g. RateLimit-Policy "w=60", or the "1M" of X-MBX-USED-WEIGHT-1M).
	// Zero means unknown.
	Window time.Duration
}

// exhausted reports whether h says the quota is spent until Reset.
func (h Hint) exhausted() bool {
	return h.Remaining <= 0 && h.Reset > 0
}

// ceiling returns Limit/Window in requests per second, or 0 without both.
func (h Hint) ceiling() float64 {
	if h.Limit <= 0 || h.Window <= 0 {
		return 0
	}
	return h.Limit / h.Window.Seconds()
}
