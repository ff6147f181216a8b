//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package durable

// SyncDir is a no-op: the standard library cannot sync a directory on this
// platform.
func SyncDir(string) error { return nil }
