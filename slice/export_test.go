package slice

import "github.com/forage-go/forage/checkpoint"

// WindowsForTest exposes windows to the external tests.
var WindowsForTest = windows

// GapReasonForTest exposes gapReason to the external tests.
var GapReasonForTest = gapReason

// KeyForTest returns the bookmark r advances: its stream in its mode.
func KeyForTest[R any](r *Runner[R]) checkpoint.Key { return r.key }

// OwnerForTest returns the owner name r leases the stream with (the
// configured one, or the default New made).
func OwnerForTest[R any](r *Runner[R]) string { return r.cfg.Owner }
