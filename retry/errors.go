package retry

import (
	"errors"

	"github.com/forage-go/forage/internal/cfgerr"
)

// ErrInvalidConfig is wrapped by every error [NewBudget] and [NewBackoff]
// return for an invalid configuration, so callers can test for it with
// [errors.Is]; the message names the field, the rule and the value.
var ErrInvalidConfig = errors.New("retry: invalid config")

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("retry", ErrInvalidConfig)

// ErrBudgetExhausted is the error for a retry refused because the run's
// retry budget held less than one token ([Budget.Withdraw] returned false):
// the caller must not retry now, and should defer the remaining work rather
// than fail it. The budget package wraps it in the error of such a call.
var ErrBudgetExhausted = errors.New("retry: retry budget exhausted")
