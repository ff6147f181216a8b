package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/internal/cfgerr"
	"github.com/forage-go/forage/internal/redact"
)

// ErrStopped is the sentinel every [*Error] matches with [errors.Is]: the call
// stopped for a [forage.Reason] rather than succeeding.
var ErrStopped = errors.New("budget: stopped")

// ErrInvalidConfig is wrapped by every configuration error of this package,
// and by the error of a call whose [CallOption] Weight is negative, or more
// than a weighted [Limit] carries in one call (its Burst, or half its Count
// when that is more): such a call could never be sent without breaking the
// limit, so it stops as permanent, with no attempt made.
var ErrInvalidConfig = errors.New("budget: invalid config")

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("budget", ErrInvalidConfig)

// Error is returned by [Provider.Do] and carries why the call stopped. Use
// [errors.As] to read it, or [ReasonOf] for the reason alone.
type Error struct {
	// Reason is why the call stopped.
	Reason forage.Reason
	// Provider is the key of the provider the call went to, if known.
	Provider string
	// Status is the HTTP status of the last attempt, 0 if none was made or it
	// ended without a response.
	Status int
	// Until is when the provider may be called again: the end of a pause
	// (Retry-After, a ban), of the breaker's open state, or, for
	// [forage.ReasonQuota], when the known limits admit the call's weight
	// again; for [forage.ReasonDeadline], when the next pacing slot comes,
	// if that is what the deadline cut short (so a host does not start its
	// next run before it); for [forage.ReasonCanceled] refused at once
	// because the call's ctx ends before the next pacing slot (or the
	// provider's pause) would come, when that is. Zero when unknown or
	// irrelevant (budget exhaustion, a ctx that has ended).
	Until time.Time
	// Err is the last attempt's error, if any.
	Err error

	sent bool // an attempt of the call was sent before it stopped (see Frontier.done)
}

// Error formats the stop as
// "budget: <provider>: <reason>[ (status N)][ until <RFC 3339 time>][: err]".
func (e *Error) Error() string {
	msg := "budget: "
	if e.Provider != "" {
		msg += e.Provider + ": "
	}
	msg += string(e.Reason)
	if e.Status != 0 {
		msg += fmt.Sprintf(" (status %d)", e.Status)
	}
	if !e.Until.IsZero() {
		msg += " until " + e.Until.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	if e.Err != nil {
		// Redacted: the attempt's error may be the host's own, built with
		// the request URL in it (a body it could not decode), credential
		// included.
		msg += ": " + redact.String(e.Err.Error())
	}
	return msg
}

// Unwrap returns the last attempt's error, so errors.Is sees through a stop
// to, e.g., context.Canceled.
func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether the call stopped for a deadline: the run's or
// the context's ([forage.ReasonDeadline]), or one its last attempt met. A
// [Transport]'s caller that checks a *url.Error's Timeout sees it true, as
// over an [http.Transport].
func (e *Error) Timeout() bool {
	if e.Reason == forage.ReasonDeadline || errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// Class returns the class of an attempt that met this stop, which
// [forage.Outcome.Class] reads from an error that has it: the answer of
// forage.FromHTTP(resp, err) to a [Transport]'s error, out of any
// [Provider.Do]. A call stopped by the provider's pressure (throttled, a
// spent quota, a ban, an operator's pause) is [forage.Throttled]: a
// refusal, to send again at Until; an open breaker is [forage.Overloaded];
// a spent request cap is [forage.Canceled] (the run's own end, nothing of
// the provider); a failed pacer is [forage.Transient]. Any other stop is
// the class of its last attempt's status and error, and
// [forage.Permanent] with neither. (Read as an error of unknown kind, a
// request the budget refused to send during a provider's pause was a
// permanent failure: 95 in 2 minutes of a host's loop, each a URL given up.)
func (e *Error) Class() forage.Class {
	switch e.Reason {
	case forage.ReasonThrottled, forage.ReasonQuota, forage.ReasonBanned, forage.ReasonPaused:
		return forage.Throttled
	case forage.ReasonCircuitOpen:
		return forage.Overloaded
	case forage.ReasonRequestCap:
		return forage.Canceled
	case forage.ReasonPacer:
		return forage.Transient
	}
	if e.Status == 0 && e.Err == nil {
		switch e.Reason {
		case forage.ReasonDeadline, forage.ReasonUnavailable:
			return forage.Transient
		case forage.ReasonCanceled:
			return forage.Canceled
		}
		return forage.Permanent
	}
	if c := (forage.Outcome{Status: e.Status, Err: e.Err}).Class(); c != forage.Success {
		return c
	}
	return forage.Permanent
}

// Is reports whether target is [ErrStopped].
func (e *Error) Is(target error) bool { return target == ErrStopped }

// ReasonOf returns the [forage.Reason] carried by err, and false when err is
// nil or carries none.
func ReasonOf(err error) (forage.Reason, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, true
	}
	return "", false
}

// stopReason names why a call stops when an attempt of class c is its last:
// [forage.ReasonThrottled], [forage.ReasonUnavailable] (Overloaded and
// Transient), [forage.ReasonCanceled] or [forage.ReasonPermanent]
// (Permanent, or an unknown class). Success stops nothing: its reason is
// empty. A throttling that is a ban (Binance's 418) is
// [forage.ReasonBanned]; telling it apart is Do's rule (see [Config].Ban),
// as the class does not carry the status.
func stopReason(c forage.Class) forage.Reason {
	switch c {
	case forage.Success:
		return ""
	case forage.Throttled:
		return forage.ReasonThrottled
	case forage.Overloaded, forage.Transient:
		return forage.ReasonUnavailable
	case forage.Canceled:
		return forage.ReasonCanceled
	}
	return forage.ReasonPermanent
}
