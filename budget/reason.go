package budget

import (
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage/internal/cfgerr"
)

// Reason names why a call or a run stopped. Every stop has exactly one.
//
// Reasons fall in three families, and callers act on the family:
//
//   - budget exhaustion ([ReasonRequestCap], [ReasonDeadline],
//     [ReasonRetryBudget]): a planned hand-off. The run's envelope ran out;
//     the provider is fine. Re-queue the remainder soon and arm no cool-down.
//   - source pressure ([ReasonThrottled], [ReasonQuota], [ReasonUnavailable],
//     [ReasonCircuitOpen], [ReasonBanned]): the provider pushed back, or its
//     known quota is spent. Wait until it allows calls again ([Error.Until])
//     and cool this provider only.
//   - failure ([ReasonPermanent], [ReasonCanceled], [ReasonPacer]): the
//     request itself was refused (a 4xx other than 408/429), the caller gave
//     up, or the host's pacer failed.
type Reason string

// The reasons a call or a run stops.
const (
	// ReasonRequestCap: the run's MaxRequests attempts were used.
	ReasonRequestCap Reason = "request_cap"
	// ReasonDeadline: the run's wall clock ran out, or the next attempt
	// could not start before it (this provider's next pacing slot, or a
	// retry's backoff, falls after the deadline; another provider may still
	// have room: check [Run.Exhausted] before ending the whole run).
	ReasonDeadline Reason = "deadline"
	// ReasonRetryBudget: the run's retry budget had no token for a retry.
	ReasonRetryBudget Reason = "retry_budget"

	// ReasonThrottled: the provider answered 429 (or asked for a pause longer
	// than the call may wait, or longer than the run has left, other than a
	// ban's).
	ReasonThrottled Reason = "throttled"
	// ReasonQuota: a known [Limit] of the provider ([Config.Limits]) is
	// spent: the next request would wait for it longer than the call may
	// ([Config.MaxWait]), or until at or after the run's or the caller's
	// deadline. No request was sent and nothing was booked or counted
	// against the run; [Error.Until] is when the limits admit the call
	// again. It is source pressure that forage foresaw rather than a
	// refusal the provider answered (that is [ReasonThrottled]): a
	// scheduler waits until Until instead of calling again at once.
	ReasonQuota Reason = "quota"
	// ReasonUnavailable: the provider kept failing with 503, other 5xx,
	// timeouts or resets until the call gave up.
	ReasonUnavailable Reason = "unavailable"
	// ReasonCircuitOpen: the provider's circuit breaker is open; no request
	// was sent.
	ReasonCircuitOpen Reason = "circuit_open"
	// ReasonBanned: the provider answered 418 (Binance's IP ban) or otherwise
	// said the client is banned for a while, or the call came during the
	// pause such a ban imposed (see [Config.BanPause]), in this process or,
	// through a [PauseStore], an earlier one.
	ReasonBanned Reason = "banned"

	// ReasonPermanent: the provider refused the request itself (a 4xx other
	// than 408 and 429, or an error the attempt marked permanent). Retrying
	// cannot help.
	ReasonPermanent Reason = "permanent"
	// ReasonCanceled: the caller's context ended.
	ReasonCanceled Reason = "canceled"
	// ReasonPacer: the host's [Pacer] ([Config.Pacer], e.g. one shared
	// through a database) failed with an error of its own ([Error.Err]):
	// no request was sent, and it is neither the provider's verdict nor the
	// run's budget. Call again once the pacer is back.
	ReasonPacer Reason = "pacer"
)

// SourcePressure reports whether r means the provider pushed back, or its
// known quota is spent: throttled, quota, unavailable, circuit_open or
// banned.
func (r Reason) SourcePressure() bool {
	switch r {
	case ReasonThrottled, ReasonQuota, ReasonUnavailable, ReasonCircuitOpen, ReasonBanned:
		return true
	}
	return false
}

// Exhausted reports whether r is budget exhaustion: request_cap, deadline or
// retry_budget. Exhaustion is a planned defer, never a provider failure.
func (r Reason) Exhausted() bool {
	switch r {
	case ReasonRequestCap, ReasonDeadline, ReasonRetryBudget:
		return true
	}
	return false
}

// String returns the reason's wire name, e.g. "request_cap".
func (r Reason) String() string { return string(r) }

// ErrStopped is the sentinel every [*Error] matches with [errors.Is]: the call
// stopped for a [Reason] rather than succeeding.
var ErrStopped = errors.New("budget: stopped")

// ErrWeight is wrapped by the error of a call whose [Weight] exceeds the
// Burst of a weighted [Limit]: such a call could never be sent without
// breaking the limit, so it stops as permanent, with no attempt made.
var ErrWeight = errors.New("budget: weight exceeds a limit's burst")

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("budget: invalid config")

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("budget", ErrInvalidConfig)

// Error is returned by [Provider.Do] and carries why the call stopped. Use
// [errors.As] to read it, or [ReasonOf] for the reason alone.
type Error struct {
	// Reason is why the call stopped.
	Reason Reason
	// Provider is the key of the provider the call went to, if known.
	Provider string
	// Status is the HTTP status of the last attempt, 0 if none was made or it
	// ended without a response.
	Status int
	// Until is when the provider may be called again: the end of a pause
	// (Retry-After, a ban), of the breaker's open state, or, for
	// [ReasonQuota], when the known limits admit the call's weight again.
	// Zero when unknown or irrelevant (budget exhaustion).
	Until time.Time
	// Err is the last attempt's error, if any.
	Err error
}

// Error formats the stop as "budget: <provider>: <reason>[ (status N)][: err]".
func (e *Error) Error() string {
	msg := "budget: "
	if e.Provider != "" {
		msg += e.Provider + ": "
	}
	msg += string(e.Reason)
	if e.Status != 0 {
		msg += fmt.Sprintf(" (status %d)", e.Status)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the last attempt's error, so errors.Is sees through a stop
// to, e.g., context.Canceled.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is [ErrStopped].
func (e *Error) Is(target error) bool { return target == ErrStopped }

// ReasonOf returns the [Reason] carried by err, and false when err is nil or
// carries none.
func ReasonOf(err error) (Reason, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, true
	}
	return "", false
}
