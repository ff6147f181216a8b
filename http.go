package forage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/forage-go/forage/internal/redact"
)

// maxRetryAfter caps the pause [ParseRetryAfter] and [ParseQuota] report,
// so a garbage or hostile header cannot park a stream for years. It is 72
// hours because real bans are that long: Binance escalates repeated IP bans
// (418 with Retry-After) from 2 minutes up to 3 days, and coming back
// before a ban ends only extends it. A run normally ends long before; the
// pause then tells the scheduler when to resume.
const maxRetryAfter = 72 * time.Hour

// errNoResponse is the error of an Outcome built from no response and no
// error.
var errNoResponse = errors.New("forage: no response and no error (a broken fetcher)")

// FromHTTP builds an Outcome from a response and error as an
// [http.RoundTripper] or [http.Client.Do] returns them: the status, the
// Retry-After and rate-limit headers. It does not read or close the body.
//
// The error's message is redacted: net/http writes the whole request URL
// into it, query included (apikey=…&signature=…), and Outcome.Err ends up
// in stop errors, logs and stored job stats. Query values, userinfo
// and fragments become "REDACTED"; the scheme, host and path stay, and
// [errors.Is] and [errors.As] still reach the original error (a
// [*url.Error] stays one, with its URL redacted).
//
// A pause given in milliseconds (Azure's x-ms-retry-after-ms, and
// retry-after-ms) counts as a Retry-After; of several, the longest holds.
// A Retry-After given as a date is read against the response's Date
// header when it has one (the provider's clock, which may not agree with
// ours), else against the local clock; so is a reset given as a Unix time
// when the two clocks differ by more than a couple of seconds.
//
// No response and no error is a broken fetcher, and a status outside
// 100-599 (net/http reads "HTTP/1.1 000" as status 0) is not one: both are
// [Permanent], as [Outcome.Class] says, never a success.
//
// A response that comes with an error is a redirect the client stopped
// following: net/http returns the last 3xx and "stopped after 10
// redirects" for a loop, or the error of a CheckRedirect. It is never a
// success: Err says so and is marked [Permanent] with [Mark] (following
// the same redirects again meets the same loop).
func FromHTTP(resp *http.Response, err error) Outcome {
	o := Outcome{Err: redact.Error(err)}
	if resp == nil {
		if err == nil {
			o.Err = Mark(errNoResponse, Permanent)
		}
		return o
	}
	o.Status, o.Header = resp.StatusCode, resp.Header
	switch {
	case err != nil:
		o.Err = Mark(fmt.Errorf("forage: a redirect (HTTP %d) the client stopped following: %w", resp.StatusCode, o.Err), Permanent)
	case resp.StatusCode < 100 || resp.StatusCode > 599:
		// net/http reads any three digits as a status, 000 included: not
		// one RFC 9110 defines, and never a success.
		o.Err = Mark(fmt.Errorf("forage: HTTP status %03d is not a status code", resp.StatusCode), Permanent)
	}
	local := time.Now()
	theirs := serverNow(resp.Header, local)
	o.RetryAfter = max(retryAfter(resp.Header.Values("Retry-After"), theirs), retryAfterMs(resp.Header))
	// A reset may be a Unix time in milliseconds, finer than Date's
	// second: against Date, one 400 ms away read as up to 1.4 s (a spent
	// window's pause, not a bucket's next token). The local clock is as
	// good within dateSlack of the provider's.
	quotaNow := local
	if skew := local.Sub(theirs); skew > dateSlack || skew < -dateSlack {
		quotaNow = theirs
	}
	if rl, ok := ParseQuota(resp.Header, quotaNow); ok {
		o.Quota = rl
	}
	return o
}

