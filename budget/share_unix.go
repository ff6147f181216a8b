//go:build unix

package budget

import (
	"errors"
	"syscall"
)

// processGone reports whether no process with pid runs on this machine.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
