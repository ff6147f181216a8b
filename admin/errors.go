package admin

import (
	"errors"

	"github.com/forage-go/forage/internal/argerr"
	"github.com/forage-go/forage/internal/cfgerr"
)

// The sentinel errors of this package. Every message starts with
// "admin: ".
var (
	// ErrInvalidConfig is wrapped by every error [New] returns for a bad
	// [Config]; the message names the field, the rule and the value.
	ErrInvalidConfig = errors.New("admin: invalid config")

	// ErrUnauthenticated, wrapped in the error a [Config.Authorize] hook
	// returns, makes the handler answer 401 (no or bad credentials, with a
	// WWW-Authenticate challenge) instead of 403 (known, but not allowed).
	ErrUnauthenticated = errors.New("admin: unauthenticated")

	// invalidConfig builds this package's configuration errors.
	invalidConfig = cfgerr.For("admin", ErrInvalidConfig)

	// errInvalid is the sentinel of the handler's own 400s (a query or
	// body value the scheduler never sees); the scheduler's own are
	// [schedule.ErrInvalid].
	errInvalid = errors.New("admin: invalid argument")
)

// invalid returns an error naming the request's field (in the API's
// terms), rule and value.
func invalid(field, rule string, got any) error {
	return argerr.New(errInvalid, field, rule, got)
}