// Redact returns err with the secrets its message may hold masked, as
// forage masks them in every error, log line and record of its own: a
// URL's userinfo, query values and fragment, credentials in headers and
// key=value pairs become "REDACTED"; the scheme, host, path and parameter
// names stay, and so do the short, plain values of the parameters that
// page or bound a query (page=3, limit=100, startTime=…, symbol=BTCUSDT),
// which say which request failed. It returns err itself when there is nothing to mask, and nil
// for nil. [errors.Is] and [errors.As] still reach the original error (a
// [*net/url.Error] stays one, with its URL masked, so its Timeout method
// works).
//
// Call it on an error before logging or storing it when the request's URL
// may carry a key: [http.Client.Do] wraps whatever its transport returns
// (budget's Transport included) in a [*net/url.Error] holding the whole URL,
// query and all.
func Redact(err error) error { return redact.Error(err) }

// retryAfterMs returns the pause a Retry-After in milliseconds asks for
// (Azure's x-ms-retry-after-ms, and retry-after-ms), or 0: the longest of
// them, capped at maxRetryAfter.
func retryAfterMs(h http.Header) time.Duration {
	var d time.Duration
	for _, k := range [...]string{"Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		vs := h.Values(k)
		for _, v := range vs[:min(len(vs), maxRetryAfterParts)] {
			v = strings.TrimSpace(v)
			if _, ok := parseDigits(v); !ok {
				continue // digits only: no sign, no fraction
			}
			ms, err := strconv.ParseUint(v, 10, 64)
			if err != nil || ms >= uint64(maxRetryAfter/time.Millisecond) {
				ms = uint64(maxRetryAfter / time.Millisecond) // out of range: more than the cap
			}
			d = max(d, time.Duration(ms)*time.Millisecond)
		}
	}
	return d
}

// maxRetryAfterParts is how many Retry-After lines, and comma-separated
// parts of one, are read: an intermediary merges two or three; a hostile
// provider's million bytes of commas cost 0.4 s of CPU per answer, each
// part parsed as a delta and, with its neighbour, as a date.
const maxRetryAfterParts = 16

// retryAfter returns the longest pause the Retry-After values ask for,
// each line and each comma-separated part of one (an intermediary that
// merged two headers: "120, 120"; two lines, "1" then "120"), or 0 when
// none parses. The longest is the safe reading: sent again after the
// shorter, a provider that meant the longer counts a violation (one
// merged header was dropped unparsed, and the request sent again at
// once; of two lines, the first was taken).
func retryAfter(values []string, now time.Time) time.Duration {
	var d time.Duration
	for _, v := range values[:min(len(values), maxRetryAfterParts)] {
		if p, ok := ParseRetryAfter(v, now); ok {
			d = max(d, p)
			continue
		}
		// An HTTP-date holds a comma ("Wed, 21 Oct 2015 07:28:00 GMT"):
		// only a value that did not parse whole is split, and a part is
		// tried with the one after it too (a merged date's two halves).
		parts := strings.SplitN(v, ",", maxRetryAfterParts+1)
		parts = parts[:min(len(parts), maxRetryAfterParts)]
		for i, part := range parts {
			if p, ok := ParseRetryAfter(strings.TrimSpace(part), now); ok {
				d = max(d, p)
			}
			if i+1 < len(parts) {
				if p, ok := ParseRetryAfter(strings.TrimSpace(part+","+parts[i+1]), now); ok {
					d = max(d, p)
				}
			}
		}
	}
	return d
}

// dateSlack is how far apart the provider's clock (its Date header, cut
// to the second and stamped before the answer travelled) and ours may be
// for a reset to be read against ours.
const dateSlack = 2 * time.Second

