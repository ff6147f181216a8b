package gcra

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage/internal/cfgerr"
)

// ErrInvalidConfig is wrapped by every error [New] returns for a Config
// field out of range, by those of [Limiter.SetRateAt] and [Limiter.SetBurst]
// for a value a Config could not hold, and by that of [Limiter.WaitN] for a
// cost no Burst of the limiter's can carry (negative, or larger than Burst);
// the message names the field, the rule and the value.
var ErrInvalidConfig = errors.New("gcra: invalid config")

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("gcra", ErrInvalidConfig)

// errWouldExceedDeadline is wrapped by the error [Limiter.WaitN] returns at
// once when the context's deadline comes before the slot would conform; it
// wraps [context.DeadlineExceeded], which is what callers test for.
var errWouldExceedDeadline = fmt.Errorf("gcra: wait would exceed the context deadline: %w", context.DeadlineExceeded)

// defaultRate is the rate, in events per second, of a Config whose Rate is 0.
const defaultRate = 1.0

// Config configures a [Limiter]. The zero Config is valid: one request per
// second, no burst. New only reads it, so one Config may be shared freely.
type Config struct {
	// Rate is the sustained rate in cost units (requests, for unit costs) per
	// second. The emission interval 1/Rate is rounded to the nearest
	// nanosecond and must be between 1ns and about 292 years, so Rate must be
	// in (about 1.1e-10, 1e9]; negative, NaN and infinite rates are errors. Zero means the default. Defaults to 1 (one per second).
	Rate float64

	// Burst is how many unit-cost requests may arrive back to back after the
	// limiter has been idle, and the largest cost a single request may have.
	// Burst × interval must fit in an int64 of nanoseconds (about 292 years).
	// Negative is an error; zero means the default. Defaults to 1 (strict
	// pacing, no burst).
	Burst int
}

// Limiter is a GCRA rate limiter. Its state is one atomic theoretical arrival
// time, so it is safe for concurrent use by any number of goroutines, and its
// admit path takes no lock and allocates nothing. Create it with [New].
//
// Times are kept as nanoseconds since the limiter's creation, so explicit
// times (the ...At methods) may lie anywhere within about 292 years of it,
// before or after: the Unix epoch works, the zero time.Time does not (it
// saturates to the earliest representable instant).
type Limiter struct {
	// tat is the theoretical arrival time in nanoseconds since base; empty
	// (math.MinInt64) before the first booking, frozen while SetRateAt swaps
	// the interval.
	tat atomic.Int64
	// interval is the emission interval I in nanoseconds.
	interval atomic.Int64
	// gen counts rate and burst changes. A decision commits only if no
	// change happened since it read the state: a change that rescales the backlog
	// to exactly the word it read (X → Y → X, or an idle limiter) would
	// otherwise let a decision made with the old interval pass its
	// compare-and-swap.
	gen atomic.Uint64
	// paused is the end of the latest pause (see PauseUntil), in
	// nanoseconds since base; empty before the first. A rate change
	// rescales only the backlog beyond it: a pause is a time, not a number
	// of requests.
	paused atomic.Int64
	// burst is Burst; SetBurst changes it, then moves gen on.
	burst atomic.Int64
	// base carries a monotonic reading, so the clock-reading forms measure
	// time.Since(base) and are immune to wall-clock jumps.
	base time.Time
}

const (
	empty  = math.MinInt64 // TAT of a limiter that has never booked: max(empty, t) = t
	frozen = math.MaxInt64 // TAT while SetRateAt swaps the interval; never a real TAT
)

// New returns a Limiter configured by cfg, full (Burst requests available).
// It reports an error wrapping [ErrInvalidConfig] if a field is out of range.
func New(cfg Config) (*Limiter, error) {
	rate := cfg.Rate
	if rate == 0 {
		rate = defaultRate
	}
	iv, rule := intervalOf(rate)
	if rule != "" {
		return nil, invalid.Must("Config.Rate", "be "+rule, cfg.Rate)
	}
	burst := cfg.Burst
	switch {
	case burst < 0:
		return nil, invalid.Must("Config.Burst", "be >= 0", cfg.Burst)
	case burst == 0:
		burst = 1
	}
	if _, ok := tolerance(iv, burst); !ok {
		return nil, invalid.Must("Config.Burst",
			fmt.Sprintf("be small enough that Burst × interval (1/Rate = %v) fits in int64 nanoseconds", time.Duration(iv)), cfg.Burst)
	}
	l := &Limiter{base: time.Now()}
	l.burst.Store(int64(burst))
	l.tat.Store(empty)
	l.paused.Store(empty)
	l.interval.Store(iv)
	return l, nil
}

// intervalOf converts a rate in events per second to a whole number of
// nanoseconds, or names the rule the rate breaks.
func intervalOf(rate float64) (int64, string) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return 0, "> 0 and finite"
	}
	if rate > 1e9 {
		return 0, "at most 1e9 per second (an interval of at least 1ns)"
	}
	iv := math.Round(1e9 / rate)
	if iv >= math.MaxInt64 {
		return 0, "large enough that its interval fits in int64 nanoseconds"
	}
	return int64(iv), ""
}

// Rate returns the current rate in events per second: 1e9 divided by the
// interval in nanoseconds, so it is the configured rate up to the rounding of
// the interval to a whole nanosecond.
func (l *Limiter) Rate() float64 { return 1e9 / float64(l.interval.Load()) }

// Interval returns the current emission interval I = 1/Rate.
func (l *Limiter) Interval() time.Duration { return time.Duration(l.interval.Load()) }

// Burst returns how many unit requests may arrive back to back; it changes
// only through [Limiter.SetBurst].
func (l *Limiter) Burst() int { return int(l.burst.Load()) }

// offset converts t to nanoseconds since the limiter's base, saturating for
// times more than about 292 years away.
func (l *Limiter) offset(t time.Time) int64 { return int64(t.Sub(l.base)) }

// clock reads the monotonic clock as nanoseconds since the base.
func (l *Limiter) clock() int64 { return int64(time.Since(l.base)) }
