package slice_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// faultStore: a checkpoint.Store with injected failures, which also checks
// every commit against the sink and the lease grants.

// commitRec is one successful commit the faultStore saw.
type commitRec struct {
	key    checkpoint.Key
	cursor int
	lease  checkpoint.Lease
}

// faultStore wraps a Store with injected failures: a write fails either
// before it is applied or after (applied, but reported as an I/O error).
// check, if set, is called before every Commit and returns a violation.
type faultStore struct {
	checkpoint.Store
	chaos atomic.Pointer[chaos]
	check func(key checkpoint.Key, cursor []byte) error

	// alternate, if set, makes exclusive check that Commits and Sink
	// writes never overlap, and log them in ops; busy counts those under
	// way. For one runner.
	alternate bool
	busy      atomic.Int32
	// commitDelay is slept at the start of every Commit (synctest only).
	commitDelay time.Duration

	mu         sync.Mutex
	commits    []commitRec
	violations []string
	renews     int
	ops        []string // "write" and "commit", as each started (with alternate)

	// serial orders Acquire and Commit so that each commit can be checked
	// against the grants made before it: only the latest grant commits.
	serial   sync.Mutex
	maxToken int64
}

func (s *faultStore) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

// violationList returns the violations seen so far.
func (s *faultStore) violationList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.violations)
}

func newStore(now func() time.Time) *faultStore {
	return &faultStore{Store: checkpoint.NewMemoryStore(checkpoint.Config{Now: now})}
}

// fault returns (before, after): whether the op fails before or after it is
// applied.
func (s *faultStore) fault() (before, after bool) {
	c := s.chaos.Load()
	if !c.hit() {
		return false, false
	}
	if c.pick(2) == 0 {
		return true, false
	}
	return false, true
}

// exclusive marks op (a Commit or a Sink write) under way until the
// returned func is called, and records a violation if another one already
// is: a page's commit and the next page's write never overlap (a Sink and
// a Store may share a connection; with a TxSink, the txSink adapter writes
// and commits inside one transaction, and the same holds there).
func (s *faultStore) exclusive(op string) func() {
	if !s.alternate {
		return func() {}
	}
	if s.busy.Add(1) != 1 {
		s.violate("%s while a commit or a write was under way", op)
	}
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
	return func() { s.busy.Add(-1) }
}

// opLog returns the writes and commits started so far (with alternate).
func (s *faultStore) opLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ops)
}

func injected(op string) error { return fmt.Errorf("store %s: %w", op, errInjected) }

func (s *faultStore) Load(ctx context.Context, key checkpoint.Key) (checkpoint.Checkpoint, error) {
	if b, a := s.fault(); b || a {
		return checkpoint.Checkpoint{}, injected("load")
	}
	return s.Store.Load(ctx, key)
}

func (s *faultStore) Commit(ctx context.Context, key checkpoint.Key, c []byte, expect int64, l checkpoint.Lease) (checkpoint.Checkpoint, error) {
	defer s.exclusive("commit")()
	if s.commitDelay > 0 {
		time.Sleep(s.commitDelay)
	}
	if s.check != nil {
		if err := s.check(key, c); err != nil {
			s.violate("%v", err)
		}
	}
	before, after := s.fault()
	if before {
		return checkpoint.Checkpoint{}, injected("commit")
	}
	s.serial.Lock()
	cp, err := s.Store.Commit(ctx, key, c, expect, l)
	if err == nil && l.Token != s.maxToken {
		s.violate("commit of %v at %q by token %d while token %d is the latest grant", key, c, l.Token, s.maxToken)
	}
	s.serial.Unlock()
	if err == nil {
		s.mu.Lock()
		s.commits = append(s.commits, commitRec{key: key, cursor: position(c), lease: l})
		s.mu.Unlock()
	}
	if after {
		return checkpoint.Checkpoint{}, injected("commit")
	}
	return cp, err
}

func (s *faultStore) Acquire(ctx context.Context, stream, owner string, ttl time.Duration) (checkpoint.Lease, error) {
	before, after := s.fault()
	if before {
		return checkpoint.Lease{}, injected("acquire")
	}
	s.serial.Lock()
	l, err := s.Store.Acquire(ctx, stream, owner, ttl)
	if err == nil {
		s.maxToken = max(s.maxToken, l.Token)
	}
	s.serial.Unlock()
	if after && err == nil {
		return checkpoint.Lease{}, injected("acquire")
	}
	return l, err
}

func (s *faultStore) Renew(ctx context.Context, l checkpoint.Lease, ttl time.Duration) (checkpoint.Lease, error) {
	s.mu.Lock()
	s.renews++
	s.mu.Unlock()
	if b, _ := s.fault(); b {
		return checkpoint.Lease{}, injected("renew")
	}
	return s.Store.Renew(ctx, l, ttl)
}

func (s *faultStore) Release(ctx context.Context, l checkpoint.Lease) error {
	if b, _ := s.fault(); b {
		return injected("release")
	}
	return s.Store.Release(ctx, l)
}

func (s *faultStore) AddGap(ctx context.Context, g checkpoint.Gap) (checkpoint.Gap, error) {
	before, after := s.fault()
	if before {
		return checkpoint.Gap{}, injected("add gap")
	}
	g, err := s.Store.AddGap(ctx, g)
	if after && err == nil {
		return checkpoint.Gap{}, injected("add gap")
	}
	return g, err
}

func (s *faultStore) ListGaps(ctx context.Context, q checkpoint.GapQuery) ([]checkpoint.Gap, error) {
	if b, a := s.fault(); b || a {
		return nil, injected("list gaps")
	}
	return s.Store.ListGaps(ctx, q)
}

func (s *faultStore) ResolveGap(ctx context.Context, id int64) error {
	before, after := s.fault()
	if before {
		return injected("resolve gap")
	}
	if err := s.Store.ResolveGap(ctx, id); err != nil || !after {
		return err
	}
	return injected("resolve gap")
}

func (s *faultStore) AddCoverage(ctx context.Context, series string, r checkpoint.Range) error {
	before, after := s.fault()
	if before {
		return injected("add coverage")
	}
	if err := s.Store.AddCoverage(ctx, series, r); err != nil || !after {
		return err
	}
	return injected("add coverage")
}

// commitLog returns a copy of the successful commits so far.
func (s *faultStore) commitLog() []commitRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commits)
}

// pending returns the unresolved gaps of key, all pages.
func pending(tb tb, st checkpoint.Store, key checkpoint.Key) []checkpoint.Gap {
	tb.Helper()
	gaps, err := st.ListGaps(context.Background(), checkpoint.GapQuery{Stream: key.Stream, Mode: key.Mode})
	if err != nil {
		tb.Fatalf("ListGaps(%v): %v", key, err)
	}
	return gaps
}

// load returns key's checkpoint, bypassing faults.
func (s *faultStore) load(tb tb, key checkpoint.Key) checkpoint.Checkpoint {
	tb.Helper()
	cp, err := s.Store.Load(context.Background(), key)
	if err != nil {
		tb.Fatalf("Load(%v): %v", key, err)
	}
	return cp
}