// serverNow returns the time the response was sent, by the provider's
// clock, from its Date header (and Age, for a copy a cache kept); local
// when it has none. A Retry-After date
// and a reset given as a Unix time are the provider's clock: read against
// ours, a provider whose clock runs 5 minutes behind said "retry now" when
// it meant 2 seconds, and retrying early is how a ban is earned (one whose
// clock runs ahead made us wait minutes more). Date, truncated to the
// second and stamped before the response travelled, never shortens the
// wait the provider meant.
func serverNow(h http.Header, local time.Time) time.Time {
	v := h.Get("Date")
	if v == "" {
		return local
	}
	t, err := http.ParseTime(strings.TrimSpace(v))
	if err != nil {
		return local
	}
	if age, ok := parseDigits(strings.TrimSpace(h.Get("Age"))); ok {
		// A cache's copy: Date is when the provider made it. Age only
		// corrects a Date behind our clock, by as much as it is behind: a
		// larger one (garbage, or a cache's overestimate) would shorten or
		// erase the wait the provider asked for.
		t = t.Add(min(secondsCapped(age), max(0, local.Sub(t))+dateSlack))
	}
	return t
}

// ParseRetryAfter parses the value of a Retry-After header (RFC 9110
// §10.2.3) received at now, and returns how long to wait from now and
// whether the value was valid.
//
// It accepts both forms, after trimming surrounding white space:
//   - delta-seconds: a non-negative decimal integer ("120"), or one with a
//     fraction ("2.0", "1.5"), which the RFC's 1*DIGIT grammar does not
//     allow but providers send (Shopify's "Retry-After: 2.0"): its meaning
//     is plain, and ignored, the request went again at once, into the
//     limit that refused it. A fraction is rounded up to the millisecond,
//     so the wait is never shorter than asked. A sign or an exponent is
//     invalid.
//   - HTTP-date: the IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37 GMT") and
//     the obsolete RFC 850 and asctime forms, as [http.ParseTime] accepts
//     them. A date at or before now means "retry now": (0, true).
//
// Empty, negative or unparsable values return (0, false). Valid values
// longer than 72 hours, including delta-seconds too long for any integer
// type, return 72 hours: real bans are that long (Binance escalates
// repeated IP bans from 2 minutes up to 3 days), and a garbage or hostile
// header cannot park a stream for years. So the result is always in
// [0, 72h], and 0 whenever ok is false. It never panics.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if secs, ok := parseDigits(value); ok {
		return secondsCapped(secs), true
	}
	if d, ok := parseFraction(value); ok {
		return d, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return untilCapped(t, now), true
}

