package schedule

import (
	"strings"

	"github.com/forage-go/forage/checkpoint"
)

// checkName applies the name rule every forage store applies
// ([checkpoint.CheckName]: 1 to [checkpoint.MaxNameLen] bytes of valid
// UTF-8 with no control character) to the name field holds, so a job a
// memory store accepts is one every store accepts, and a provider key or
// stream name cannot forge log lines or terminal output. The error wraps
// [ErrInvalid] and names field.
func checkName(field, name string) error {
	err := checkpoint.CheckName(field, name)
	if err == nil {
		return nil
	}
	// The checkpoint message reads "<sentinel>: <field> <why> (got <q>)":
	// keep its why and its quoted value, under this package's sentinel.
	msg := strings.TrimPrefix(err.Error(), checkpoint.ErrInvalid.Error()+": "+field+" ")
	rule, got, ok := strings.Cut(msg, " (got ")
	if !ok {
		return invalid(field, msg, "?")
	}
	return invalid(field, rule, strings.TrimSuffix(got, ")"))
}
