package forage

import (
	"errors"
	"net/http"
	"time"
)

// Outcome is what one request attempt produced: the status, the error, the
// provider's Retry-After and quota headers, and the time it took. A host's
// fetcher returns it from the attempt func it gives the budget package's
// Provider.Do. Build it by hand, or from an HTTP exchange with [FromHTTP].
// Outcome is a plain value, safe to copy and share.
//
// [Outcome.Class] classifies the attempt from Status and Err: a status of
// 400 or more decides by itself (Err then only explains it, e.g. the
// provider's message), but for a 4xx that calls the request at fault (403,
// 404, 400, ...): a 403 that says when to come back (a Retry-After, or a
// quota with nothing left: GitHub answers its rate limits so) is
// [Throttled], and otherwise the host's mark on Err decides, if it made
// one (Google names its 403's rateLimitExceeded in the body: a host that
// reads it marks the error Throttled); a 3xx with an Err is a failure (a redirect the
// client did not follow to the end, e.g. a loop), classified by the host's
// mark or else permanent; otherwise a nil Err is a success and an error is
// classified by its kind (see [Outcome.Class]). A host that finds garbage in a 200
// body says what it means by marking the error with [Mark]: [Transient] (a
// truncated body: retry) or [Permanent] (a schema the code cannot read: do
// not retry). An unmarked error that is not a network error counts as
// permanent. An error that classifies itself, with a method
// Class() Class (the budget package's *Error: a request its budget
// refused to send), counts as marked so.
type Outcome struct {
	// Status is the HTTP status code, 0 when there was no response or the
	// attempt is not HTTP.
	Status int
	// Err is the attempt's error, nil on success.
	Err error
	// Latency is the attempt's duration. The budget package's Provider.Do
	// measures and sets it; any value the attempt sets is overwritten.
	Latency time.Duration
	// RetryAfter is the provider's Retry-After, zero when absent.
	RetryAfter time.Duration
	// Quota is the provider's account of its quota from the rate-limit
	// headers (IETF RateLimit-*, X-RateLimit-*, Binance
	// X-MBX-USED-WEIGHT-*); the zero value means none.
	Quota Quota
	// Header is the response's header, as [FromHTTP] sets it (nil for an
	// attempt that got no response), for a host's own reading of a
	// provider's signals (the budget package's Config.Classify: an AWS
	// API's x-amzn-ErrorType: ThrottlingException on a 400). forage reads
	// only what RetryAfter and Quota hold, and never logs, stores or
	// serves it.
	Header http.Header
}

// Class classifies the attempt, as the [Outcome] type documents, honouring
// the host's marks ([Mark]). FromHTTP(resp, err).Class() is the class of
// an HTTP exchange; Outcome{Status: code}.Class() that of a status code
// alone, Outcome{Err: err}.Class() that of an error alone.
//
// A status is classified so: 1xx–3xx Success; 429 and 418 Throttled; 503
// and 529 (a site overloaded: Anthropic's overloaded_error, Qualys)
// Overloaded; 408 and other 5xx Transient; other 4xx Permanent, but for
// the 403s and marks above. A code outside 100–599 is not HTTP and is
// Permanent.
//
// An unmarked error is classified by its whole Unwrap tree, as
// [errors.Is] and [errors.As] see it:
//   - [context.Canceled]: Canceled.
//   - [context.DeadlineExceeded] or any [net.Error] whose Timeout is true:
//     Transient, taken as the per-attempt timeout. Class cannot tell it
//     from the caller's own deadline: check the caller's ctx.Err() before
//     retrying.
//   - TLS certificate and record errors: Permanent (retrying meets the same
//     certificate).
//   - [io.EOF], [io.ErrUnexpectedEOF], [net.ErrClosed]: Transient (the
//     server closed the connection mid-exchange).
//   - [*net.DNSError]: Permanent when the name does not exist, otherwise
//     Transient.
//   - any other [*net.OpError] (connection refused, reset, unreachable):
//     Transient.
//   - anything else, a non-network error: Permanent. A host whose fetcher
//     returns its own retryable errors should classify them itself, with
//     [Mark].
func (o Outcome) Class() Class {
	switch {
	case o.Status < 0 || o.Status > 0 && o.Status < 100:
		return Permanent // not HTTP; 600 and up: classifyStatus, below
	case o.Status >= 400 && o.Status < 500 && classifyStatus(o.Status) == Permanent:
		// A refusal the status calls the request's fault, but which the
		// provider or the host explains as throttling.
		if o.Status == http.StatusForbidden && o.spent() {
			return Throttled
		}
		if c, ok := marked(o.Err); ok && c != Canceled {
			return c
		}
		return Permanent
	case o.Status >= 400 || (o.Status >= 300 && o.Err == nil):
		// The status decides: a host's mark on an error that explains a
		// 429 must not hide the throttling from the controller.
		return classifyStatus(o.Status)
	case o.Status >= 300: // a 3xx the host calls an error: never a success
		if c, ok := marked(o.Err); ok {
			return c
		}
		return Permanent
	case o.Err != nil:
		if c, ok := marked(o.Err); ok {
			return c
		}
		return classifyError(o.Err)
	}
	return Success
}

// Mark marks err as a failure of class c whatever its type, for
// [Outcome.Class] to read: Mark(err, Transient) for a failure worth
// retrying (e.g. a truncated body), Mark(err, Permanent) for one that
// retrying cannot fix (e.g. a body in a format the host cannot decode). An
// error is never a success: a mark of Success, or of an unknown class,
// reads as Permanent. [errors.Is] and [errors.As] see through the mark. It
// returns nil for a nil err.
func Mark(err error, c Class) error {
	if err == nil {
		return nil
	}
	if c == Success || c > Canceled {
		c = Permanent
	}
	return &markedError{err: err, class: c}
}

// spent reports whether o says when to come back: a Retry-After, or a
// quota with nothing left. A 403 that does is the provider's rate limit
// (GitHub answers its limits with 403 as often as with 429, with
// x-ratelimit-remaining: 0 or a retry-after), not a request it forbids.
func (o Outcome) spent() bool {
	left, ok := o.Quota.Left()
	return o.RetryAfter > 0 || ok && left < 1
}

// marked returns the class a host gave err with [Mark], or that an error
// in its tree gives itself with a Class method (a budget package's stop:
// a request its budget refused to send, a pause or a spent quota, is a
// refusal, not the permanent failure of an error of unknown kind): the
// outermost's, as a mark is such an error too. (A mark was looked for
// first, and one inside a stop, on its last attempt's error, hid the
// stop's class: a spent request cap read as transient.) It is a function
// of its own so the success path does not allocate the target errors.As
// needs.
func marked(err error) (Class, bool) {
	var self interface{ Class() Class }
	if errors.As(err, &self) {
		if c := self.Class(); c != Success && c <= Canceled {
			return c, true
		}
	}
	return 0, false
}

// markedError is an error the host classified itself.
type markedError struct {
	err   error
	class Class
}

func (e *markedError) Error() string { return e.err.Error() }
func (e *markedError) Unwrap() error { return e.err }

// Class returns the class err was marked with: [Outcome.Class] reads it
// as it reads any error that classifies itself.
func (e *markedError) Class() Class { return e.class }