// ParseQuota reads the rate-limit headers of a response received at
// now, and reports whether it found any. It understands these families, in
// this order of precedence:
//
//   - the IETF httpapi drafts: the structured RateLimit header, both
//     "limit=100, remaining=50, reset=5" and "default";r=50;t=30, with
//     RateLimit-Policy ("100;w=60" or "default";q=100;w=60), and the older
//     separate RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset;
//   - X-RateLimit-Limit, -Remaining, -Used, -Reset and -Reset-After, and
//     Twitter's X-Rate-Limit-* spelling (Zendesk's limit as X-Rate-Limit).
//     A Reset above 1e9 is a Unix time in seconds (above 1e12, in
//     milliseconds); below, delta seconds; a date (RFC 3339, Atlassian's
//     to the minute, or an HTTP date) is the time of the reset.
//     Reset-After (always delta seconds) wins over Reset, as a delta does
//     not depend on the two clocks agreeing;
//   - Bybit's X-Bapi-Limit, X-Bapi-Limit-Status (what is left) and
//     X-Bapi-Limit-Reset-Timestamp (a Unix time in milliseconds);
//   - HubSpot's X-HubSpot-RateLimit-Max, -Remaining and
//     -Interval-Milliseconds (the window), or, without them, its
//     X-HubSpot-RateLimit-Secondly and -Secondly-Remaining (a window of a
//     second). HubSpot sends no reset; its daily quota is not read;
//   - Salesforce's Sforce-Limit-Info "api-usage=25/5000": Used and Limit
//     of a rolling day, with no reset;
//   - Shopify's X-Shopify-Shop-Api-Call-Limit "32/40": Used and Limit of
//     its REST Admin API's leaky bucket, with a Window of 20 s, the time
//     the bucket takes to leak whole (40 at 2/s, 80 at 4/s), so that
//     Limit/Window is the rate it leaks at; no reset;
//   - Binance's X-MBX-USED-WEIGHT-<n><unit> (unit s, m, h or d): the weight
//     used in that interval, as Used and Window. Binance does not send the
//     limit. With several intervals, the shortest one is reported; a bare
//     X-MBX-USED-WEIGHT is used only when no interval is given.
//
// A separate header sent on several lines (a gateway and the origin each
// set it) reads as its most cautious line: the least limit and left, the
// most used, the latest reset; but when Remaining and the reset come on as
// many lines each, the reset is that of the line with the least left (the
// spent quota's own, not another's longer one).
//
// Values must be non-negative decimal numbers; anything else is ignored, as
// is a window under a millisecond or over a year. Resets in the past are 0;
// resets are capped at 72 hours, as [ParseRetryAfter] caps its pause. It
// never panics.
//
// In the structured RateLimit header, one policy's state counts, with the
// RateLimit-Policy of the same name: the one that binds (the least left
// per second until its reset, of spent ones the one that resets last;
// the first when none gives both), whatever the order the provider lists
// them in. A field that policy leaves out is never filled from another's.
//
// Each family is read on its own, and the first one that gives anything is
// the answer: a limit from RateLimit-Limit is never paired with the window
// in the name of an unrelated X-MBX-USED-WEIGHT-1M, which would describe a
// quota the provider never announced.
func ParseQuota(h http.Header, now time.Time) (Quota, bool) {
	var r Quota
	name, state := bindingPolicy(strings.Join(h.Values("Ratelimit"), ", "), now)
	r.parseParams(state, now, false)
	r.parsePolicy(h.Get("Ratelimit-Policy"), name)
	r.parseSeparate(h, &separateFamilies[0], now) // the IETF drafts, old and new, are one family
	for i := 1; i < len(separateFamilies) && !r.known(); i++ {
		r.parseSeparate(h, &separateFamilies[i], now)
	}
	if !r.known() {
		r.parseHubSpot(h)
	}
	if !r.known() {
		r.parseSalesforce(h)
	}
	if !r.known() {
		r.parseShopify(h)
	}
	if !r.known() {
		r.parseBinance(h)
	}
	return r, r.known()
}

// maxRetryAfterSeconds is maxRetryAfter in whole seconds.
const maxRetryAfterSeconds = uint64(maxRetryAfter / time.Second)

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

// parseFraction parses delta-seconds with a fraction, DIGITS "." DIGITS,
// rounded up to the millisecond and capped at maxRetryAfter.
func parseFraction(s string) (time.Duration, bool) {
	whole, frac, ok := strings.Cut(s, ".")
	secs, ok1 := parseDigits(whole)
	_, ok2 := parseDigits(frac)
	if !ok || !ok1 || !ok2 {
		return 0, false
	}
	if secs >= maxRetryAfterSeconds {
		return maxRetryAfter, true
	}
	// The first three digits are the milliseconds; any digit after them
	// that is not 0 rounds them up.
	ms := uint64(0)
	for i := range 3 {
		ms *= 10
		if i < len(frac) {
			ms += uint64(frac[i] - '0')
		}
	}
	if len(frac) > 3 && strings.Trim(frac[3:], "0") != "" {
		ms++
	}
	return min(time.Duration(secs)*time.Second+time.Duration(ms)*time.Millisecond, maxRetryAfter), true
}

// secondsCapped converts whole seconds to a duration capped at
// maxRetryAfter.
func secondsCapped(secs uint64) time.Duration {
	if secs >= maxRetryAfterSeconds {
		return maxRetryAfter
	}
	return time.Duration(secs) * time.Second
}

// untilCapped returns t - now clamped into [0, maxRetryAfter]: a moment in
// the past means now.
func untilCapped(t, now time.Time) time.Duration {
	d := t.Sub(now) // saturates instead of overflowing
	return min(max(d, 0), maxRetryAfter)
}

