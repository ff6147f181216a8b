package retry

import "time"

// Ceiling exposes the upper bound of a Backoff's sleep before retry n to the
// tests of package retry_test.
func Ceiling(b *Backoff, n int) time.Duration { return b.ceiling(n) }
