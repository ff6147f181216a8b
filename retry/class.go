package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
)

// Class is the outcome class of one request attempt: what the response or
// error says about the provider and whether a retry can help. The zero Class
// is Success. Class is a plain value, safe for concurrent use.
type Class uint8

// The outcome classes.
const (
	// Success: a 1xx, 2xx or 3xx response. Not retried.
	Success Class = iota
	// Throttled: the provider refused for rate (429 Too Many Requests), or
	// banned the client for a while (418, which Binance sends for an IP
	// ban). Retryable, after the Retry-After the provider gives.
	Throttled
	// Overloaded: the provider said it is unavailable (503). Retryable.
	Overloaded
	// Transient: a failure that may pass on its own: other 5xx, 408 Request
	// Timeout, an attempt timeout, a connection refused or reset, an
	// unexpected EOF, another network error. Retryable.
	Transient
	// Permanent: the request itself was refused (4xx other than 408, 418,
	// 429), or the error is not a network error (a bad URL, a TLS
	// certificate failure, an error from the caller's own code). Retrying
	// cannot help and would waste the budget.
	Permanent
	// Canceled: the caller's context was canceled; the caller gave up.
	// Never retried.
	Canceled
)

// Retryable reports whether an attempt of this class may be retried (within
// the budget): Throttled, Overloaded and Transient.
func (c Class) Retryable() bool {
	return c == Throttled || c == Overloaded || c == Transient
}

// String returns the class name in lower case ("throttled"), or "Class(n)"
// for an unknown value.
func (c Class) String() string {
	switch c {
	case Success:
		return "success"
	case Throttled:
		return "throttled"
	case Overloaded:
		return "overloaded"
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	case Canceled:
		return "canceled"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// ClassifyStatus returns the class of an HTTP status code: 1xx–3xx Success;
// 429 and 418 Throttled; 503 Overloaded; 408 and other 5xx Transient; other
// 4xx Permanent. A code outside 100–599 is not HTTP and is Permanent.
func ClassifyStatus(code int) Class {
	switch {
	case code == http.StatusTooManyRequests, code == http.StatusTeapot:
		return Throttled
	case code == http.StatusServiceUnavailable:
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

// Classify returns the class of one attempt's result. A non-nil err takes
// precedence over resp (the Go HTTP client returns one or the other);
// otherwise the class is that of resp.StatusCode. No response and no error
// is a broken fetcher: Permanent.
//
// Errors are classified by their whole Unwrap tree, as [errors.Is] and
// [errors.As] see it:
//   - [context.Canceled]: Canceled.
//   - [context.DeadlineExceeded] or any [net.Error] whose Timeout is true:
//     Transient, taken as the per-attempt timeout. Classify cannot tell it
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
//     returns its own retryable errors should classify them itself.
func Classify(resp *http.Response, err error) Class {
	if err != nil {
		return classifyError(err)
	}
	if resp == nil {
		return Permanent
	}
	return ClassifyStatus(resp.StatusCode)
}

// classifyError implements the error half of Classify.
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
	return Permanent
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
