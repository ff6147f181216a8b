package providertest

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// algorithm is how a [Limit] counts request weight, read from which of its
// fields are set.
type algorithm int

const (
	unlimited   algorithm = iota // no field set: every request is admitted
	gcra                         // Rate (and Burst) set
	fixedWindow                  // Count (and Window) set
)

// Limit is the server's true limit, applied to the sum of the weights of all
// requests (one server is one client IP as far as the limit is concerned).
// Set Rate (and Burst) for a GCRA, or Count (and Window) for a fixed
// window, not both: Limit{Rate: 20, Burst: 5} or Limit{Count: 1200,
// Window: time.Minute}. The zero Limit admits everything. Limit is a
// value; copy it freely.
type Limit struct {
	// Rate makes the limit a GCRA that admits Rate weight units per second
	// with a burst of Burst units (a token bucket without the bucket: ITU-T
	// I.371); idle time never banks more than the burst. Must be in (0,
	// 1e9] when Rate or Burst is set.
	Rate float64
	// Burst is the GCRA burst: how many weight units are admitted at once
	// after idling. Must be >= 0; zero means 1.
	Burst int
	// Count makes the limit a fixed window that admits Count weight units
	// per Window, the windows aligned to multiples of Window since the Unix
	// epoch, like Binance's per-minute request weight. Must be > 0 when
	// Count or Window is set.
	Count int
	// Window is the fixed window's length, at least 1ms. Zero means 1
	// minute.
	Window time.Duration
}

// algorithm returns how l counts, from the fields set.
func (l Limit) algorithm() algorithm {
	switch {
	case l.Rate != 0 || l.Burst != 0:
		return gcra
	case l.Count != 0 || l.Window != 0:
		return fixedWindow
	}
	return unlimited
}

// String describes the limit, e.g. "gcra 10/s burst 5",
// "fixed-window 1200/1m0s" or "unlimited".
func (l Limit) String() string {
	switch l.algorithm() {
	case gcra:
		return fmt.Sprintf("gcra %g/s burst %d", l.Rate, l.Burst)
	case fixedWindow:
		return fmt.Sprintf("fixed-window %d/%s", l.Count, l.Window)
	}
	return "unlimited"
}

// normalize validates l (field names the config path, e.g. "Config.Limit")
// and fills defaults.
func (l Limit) normalize(field string) (Limit, error) {
	bad := func(sub, rule string, v any) (Limit, error) {
		return l, invalid.Must(field+"."+sub, rule, v)
	}
	switch l.algorithm() {
	case gcra:
		if !(l.Rate > 0 && l.Rate <= 1e9) {
			return bad("Rate", "be in (0, 1e9] for a GCRA limit", l.Rate)
		}
		if l.Burst < 0 {
			return bad("Burst", "be >= 0", l.Burst)
		}
		if l.Count != 0 || l.Window != 0 {
			return bad("Count", "be zero, as must Window, when Rate is set (a GCRA or a fixed window, not both)", l.Count)
		}
		l.Burst = max(l.Burst, 1)
	case fixedWindow:
		if l.Count <= 0 {
			return bad("Count", "be > 0 for a fixed-window limit", l.Count)
		}
		if l.Window < 0 || (l.Window > 0 && l.Window < time.Millisecond) {
			return bad("Window", "be 0 or >= 1ms", l.Window)
		}
		if l.Window == 0 {
			l.Window = time.Minute
		}
	}
	return l, nil
}

