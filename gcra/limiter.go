package gcra

import (
	"fmt"
	"runtime"
	"time"
)

// AllowNAt decides a request of cost n (in units of the interval) at now and
// books it if it conforms; see [Decide] for the arithmetic and the meaning of
// every [Result] field. A cost larger than Burst, or negative, never conforms
// and its RetryAfter is [Never]; n == 0 is a probe that books nothing. Times
// may be arbitrary (before the limiter was created, or out of order); a
// request earlier than the current backlog simply finds less credit.
func (l *Limiter) AllowNAt(now time.Time, n int) Result { return l.admit(l.offset(now), false, n) }

// Allow reports whether one request now conforms, and books it if so. It
// reads the monotonic clock.
func (l *Limiter) Allow() bool { return l.admit(0, true, 1).Allowed }

// admit runs Decide in a compare-and-swap loop until its decision is based on
// the current state. The clock-reading forms re-read the clock on every
// attempt, so a retried decision is made at the time it takes effect.
func (l *Limiter) admit(now int64, useClock bool, n int) Result {
	for {
		tat, iv, gen := l.load()
		if useClock {
			now = l.clock()
		}
		newTAT, r := Decide(tat, now, iv, l.Burst(), n)
		if l.commit(tat, newTAT, gen) {
			return r
		}
	}
}

// commit stores newTAT in place of tat, or, when there is nothing to book,
// confirms that tat is still current. It fails when the word changed or a
// rate change happened since the state was read at gen, so the caller
// decides again.
func (l *Limiter) commit(tat, newTAT int64, gen uint64) bool {
	if l.gen.Load() != gen {
		return false
	}
	if newTAT == tat {
		return l.tat.Load() == tat
	}
	return l.tat.CompareAndSwap(tat, storable(newTAT))
}

// ReserveNAt books a request of cost n at now whether or not it conforms, and
// returns how long after now it will: the caller must wait that long before
// sending (zero means at once). This is what a pacer that must send every
// request needs; if the request is abandoned before its time, give the slot
// back with [Limiter.UnreserveNAt]. A cost outside [0, Burst] books nothing
// and returns [Never].
func (l *Limiter) ReserveNAt(now time.Time, n int) time.Duration {
	return l.reserve(l.offset(now), false, n)
}

func (l *Limiter) reserve(now int64, useClock bool, n int) time.Duration {
	for {
		tat, iv, gen := l.load()
		if useClock {
			now = l.clock()
		}
		newTAT, wait := Reserve(tat, now, iv, l.Burst(), n)
		if l.commit(tat, newTAT, gen) {
			return wait
		}
	}
}

// UnreserveNAt gives back a slot of cost n booked by [Limiter.ReserveNAt]
// whose wait has not yet elapsed at now: the theoretical arrival time moves
// back by n intervals (at the current rate, which is what a rate change
// rescaled the booking to), but never below now, so giving back never banks
// credit beyond an idle limiter's. Calling it for a slot that was used, or
// twice, hands out credit that was never booked.
func (l *Limiter) UnreserveNAt(now time.Time, n int) { l.unreserve(l.offset(now), false, n) }

func (l *Limiter) unreserve(now int64, useClock bool, n int) {
	if n <= 0 || n > l.Burst() {
		return // Reserve booked nothing for such a cost
	}
	for {
		tat, iv, gen := l.load()
		if useClock {
			now = l.clock()
		}
		if l.commit(tat, unreserve(tat, now, iv, n), gen) {
			return
		}
	}
}

// PauseUntil makes the limiter honour a provider's Retry-After: no request
// conforms before t, and none finds a burst at t, because the theoretical
// arrival time moves forward to at least t + L; requests after t are paced at
// the current rate. It never moves the theoretical arrival time backwards, so
// a shorter pause than one already in force changes nothing. A later rate
// change ([Limiter.SetRateAt]) does not move the pause's end.
func (l *Limiter) PauseUntil(t time.Time) {
	until := l.offset(t)
	for p := l.paused.Load(); until > p && !l.paused.CompareAndSwap(p, until); p = l.paused.Load() {
	}
	for {
		tat, iv, gen := l.load()
		if l.commit(tat, pause(tat, until, iv, l.Burst()), gen) {
			return
		}
	}
}

// SetRateAt changes the rate, in events per second, at now. The backlog
// TAT − now (from the end of a pause in force rather than now: see
// [Limiter.PauseUntil]) is rescaled by newInterval/oldInterval, so what is already booked
// keeps its size in requests: the change neither grants nor destroys credit
// beyond what the new interval implies (it rounds towards less credit, by at
// most 2ns), an idle limiter stays idle, and Burst is unchanged. It returns
// an error wrapping [ErrInvalidConfig], and keeps the old rate, if rate is not
// in the range [Config].Rate allows (zero included) or Burst × the new
// interval would overflow. It allocates nothing and is cheap enough to call
// on every response; setting the current rate again returns at once.
func (l *Limiter) SetRateAt(now time.Time, rate float64) error {
	return l.setRate(l.offset(now), false, rate)
}

