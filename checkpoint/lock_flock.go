//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir opens path and takes an exclusive, non-blocking flock on it. The
// lock belongs to the open file, so it also excludes a second FileStore in
// the same process, and the kernel drops it when the process dies: a crash
// never leaves the directory locked. exclusive is true: whoever wrote the
// directory before has closed it or died.
func lockDir(path string) (f *os.File, exclusive bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, fmt.Errorf("%w: %s is open in another FileStore", ErrLocked, filepath.Dir(path))
		}
		return nil, false, fmt.Errorf("checkpoint: locking %s: %w", path, err)
	}
	return f, true, nil
}