// Answer is how the server answers a request over its limit: it refuses
// it (429 with or without Retry-After, or 503), perhaps banning the client
// after repeated refusals, or it serves it late. The zero Answer answers 429
// Too Many Requests with Retry-After (whole seconds, rounded up) and
// Binance's -1003 body, and never bans. Answer is a value; copy it freely.
//
//	Answer{}                   // 429 with Retry-After
//	Answer{NoRetryAfter: true} // a bare 429
//	Answer{Status: 503}        // 503 with Binance's -1008 body
//	Answer{SlowDown: true}     // served late, never refused
//	Answer{BanAfter: 5}        // 429s; the fifth in a minute starts a 418 ban
type Answer struct {
	// Status is the refusal's HTTP status: 429 Too Many Requests with
	// Binance's -1003 body, or 503 Service Unavailable with its -1008 body
	// and no Retry-After. Must be 0, 429 or 503; zero means 429.
	Status int

	// NoRetryAfter leaves Retry-After out of a 429: a bare 429. Must be
	// false with Status 503, which sends none anyway.
	NoRetryAfter bool

	// SlowDown serves an over-limit request (200) instead of refusing it,
	// delaying the response until the moment the request would have
	// conformed, so the extra latency grows with how far over the limit the
	// client is. Delayed requests are counted against the limit. A slow-down
	// refuses nothing: Status, NoRetryAfter, BanAfter, BanWindow and BanFor
	// must be zero with it.
	SlowDown bool

	// BanAfter bans the client after this many refusals within BanWindow:
	// the refusals before are answered as Status and NoRetryAfter say, and
	// from the one that starts the ban every request gets Binance's 418
	// with Retry-After until BanFor has passed. Must be >= 0; zero never
	// bans.
	BanAfter int

	// BanWindow is the sliding window in which refusals count toward a ban.
	// Must be >= 0, and 0 when BanAfter is 0. Zero means 1 minute.
	BanWindow time.Duration

	// BanFor is how long a ban lasts. Must be >= 0, and 0 when BanAfter is
	// 0. Zero means 2 minutes, Binance's first ban.
	BanFor time.Duration
}

// normalize validates a (the Config.Answer) and fills defaults.
func (a Answer) normalize() (Answer, error) {
	bad := func(sub, rule string, v any) (Answer, error) {
		return a, invalid.Must("Config.Answer."+sub, rule, v)
	}
	switch {
	case a.Status != 0 && a.Status != http.StatusTooManyRequests && a.Status != http.StatusServiceUnavailable:
		return bad("Status", "be 429 or 503", a.Status)
	case a.BanAfter < 0:
		return bad("BanAfter", "be >= 0", a.BanAfter)
	case a.BanWindow < 0:
		return bad("BanWindow", "be >= 0", a.BanWindow)
	case a.BanFor < 0:
		return bad("BanFor", "be >= 0", a.BanFor)
	case a.SlowDown && a.Status != 0:
		return bad("Status", "be 0 with SlowDown (a slow-down refuses nothing)", a.Status)
	case a.SlowDown && a.NoRetryAfter:
		return bad("NoRetryAfter", "be false with SlowDown (a slow-down refuses nothing)", a.NoRetryAfter)
	case a.SlowDown && a.BanAfter != 0:
		return bad("BanAfter", "be 0 with SlowDown (a slow-down refuses nothing)", a.BanAfter)
	case a.Status == http.StatusServiceUnavailable && a.NoRetryAfter:
		return bad("NoRetryAfter", "be false with Status 503 (a 503 sends no Retry-After)", a.NoRetryAfter)
	case a.BanAfter == 0 && a.BanWindow != 0:
		return bad("BanWindow", "be 0 when BanAfter is 0 (no ban)", a.BanWindow)
	case a.BanAfter == 0 && a.BanFor != 0:
		return bad("BanFor", "be 0 when BanAfter is 0 (no ban)", a.BanFor)
	}
	if a.Status == 0 {
		a.Status = http.StatusTooManyRequests
	}
	if a.BanAfter > 0 && a.BanWindow == 0 {
		a.BanWindow = time.Minute
	}
	if a.BanAfter > 0 && a.BanFor == 0 {
		a.BanFor = 2 * time.Minute
	}
	return a, nil
}

// Fault is a kind of injected transient failure: an HTTP status in [500,
// 599], or [FaultReset]. A 500 comes with Binance's -1000 JSON body; any
// other status with a plain-text one, as a CDN or a load balancer sends
// (http.StatusBadGateway, or http.StatusServiceUnavailable: noise that
// says nothing about the client's rate, unlike the JSON -1008 refusal of
// [Answer.Status] 503).
type Fault int

// FaultReset resets the connection without a response: a TCP reset on
// loopback, an error wrapping syscall.ECONNRESET from the in-memory
// client.
const FaultReset Fault = -1

