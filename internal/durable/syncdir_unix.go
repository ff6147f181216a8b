//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package durable

import "os"

// SyncDir makes the entries of dir durable: a file created or renamed in
// it keeps its name after a power loss once SyncDir returns nil.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
