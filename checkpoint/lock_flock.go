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
// never leaves the directory locked.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is open in another FileStore", ErrLocked, filepath.Dir(path))
		}
		return nil, fmt.Errorf("checkpoint: locking %s: %w", path, err)
	}
	return f, nil
}
