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

// ErrBudgetExhausted is returned by [Budget.TryWithdraw] when the run's retry
// budget holds less than one token: the caller must not retry now, and
// should defer the remaining work rather than fail it.
var ErrBudgetExhausted = errors.New("retry: retry budget exhausted")
