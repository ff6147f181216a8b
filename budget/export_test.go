package budget

import (
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/retry"
)

// EvictAt runs one eviction pass at now, as Run does every IdleTTL/2, and
// returns how many providers it dropped: for the tests of package
// budget_test, which step the clock themselves.
func (r *Registry) EvictAt(now time.Time) int { return r.evictAt(now) }

// Len returns how many providers the registry holds, for the tests of
// package budget_test.
func (r *Registry) Len() int { return r.size() }

// StateOf returns what the controller of p (made by NewLocal) has learned:
// the rate, the ceiling, the pause in force.
func StateOf(p Provider) aimd.State { return p.(*local).ctl.State() }

// RestoreState resumes p (made by NewLocal) from s, as loading its record
// does: the pacer moves to the restored rate at once, and a pause still in
// force holds every call until it ends. An invalid state is an error
// wrapping aimd.ErrInvalidConfig, and nothing changes.
func RestoreState(p Provider, s aimd.State) error {
	l := p.(*local)
	if err := l.ctl.Restore(s); err != nil {
		return err
	}
	l.follow(time.Now())
	return nil
}

// RetriesOf returns the retry budget of run, or nil for a nil Run.
func RetriesOf(run *Run) *retry.Budget { return run.retryBudget() }

// LimitRate returns the rate l paces at after its burst, units/s (see
// Limit.shape).
func LimitRate(l Limit) float64 { _, r := l.shape(); return r }

// FrontierHosts returns how many hosts f's turn holds, forgotten ones
// not yet compacted away included.
func FrontierHosts(f *Frontier) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ring)
}

// FrontierLive returns how many hosts f knows.
func FrontierLive(f *Frontier) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hosts)
}
