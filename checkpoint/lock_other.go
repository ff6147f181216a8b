//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package checkpoint

import (
	"fmt"
	"os"
)

// lockDir opens the lock file without locking it: this platform has no
// flock in the standard library, so keeping one file store per directory is
// the host's job here. exclusive is false: another process may have the
// directory open, so the leases found in it may be live.
func lockDir(path string) (f *os.File, exclusive bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: %w", err)
	}
	return f, false, nil
}
