package budget

import "time"

// EvictAt runs one eviction pass at now, as Run does every IdleTTL/2, and
// returns how many providers it dropped: for the tests of package
// budget_test, which step the clock themselves.
func (r *Registry) EvictAt(now time.Time) int { return r.evictAt(now) }

// Len returns how many providers the registry holds, for the tests of
// package budget_test.
func (r *Registry) Len() int { return r.size() }
