package budget

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/forage-go/forage/internal/redact"
	"github.com/forage-go/forage/retry"
)

// Outcome is what one request attempt produced: the host's fetcher returns
// it from the attempt func it gives [Provider.Do]. Build it by hand, or from
// an HTTP exchange with [FromHTTP].
//
// The attempt is classified from Status and Err (see [retry.Classify]): a
// status of 400 or more decides by itself (Err then only explains it, e.g.
// the provider's message); a 3xx with an Err is a failure (a redirect the
// client did not follow to the end, e.g. a loop), classified by the
// host's mark or else permanent; otherwise a nil Err is a success and an
// error is classified by its kind. A host that finds garbage in a
// 200 body says what it means by wrapping the error: [Transient] (a
// truncated body: retry) or [Permanent] (a schema the code cannot read:
// do not retry). An unmarked error that is not a network error counts as
// permanent.
type Outcome struct {
	// Status is the HTTP status code, 0 when there was no response or the
	// attempt is not HTTP.
	Status int
	// Err is the attempt's error, nil on success.
	Err error
	// Latency is the attempt's duration. [Provider.Do] measures and sets it;
	// any value the attempt sets is overwritten.
	Latency time.Duration
	// RetryAfter is the provider's Retry-After, zero when absent.
	RetryAfter time.Duration
	// Limit is the provider's rate-limit headers (IETF RateLimit-*,
	// X-RateLimit-*, Binance X-MBX-USED-WEIGHT-*); the zero value means none.
	Limit retry.RateLimit
}

// FromHTTP builds an Outcome from a response and error as an
// [http.RoundTripper] or [http.Client.Do] returns them: the status, the
// Retry-After and rate-limit headers. It does not read or close the body.
//
// The error's message is redacted: net/http writes the whole request URL
// into it, query included (apikey=…&signature=…), and Outcome.Err ends up
// in [Error] messages, logs and stored job stats. Query values, userinfo
// and fragments become "REDACTED"; the scheme, host and path stay, and
// [errors.Is] and [errors.As] still reach the original error (a
// [*url.Error] stays one, with its URL redacted).
//
// A response that comes with an error is a redirect the client stopped
// following: net/http returns the last 3xx and "stopped after 10
// redirects" for a loop, or the error of a CheckRedirect. It is never a
// success: Err says so and is marked [Permanent] (following the same
// redirects again meets the same loop).
func FromHTTP(resp *http.Response, err error) Outcome {
	o := Outcome{Err: redact.Error(err)}
	if resp == nil {
		return o
	}
	o.Status = resp.StatusCode
	if err != nil {
		o.Err = Permanent(fmt.Errorf("budget: a redirect (HTTP %d) the client stopped following: %w", resp.StatusCode, o.Err))
	}
	now := time.Now()
	if v := resp.Header.Get("Retry-After"); v != "" {
		if d, ok := retry.ParseRetryAfter(v, now); ok {
			o.RetryAfter = d
		}
	}
	if rl, ok := retry.ParseRateLimit(resp.Header, now); ok {
		o.Limit = rl
	}
	return o
}

// class classifies the outcome, honouring the host's Transient and
// Permanent marks.
func (o *Outcome) class() retry.Class {
	switch {
	case o.Status >= 400 || (o.Status >= 300 && o.Err == nil):
		// The status decides: a host's mark on an error that explains a
		// 429 must not hide the throttling from the controller.
		return retry.ClassifyStatus(o.Status)
	case o.Status >= 300: // a 3xx the host calls an error: never a success
		if c, ok := marked(o.Err); ok {
			return c
		}
		return retry.Permanent
	case o.Err != nil:
		if c, ok := marked(o.Err); ok {
			return c
		}
		return retry.Classify(nil, o.Err)
	}
	return retry.Success
}

// marked returns the class a host gave err with [Transient] or [Permanent].
// It is a function of its own so the success path does not allocate the
// target errors.As needs.
func marked(err error) (retry.Class, bool) {
	var m *markedError
	if errors.As(err, &m) {
		return m.class, true
	}
	return 0, false
}

// markedError is an error the host classified itself.
type markedError struct {
	err   error
	class retry.Class
}

func (e *markedError) Error() string { return e.err.Error() }
func (e *markedError) Unwrap() error { return e.err }

// Transient marks err as a failure worth retrying (e.g. a truncated body),
// whatever its type. It returns nil for a nil err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: retry.Transient}
}

// Permanent marks err as a failure that retrying cannot fix (e.g. a body in
// a format the host cannot decode). It returns nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: retry.Permanent}
}
