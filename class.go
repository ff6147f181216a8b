package forage

import "strconv"

// Class is the outcome class of one request attempt: what the response or
// error says about the provider and whether a retry can help. Every part of
// forage reads an attempt through its Class: the retry loop
// ([Class.Retryable]), the adaptive rate (aimd), the circuit breaker and
// the stop [Reason] the budget package gives a call whose last attempt it
// was. The zero Class is Success. Class is a plain value, safe for
// concurrent use.
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
