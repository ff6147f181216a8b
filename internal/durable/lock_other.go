//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package durable

import (
	"errors"
	"os"
)

// ErrLocked is wrapped by Lock's error when another open file holds the
// lock; never, here.
var ErrLocked = errors.New("locked")

// Lock does nothing: this platform has no flock in the standard library,
// so keeping one open file is the host's job here.
func Lock(*os.File) error { return nil }
