package retry

import (
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfter caps the pause [ParseRetryAfter] and [ParseRateLimit]
// report, so a garbage or hostile header cannot park a stream for years. It
// is 72 hours because real bans are that long: Binance escalates repeated
// IP bans (418 with Retry-After) from 2 minutes up to 3 days, and coming back
// before a ban ends only extends it. A run normally ends long before; the
// pause then tells the scheduler when to resume.
const MaxRetryAfter = 72 * time.Hour

// ParseRetryAfter parses the value of a Retry-After header (RFC 9110
// §10.2.3) received at now, and returns how long to wait from now and
// whether the value was valid.
//
// It accepts both forms, after trimming surrounding white space:
//   - delta-seconds: a non-negative decimal integer ("120"). A sign, a
//     fraction ("1.5") or an exponent is invalid, as the RFC's 1*DIGIT
//     grammar says; a server that sends "1.5" is broken, and guessing would
//     hide it.
//   - HTTP-date: the IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37 GMT") and
//     the obsolete RFC 850 and asctime forms, as [http.ParseTime] accepts
//     them. A date at or before now means "retry now": (0, true).
//
// Empty, negative or unparsable values return (0, false). Valid values
// longer than [MaxRetryAfter], including delta-seconds too long for any
// integer type, return MaxRetryAfter. So the result is always in
// [0, MaxRetryAfter], and 0 whenever ok is false. It never panics.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if secs, ok := parseDigits(value); ok {
		return secondsCapped(secs), true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return untilCapped(t, now), true
}

// maxRetryAfterSeconds is MaxRetryAfter in whole seconds.
const maxRetryAfterSeconds = uint64(MaxRetryAfter / time.Second)

// parseDigits parses s as a non-empty run of ASCII digits. Values too large
// for a uint64 saturate, which is fine: anything above maxRetryAfterSeconds
// is capped anyway.
func parseDigits(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= maxRetryAfterSeconds { // beyond it the exact value no longer matters
			n = n*10 + uint64(c-'0')
		}
	}
	return n, true
}

// secondsCapped converts whole seconds to a duration capped at
// MaxRetryAfter.
func secondsCapped(secs uint64) time.Duration {
	if secs >= maxRetryAfterSeconds {
		return MaxRetryAfter
	}
	return time.Duration(secs) * time.Second
}

// untilCapped returns t - now clamped into [0, MaxRetryAfter]: a moment in
// the past means now.
func untilCapped(t, now time.Time) time.Duration {
	d := t.Sub(now) // saturates instead of overflowing
	return min(max(d, 0), MaxRetryAfter)
}
