package budget

import (
	"errors"
	"net/http"
	"time"

	"github.com/forage-go/forage/retry"
)

// Outcome is what one request attempt produced: the host's fetcher returns
// it from the attempt func it gives [Provider.Do]. Build it by hand, or from
// an HTTP exchange with [FromHTTP].
//
// The attempt is classified from Status and Err (see [retry.Classify]): a
// status of 300 or more decides by itself (Err then only explains it, e.g.
// the provider's message); otherwise a nil Err is a success and an error is
// classified by its kind. A host that finds garbage in a
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
func FromHTTP(resp *http.Response, err error) Outcome {
	o := Outcome{Err: err}
	if resp == nil {
		return o
	}
	o.Status = resp.StatusCode
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
	case o.Status >= 300:
		// The status decides: a host's mark on an error that explains a
		// 429 must not hide the throttling from the controller.
		return retry.ClassifyStatus(o.Status)
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
