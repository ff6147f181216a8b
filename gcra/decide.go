package gcra

import (
	"math"
	"math/bits"
	"time"
)

// Never is the RetryAfter of a request that can never conform: its cost is
// negative or larger than Burst, so no amount of waiting admits it. It is the
// largest time.Duration (about 292 years), so a caller that sleeps for
// RetryAfter does not spin; test for it with r.RetryAfter == Never.
const Never = time.Duration(math.MaxInt64)

// Result reports one decision and the limiter's state after it. It is a plain
// value, safe to copy and share.
type Result struct {
	// Allowed reports whether the request conformed and was booked.
	Allowed bool

	// Remaining is how many unit-cost requests would still conform at the
	// decision time, after this decision: ⌊(t + L + I − TAT)/I⌋, never
	// negative and never more than Burst.
	Remaining int

	// RetryAfter is how long after the decision time the same request would
	// conform, if nothing else is booked meanwhile: zero when Allowed,
	// otherwise TAT' + n·I − (L + I) − t. It is [Never] when the cost is
	// negative or exceeds Burst.
	RetryAfter time.Duration

	// ResetAfter is how long after the decision time the limiter is idle
	// again, with the full Burst available: max(TAT − t, 0) after this
	// decision.
	ResetAfter time.Duration
}

// Decide is the pure GCRA decision, in int64 nanoseconds on any common time
// base: tat is the theoretical arrival time (math.MinInt64 for a limiter that
// has never admitted anything), now the request time, interval the emission
// interval I = 1/Rate in nanoseconds, burst the number of requests that may
// arrive back to back (L = (burst−1)·I), and n the request's cost in units of
// I. It returns the TAT to store and the [Result]; a request that does not
// conform returns tat unchanged, and so does n == 0, which is a probe: it is
// allowed unless earlier bookings or a pause put the limiter beyond its
// tolerance, and it never books anything.
//
// A cost outside [0, burst] never conforms (RetryAfter is [Never]), and so
// does every request when the parameters are invalid (interval ≤ 0, burst < 1,
// or burst·interval overflowing int64). The arithmetic saturates instead of
// overflowing, so any tat and now are safe. [Limiter] uses Decide for every
// admit; a store that keeps TAT elsewhere, such as a database row, can call it
// to make exactly the same decisions.
func Decide(tat, now, interval int64, burst, n int) (newTAT int64, r Result) {
	tau, ok := tolerance(interval, burst)
	if !ok {
		return tat, Result{RetryAfter: Never}
	}
	backlog := satSub(max(tat, now), now)
	if n < 0 || n > burst {
		return tat, result(false, backlog, tau, interval, Never)
	}
	cost := int64(n) * interval
	if backlog > tau-cost {
		return tat, result(false, backlog, tau, interval, time.Duration(backlog-(tau-cost)))
	}
	if n == 0 {
		return tat, result(true, backlog, tau, interval, 0)
	}
	return satAdd(max(tat, now), cost), result(true, backlog+cost, tau, interval, 0)
}

// Reserve is the pure form of [Limiter.ReserveNAt]: it books a request of
// cost n unconditionally and returns the TAT to store and how long after now
// the request conforms (zero if it conforms at once). The arguments are those
// of [Decide]. A cost outside [0, burst], or invalid parameters, book nothing
// and return [Never]; n == 0 books nothing and returns how long until a
// zero-cost request would conform.
func Reserve(tat, now, interval int64, burst, n int) (newTAT int64, wait time.Duration) {
	tau, ok := tolerance(interval, burst)
	if !ok || n < 0 || n > burst {
		return tat, Never
	}
	cost := int64(n) * interval
	tatp := max(tat, now)
	if backlog := satSub(tatp, now); backlog > tau-cost {
		wait = time.Duration(backlog - (tau - cost))
	}
	if n == 0 {
		return tat, wait
	}
	return satAdd(tatp, cost), wait
}

// tolerance returns L + I = burst·interval, the most backlog a conforming
// request may leave, and whether the parameters are valid.
func tolerance(interval int64, burst int) (int64, bool) {
	if interval <= 0 || burst < 1 || int64(burst) > math.MaxInt64/interval {
		return 0, false
	}
	return int64(burst) * interval, true
}

// result builds a Result from the backlog TAT − t left after the decision.
func result(allowed bool, backlog, tau, interval int64, retry time.Duration) Result {
	r := Result{Allowed: allowed, RetryAfter: retry, ResetAfter: time.Duration(backlog)}
	if backlog < tau {
		r.Remaining = int((tau - backlog) / interval)
	}
	return r
}

// unreserve gives back n·interval of booked time: TAT moves back by that much
// but never below now, and an idle limiter (TAT ≤ now) has nothing to give.
func unreserve(tat, now, interval int64, n int) int64 {
	if n <= 0 || tat <= now {
		return tat
	}
	hi, cost := bits.Mul64(uint64(n), uint64(interval))
	if hi != 0 || cost >= uint64(satSub(tat, now)) {
		return now
	}
	return tat - int64(cost)
}

// pause moves TAT forward to at least until + L, so that nothing conforms
// before until and requests after it are paced rather than bursted. It never
// moves TAT backwards.
func pause(tat, until, interval int64, burst int) int64 {
	l, ok := tolerance(interval, burst)
	if !ok {
		return tat
	}
	return max(tat, satAdd(until, l-interval))
}

// rescale converts the backlog TAT − now from the old interval to the new one,
// keeping it the same number of cost units, rounded up so that a rate change
// never creates credit. An idle limiter stays idle. The result always differs
// from tat (by a nanosecond where the exact answer equals it), so that an
// admit which read the state before a rate change cannot mistake the state
// after it for the one it read (the ABA problem of compare-and-swap).
func rescale(tat, now, oldInterval, newInterval int64) int64 {
	if tat <= now {
		if tat == now {
			return tat - 1 // still idle: TAT ≤ now means the full burst
		}
		return tat + 1
	}
	backlog := satSub(tat, now)
	hi, lo := bits.Mul64(uint64(backlog), uint64(newInterval))
	if hi >= uint64(oldInterval) {
		return satAdd(now, math.MaxInt64) // the backlog no longer fits: saturate
	}
	q, rem := bits.Div64(hi, lo, uint64(oldInterval))
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		q = math.MaxInt64
	}
	if u := satAdd(now, int64(q)); u != tat {
		return u
	}
	return satAdd(tat, 1)
}

// satAdd returns a + b clamped to the int64 range.
func satAdd(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// satSub returns a − b clamped to the int64 range.
func satSub(a, b int64) int64 {
	d := a - b
	if (b < 0 && d < a) || (b > 0 && d > a) {
		if b < 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return d
}
