package retry

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Backoff defaults and limits.
const (
	// defaultBase is the default [BackoffConfig.Base]: the ceiling of the
	// first retry's sleep.
	defaultBase = 100 * time.Millisecond
	// defaultCap is the default [BackoffConfig.Cap]: the largest sleep.
	defaultCap = 20 * time.Second
	// maxBackoffCap bounds Base and Cap: a retry sleep longer than a day is a
	// misconfiguration (a provider that needs that long says so with
	// Retry-After, and the run should end rather than sleep).
	maxBackoffCap = 24 * time.Hour
)

// BackoffConfig configures a [Backoff]. The zero BackoffConfig is valid and
// means all defaults.
type BackoffConfig struct {
	// Base is the ceiling of the first retry's sleep; the ceiling doubles
	// with every retry. It must be in [0, 24h]. Zero means the default,
	// 100ms.
	Base time.Duration
	// Cap is the largest ceiling, however many retries came before. It must
	// be in [0, 24h] and at least Base. Zero means the default, 20s (or Base
	// if that is larger).
	Cap time.Duration
	// Rand returns a uniformly random number in [0, 1). Inject a
	// deterministic source in tests. A result outside [0, 1] is clamped into
	// it (NaN counts as 0), so a faulty source can never produce a sleep
	// outside [0, ceiling]. Nil means [rand.Float64] of math/rand/v2.
	// [NoJitter] turns jitter off: every sleep is its ceiling, a plain
	// exponential backoff.
	Rand func() float64
}

// NoJitter, as [BackoffConfig.Rand], turns jitter off: it always returns 1,
// so every sleep is the full ceiling, min(Cap, Base·2^n). Prefer the
// default full jitter for clients that may fail together; NoJitter suits a
// lone client that wants predictable sleeps.
func NoJitter() float64 { return 1 }

// Backoff is full-jitter exponential backoff: the n-th call of
// [Backoff.NextBackOff] (counting from 0) returns a uniformly random sleep in
// [0, min(Cap, Base·2^n)]. It implements [backoff.BackOff] of
// github.com/cenkalti/backoff/v4, so it works inside [backoff.Retry],
// [backoff.WithMaxRetries] and [backoff.WithContext]. It never returns
// [backoff.Stop]: bound the retries with the run's [Budget] or with
// [backoff.WithMaxRetries].
//
// Why not the library's own [backoff.ExponentialBackOff]: its
// RandomizationFactor jitters ±factor around the current interval (by
// default 0.5, so [0.5, 1.5]·interval). Clients that failed together retry
// within the same band each round, in clustered waves, and the sleep never
// comes near zero. Full jitter spreads them over the whole [0, ceiling]
// range, which the AWS analysis found to do the least total work and finish
// soonest under contention.
//
// The ceiling is computed without overflow for any number of retries.
//
// Backoff is not safe for concurrent use: it counts the retries of one
// logical request. Give each request its own, and call [Backoff.Reset] (or
// let [backoff.Retry] call it) before reusing one.
//
// The zero Backoff is not usable (its methods panic): make one with [NewBackoff].
type Backoff struct {
	base, cap time.Duration
	rand      func() float64
	attempt   int
}

var _ backoff.BackOff = (*Backoff)(nil)

// NewBackoff returns a Backoff for cfg, or an error wrapping
// [ErrInvalidConfig] naming the invalid field.
func NewBackoff(cfg BackoffConfig) (*Backoff, error) {
	base := cfg.Base
	switch {
	case base == 0:
		base = defaultBase
	case base < 0 || base > maxBackoffCap:
		return nil, invalid.Must("BackoffConfig.Base", "be in [0, 24h]", cfg.Base)
	}
	ceiling := cfg.Cap
	switch {
	case ceiling == 0:
		ceiling = max(defaultCap, base)
	case ceiling < 0 || ceiling > maxBackoffCap:
		return nil, invalid.Must("BackoffConfig.Cap", "be in [0, 24h]", cfg.Cap)
	case ceiling < base:
		return nil, invalid.Must("BackoffConfig.Cap", fmt.Sprintf("be >= Base (%v)", base), cfg.Cap)
	}
	r := cfg.Rand
	if r == nil {
		r = rand.Float64
	}
	return &Backoff{base: base, cap: ceiling, rand: r}, nil
}

// NextBackOff returns the sleep before the next retry, a uniformly random
// duration in [0, min(Cap, Base·2^n)] where n counts the calls since the last
// [Backoff.Reset], and counts this one. It implements [backoff.BackOff].
func (b *Backoff) NextBackOff() time.Duration {
	ceiling := b.ceiling(b.attempt)
	if b.attempt < 64 { // the ceiling is Cap long before; stop counting
		b.attempt++
	}
	u := b.rand()
	switch {
	case !(u > 0): // also NaN
		return 0
	case u >= 1:
		return ceiling
	}
	return min(time.Duration(u*float64(ceiling)), ceiling)
}

// Reset forgets the retries so far: the next sleep is again at most Base. It
// implements [backoff.BackOff].
func (b *Backoff) Reset() { b.attempt = 0 }

// ceiling returns the upper bound of the sleep before retry n (counting from
// 0): min(Cap, Base·2^n), computed without overflow. A negative n counts as
// 0.
func (b *Backoff) ceiling(n int) time.Duration {
	n = max(n, 0)
	if n >= 63 || b.base > b.cap>>n {
		return b.cap
	}
	return b.base << n // ≤ Cap by the test above, so no overflow
}

// Floor returns the sleep a server's Retry-After allows: max(sleep,
// retryAfter), so the client never comes back before the server asked, and
// clients told the same Retry-After still spread out after it when their
// jitter is larger. It keeps [backoff.Stop] as Stop (a policy that gave up
// stays given up), and ignores a retryAfter ≤ 0 (none). Use it on the
// result of any [backoff.BackOff]: a [Backoff]'s NextBackOff, or one wrapped
// by [backoff.WithMaxRetries].
func Floor(sleep, retryAfter time.Duration) time.Duration {
	if sleep == backoff.Stop {
		return backoff.Stop
	}
	return max(sleep, retryAfter)
}
