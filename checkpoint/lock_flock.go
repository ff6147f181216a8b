//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forage-go/forage/internal/durable"
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
	if err := durable.Lock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, durable.ErrLocked) {
			return nil, false, fmt.Errorf("%w: %s is open in another store", ErrLocked, filepath.Dir(path))
		}
		return nil, false, fmt.Errorf("checkpoint: locking %s: %w", path, err)
	}
	return f, true, nil
}