// classifyStatus returns the class of an HTTP status code, as
// [Outcome.Class] documents it.
func classifyStatus(code int) Class {
	switch {
	case code == http.StatusTooManyRequests, code == http.StatusTeapot:
		return Throttled
	case code == http.StatusServiceUnavailable, code == statusSiteOverloaded:
		return Overloaded
	case code == http.StatusRequestTimeout:
		return Transient
	case code >= 100 && code < 400:
		return Success
	case code >= 400 && code < 500:
		return Permanent
	case code >= 500 && code < 600:
		return Transient
	}
	return Permanent
}

// statusSiteOverloaded is 529, which no RFC defines but providers send
// when shedding load, as others send 503.
const statusSiteOverloaded = 529

// classifyError classifies an attempt's error by its kind, as [Outcome]
// documents it.
func classifyError(err error) Class {
	if errors.Is(err, context.Canceled) {
		return Canceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Transient
	}
	f := scanError(err, 0)
	switch {
	case f&errTimeout != 0:
		return Transient
	case f&errTLS != 0:
		return Permanent
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return Transient
	case f&errDNSNotFound != 0:
		return Permanent
	case f&errNetwork != 0:
		return Transient
	}
	return http2Class(err.Error())
}

// http2Class classifies an error of net/http's HTTP/2 client by its text
// (its types are unexported): a stream reset the server sent or a
// connection going away is transient, as a reset connection is over HTTP/1.1 (it was Permanent: an
// aborted handler stopped the call after one send over HTTP/2, where over
// HTTP/1.1 it was retried and succeeded); ENHANCE_YOUR_CALM, HTTP/2's own
// "slow down", is overloaded. Anything else is permanent.
func http2Class(msg string) Class {
	// The provider's doing only: a reset it sent, a GOAWAY, a lost
	// connection. The client's own ("http2: request body larger than
	// specified content length", an invalid header value) fail the same
	// way every time.
	fromPeer := strings.Contains(msg, "stream error: ") && strings.Contains(msg, "received from peer") ||
		strings.Contains(msg, "http2: server sent GOAWAY") || strings.Contains(msg, "http2: client connection lost")
	switch {
	case !fromPeer:
		return Permanent
	case strings.Contains(msg, "ENHANCE_YOUR_CALM"):
		return Overloaded
	case strings.Contains(msg, "PROTOCOL_ERROR"), strings.Contains(msg, "FRAME_SIZE_ERROR"), strings.Contains(msg, "COMPRESSION_ERROR"):
		return Permanent // the exchange itself is broken: a retry meets it again
	}
	return Transient
}

// errKinds is what scanError found in an error tree.
type errKinds uint8

const (
	errTimeout     errKinds = 1 << iota // a net.Error whose Timeout is true
	errTLS                              // a TLS failure a retry would meet again
	errDNSNotFound                      // a *net.DNSError for a name that does not exist
	errNetwork                          // a *net.OpError or another *net.DNSError
)

// scanError walks the tree of err (Unwrap() error and Unwrap() []error, as
// errors.As does) and returns the kinds of errors in it. It is errors.As for
// several types in one pass, without errors.As's allocations.
func scanError(err error, depth int) (f errKinds) {
	for ; err != nil && depth < 100; depth++ {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			f |= errTimeout
		}
		switch e := err.(type) {
		case *tls.CertificateVerificationError, tls.RecordHeaderError, *tls.RecordHeaderError,
			x509.UnknownAuthorityError, x509.CertificateInvalidError, x509.HostnameError:
			// An untrusted, invalid or mismatched certificate, or a server
			// that does not speak TLS.
			f |= errTLS
		case *net.DNSError:
			if e.IsNotFound {
				f |= errDNSNotFound
			} else {
				f |= errNetwork
			}
		case *net.OpError:
			f |= errNetwork
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				f |= scanError(e, depth+1)
			}
			return f
		default:
			return f
		}
	}
	return f
}