// limiter is the server-side limit state. Times are nanoseconds since the
// Unix epoch, weights are int64 units. Not safe for concurrent use; the
// Server's mutex guards it.
type limiter struct {
	limit    Limit
	interval int64 // GCRA emission interval per weight unit, ns
	tat      int64 // GCRA theoretical arrival time
	winStart int64 // fixed window start
	count    int64 // weight counted in the current window
}

// set installs l, keeping the counting state when the algorithm is unchanged.
func (lm *limiter) set(l Limit) {
	if l.algorithm() != lm.limit.algorithm() {
		*lm = limiter{}
	}
	lm.limit = l
	if l.algorithm() == gcra {
		lm.interval = max(int64(math.Round(1e9/l.Rate)), 1)
	}
}

// take counts a request of weight w at now. It reports whether the request
// was over the limit and, if so, how long until it would conform. With queue
// set (slow-down) an over-limit request is counted too, and wait is the delay
// until its turn.
func (lm *limiter) take(now, w int64, queue bool) (over bool, wait time.Duration) {
	switch lm.limit.algorithm() {
	case gcra:
		tau := int64(lm.limit.Burst) * lm.interval
		next := max(lm.tat, now) + w*lm.interval
		if next-now <= tau {
			lm.tat = next
			return false, 0
		}
		if queue {
			lm.tat = next
		}
		return true, time.Duration(next - now - tau)
	case fixedWindow:
		win, n := int64(lm.limit.Window), int64(lm.limit.Count)
		lm.roll(now)
		if lm.count+w <= n {
			lm.count += w
			return false, 0
		}
		if !queue {
			return true, time.Duration(lm.winStart + win - now)
		}
		lm.count += w
		k := (lm.count - 1) / n // the window this request's last unit fits in
		return true, time.Duration(lm.winStart + k*win - now)
	}
	return false, 0
}

// roll starts a new fixed window when now has left the current one.
func (lm *limiter) roll(now int64) {
	win := int64(lm.limit.Window)
	if start := now - floorMod(now, win); start != lm.winStart {
		lm.winStart, lm.count = start, 0
	}
}

// policy reports the IETF RateLimit-Policy of a fixed window: its count and
// its length in whole seconds, rounded up. ok is false for other algorithms.
func (lm *limiter) policy() (count, seconds int64, ok bool) {
	if lm.limit.algorithm() != fixedWindow {
		return 0, 0, false
	}
	return int64(lm.limit.Count), int64((lm.limit.Window + time.Second - 1) / time.Second), true
}

// usage reports the IETF RateLimit fields at now: the limit, the weight
// still available, and the time until the limit is fully available again.
func (lm *limiter) usage(now int64) (limit, remaining int64, reset time.Duration, ok bool) {
	switch lm.limit.algorithm() {
	case gcra:
		tau := int64(lm.limit.Burst) * lm.interval
		used := max(lm.tat-now, 0)
		return int64(lm.limit.Burst), max((tau-used)/lm.interval, 0), time.Duration(used), true
	case fixedWindow:
		lm.roll(now)
		n := int64(lm.limit.Count)
		return n, max(n-lm.count, 0), time.Duration(lm.winStart + int64(lm.limit.Window) - now), true
	}
	return 0, 0, 0, false
}

// banState tracks refusals and the current ban for an [Answer] that bans.
type banState struct {
	until      int64   // ban end, ns; banned while now < until
	violations []int64 // times of recent violations, ascending
}

// violate records a refusal at now and reports whether it starts a ban.
func (b *banState) violate(now int64, after int, window, period time.Duration) bool {
	keep := b.violations[:0]
	for _, t := range b.violations {
		if t > now-int64(window) {
			keep = append(keep, t)
		}
	}
	b.violations = append(keep, now)
	if len(b.violations) < after {
		return false
	}
	b.violations = b.violations[:0]
	b.until = now + int64(period)
	return true
}

// floorMod returns x mod m in [0, m) for m > 0.
func floorMod(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
}

// retryAfter renders d as whole seconds rounded up, at least 1.
func retryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return fmt.Sprint(max(s, 1))
}
