//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package durable

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockRetry is how long Lock retries a lock held elsewhere. A process
// that forks (os/exec) shares every open file with the child until the
// child's exec closes them, the file of a store closed meanwhile included,
// so a store closed and reopened during a fork elsewhere in the process
// finds its own lock briefly held. A live store holds its lock for good,
// so waiting a little longer only delays ErrLocked.
const lockRetry = 200 * time.Millisecond

// ErrLocked is wrapped by Lock's error when another open file holds the
// lock.
var ErrLocked = syscall.EWOULDBLOCK

// Lock takes an exclusive, non-blocking flock on f, retrying for up to
// lockRetry while another open file holds it. The lock belongs to the open
// file, so it also excludes a second open of the same file in the same
// process, and the kernel drops it when the process dies: a crash never
// leaves it held.
func Lock(f *os.File) error {
	deadline := time.Now().Add(lockRetry)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
