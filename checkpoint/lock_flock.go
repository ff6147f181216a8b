//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockDir opens path and takes an exclusive, non-blocking flock on it. The
// lock belongs to the open file, so it also excludes a second file store in
// the same process, and the kernel drops it when the process dies: a crash
// never leaves the directory locked. exclusive is true: whoever wrote the
// directory before has closed it or died.
func lockDir(path string) (f *os.File, exclusive bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: %w", err)
	}
	if err := flock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, fmt.Errorf("%w: %s is open in another store", ErrLocked, filepath.Dir(path))
		}
		return nil, false, fmt.Errorf("checkpoint: locking %s: %w", path, err)
	}
	return f, true, nil
}

// lockRetry is how long flock retries a lock held elsewhere. A process
// that forks (os/exec) shares every open file with the child until the
// child's exec closes them, the lock file of a store closed meanwhile
// included, so a store closed and reopened during a fork elsewhere in the
// process finds its own lock briefly held. A live file store holds its lock
// for good, so waiting a little longer only delays ErrLocked.
const lockRetry = 200 * time.Millisecond

// flock takes an exclusive, non-blocking flock on f, retrying for up to
// lockRetry while another open file holds it.
func flock(f *os.File) error {
	deadline := time.Now().Add(lockRetry)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
