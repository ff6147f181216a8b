// Package argerr builds invalid-argument errors that know the field they
// are about, so that an API serving them (the admin handler) can name the
// field in its own terms while the message keeps the Go name:
//
//	schedule: invalid argument: Spec.Interval must be >= 0 (got -1s)
//
// Each error matches its package's ErrInvalid sentinel with [errors.Is].
package argerr

import (
	"errors"
	"fmt"
)

// Error is an invalid-argument error naming its field. It is a plain value,
// safe for concurrent use once built.
type Error struct {
	// Sentinel is the package's ErrInvalid; the message starts with it.
	Sentinel error
	// Field names the argument as a Go caller writes it ("Spec.Kind",
	// "Query.Limit", "id").
	Field string
	// Rule is what the value breaks ("must be >= 0").
	Rule string
	// Got is the value.
	Got any
}

// New returns an [*Error] wrapping sentinel that reports field breaking
// rule with got: "<sentinel>: <field> <rule> (got <got>)".
func New(sentinel error, field, rule string, got any) error {
	return &Error{Sentinel: sentinel, Field: field, Rule: rule, Got: got}
}

// Error returns the message.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s %s (got %v)", e.Sentinel, e.Field, e.Rule, e.Got)
}

// Is reports whether target is the sentinel.
func (e *Error) Is(target error) bool { return target == e.Sentinel }

// Field returns the Field of the first [*Error] in err's tree, and false if
// there is none.
func Field(err error) (string, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return "", false
	}
	return e.Field, true
}