// SetRate is [Limiter.SetRateAt] at the current (monotonic) time; it makes a
// Limiter a budget.Pacer.
func (l *Limiter) SetRate(rate float64) error { return l.setRate(0, true, rate) }

func (l *Limiter) setRate(now int64, useClock bool, rate float64) error {
	iv, rule := intervalOf(rate)
	if rule != "" {
		return fmt.Errorf("gcra: SetRateAt rate must be %s (got %v): %w", rule, rate, ErrInvalidConfig)
	}
	if _, ok := tolerance(iv, l.Burst()); !ok {
		return fmt.Errorf("gcra: SetRateAt rate %v gives an interval of %v; Burst (%d) × interval must fit in int64 nanoseconds: %w",
			rate, time.Duration(iv), l.Burst(), ErrInvalidConfig)
	}
	if l.interval.Load() == iv {
		return nil
	}
	// Freeze the state word so that no admit books against the old backlog
	// with the new interval or the other way round, swap the interval, then
	// publish the rescaled backlog, which also unfreezes. Only the goroutine
	// that froze the word writes it until then.
	var tat int64
	for {
		tat = l.tat.Load()
		if tat != frozen && l.tat.CompareAndSwap(tat, frozen) {
			break
		}
		runtime.Gosched()
	}
	if useClock {
		now = l.clock()
	}
	l.gen.Add(1) // before the interval changes: see Limiter.gen
	old := l.interval.Swap(iv)
	// The backlog is rescaled from the end of the pause in force, if any,
	// and the pause applied again at the new interval: the pause keeps its
	// end whatever the rate.
	newTAT := rescale(tat, max(now, l.paused.Load()), old, iv)
	if p := l.paused.Load(); p > now {
		newTAT = pause(newTAT, p, iv, l.Burst())
	}
	l.tat.Store(storable(newTAT))
	return nil
}

// SetBurst changes Burst to n. What is booked stays booked: the backlog
// keeps its length, so the limiter decides from then on as one made with
// Burst n would with the same backlog (a larger Burst lets as many more
// requests through at once as it adds, a smaller one as many fewer), and a
// pause in force still lets no burst through at its end. It returns an
// error wrapping [ErrInvalidConfig], and keeps the old Burst, if n < 1 or n
// × the interval would overflow int64 nanoseconds. Requests of a cost over
// the new Burst never conform (see [Limiter.AllowNAt]). To have a larger
// Burst earned by idling rather than granted at once (the provider it
// paces for may have just refused, its own allowance empty), book the
// added units at the same time with [Limiter.ReserveNAt], as budget's
// default pacer does.
func (l *Limiter) SetBurst(n int) error {
	iv := l.interval.Load()
	if _, ok := tolerance(iv, n); !ok || n < 1 {
		return fmt.Errorf("gcra: SetBurst n must be >= 1 and n × interval (%v) must fit in int64 nanoseconds (got %d): %w",
			time.Duration(iv), n, ErrInvalidConfig)
	}
	if int64(n) == l.burst.Load() {
		return nil
	}
	// The new Burst before the generation moves on: a decision that read
	// the generation after this reads the new Burst, and one that read it
	// before fails its commit and decides again (see commit).
	l.burst.Store(int64(n))
	l.gen.Add(1)
	until := l.paused.Load()
	for {
		tat, iv, gen := l.load()
		if until == empty || l.commit(tat, pause(tat, until, iv, n), gen) {
			return nil
		}
	}
}

// load returns the current theoretical arrival time and interval as a
// consistent pair, and the rate-change generation they belong to, yielding
// while SetRateAt has the state frozen. A pair read across a rate change
// (the old TAT with the new interval) is caught by commit, which finds the
// generation moved on. One window remains: a whole rate change landing
// between commit's generation check and its compare-and-swap, and ending on
// the very word read. It needs the committing goroutine descheduled for the
// length of a SetRateAt at that exact instruction.
func (l *Limiter) load() (tat, interval int64, gen uint64) {
	for {
		gen = l.gen.Load()
		tat = l.tat.Load()
		if tat != frozen {
			return tat, l.interval.Load(), gen
		}
		runtime.Gosched()
	}
}

// storable keeps a saturated TAT clear of the frozen marker; the nanosecond
// lost 292 years from now is immaterial.
func storable(tat int64) int64 {
	if tat == frozen {
		return frozen - 1
	}
	return tat
}
