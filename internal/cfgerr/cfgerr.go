// Package cfgerr builds the invalid-configuration errors of every forage
// package, so they all read one way:
//
//	aimd: Config.Decrease must be in (0, 1) (got 1.5)
//
// and each wraps its package's ErrInvalidConfig sentinel, so
// errors.Is(err, aimd.ErrInvalidConfig) tells a bad Config from other
// errors.
package cfgerr

import (
	"fmt"
	"reflect"
	"strings"
)

// Errors makes the configuration errors of one package. Its zero value is
// not useful; build one with [For]. It is a small value, safe to copy and
// for concurrent use.
type Errors struct {
	pkg      string // the message prefix, e.g. "aimd"
	sentinel error  // the package's ErrInvalidConfig
}

// For returns the Errors of the package named pkg (the message prefix,
// without the colon), whose errors wrap sentinel.
func For(pkg string, sentinel error) Errors { return Errors{pkg: pkg, sentinel: sentinel} }

// Must reports that field breaks rule:
// "<pkg>: <field> must <rule> (got <got>)". field names the field as a user
// writes it ("Config.Burst", "RegistryConfig.Defaults.Pacer"); rule reads
// after "must" ("be >= 0", "not be nil: use NewMemoryStore").
func (e Errors) Must(field, rule string, got any) error {
	return &Error{msg: fmt.Sprintf("%s: %s must %s (got %v)", e.pkg, field, rule, got), sentinel: e.sentinel}
}

// Wrap reports that a nested configuration in field was refused by another
// package's constructor: "<pkg>: <field>: <err>". The result matches both
// this package's sentinel and whatever err matches.
func (e Errors) Wrap(field string, err error) error {
	return &Error{msg: fmt.Sprintf("%s: %s: %v", e.pkg, field, err), sentinel: e.sentinel, cause: err}
}

// Reword reports err, another package's refusal of field whose message
// reads "<prefix><field> <rule> (got <got>)" (a checkpoint.CheckName
// error), in this package's words: "<pkg>: <field> <rule> (got <got>)". The
// result matches this package's sentinel and whatever err matches.
func (e Errors) Reword(prefix, field string, err error) error {
	msg := strings.TrimPrefix(err.Error(), prefix+field+" ")
	return &Error{msg: fmt.Sprintf("%s: %s %s", e.pkg, field, msg), sentinel: e.sentinel, cause: err}
}

// Error is an invalid-configuration error. It matches its package's
// sentinel and, for [Errors.Wrap], the nested error.
type Error struct {
	msg      string
	sentinel error
	cause    error
}

// Error returns the message.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the sentinel and, if any, the nested error.
func (e *Error) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// IsNil reports whether v is nil or an interface holding a nil pointer,
// func, map, channel or slice (a typed nil: a nil *T passed as an
// interface compares unequal to nil, and its first method call panics).
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Slice, reflect.Interface, reflect.UnsafePointer:
		return r.IsNil()
	}
	return false
}
