package checkpoint

import (
	"context"
	"fmt"
	"time"
)

// Config configures a [LocalStore]. The zero Config is valid and means all
// defaults.
type Config struct {
	// Now is the store's clock. It decides lease expiry (a lease is live
	// while Now() is before its Expires), computes Expires = Now()+ttl, and
	// stamps Checkpoint.UpdatedAt and Gap.Created. Inject a fake clock in
	// tests; the checkpointtest suite does. Defaults to time.Now.
	Now func() time.Time
}

// LocalStore is a [Store] and a budget.RecordStore for one process (an
// in-memory budget.ShareStore, for processes simulated in one test, is
// budgettest.NewShareStore). Made with [NewMemoryStore] it
// keeps its state in memory: the embedded default, for tests, and the
// reference the other stores are checked against; its state dies with the
// process. Opened with [OpenFileStore] it keeps its state in crash-safe
// files in a directory, for a host without a database that must resume
// after a restart. Both run the same code and pass the same suites; only
// where a change is kept differs.
//
// Besides the [Store] methods it keeps one [forage.ProviderRecord] per
// provider key for the budget package's RecordStore ([LocalStore.LoadRecord],
// [LocalStore.SaveRecord]).
//
// LocalStore is safe for concurrent use. Writes are serialized.
//
// The zero LocalStore is not usable (its methods panic): make one with
// [NewMemoryStore] or [OpenFileStore].
type LocalStore struct {
	c    *core
	disk *diskDir // nil in memory
	// records is guarded by c.mu; see record.go.
	records recordBook
}

var _ Store = (*LocalStore)(nil)

// NewMemoryStore returns an empty [LocalStore] kept in memory. It cannot
// fail: no Config value is invalid.
func NewMemoryStore(cfg Config) *LocalStore {
	return newLocal(cfg, nil)
}

// newLocal returns an empty store that persists through disk (nil: none).
func newLocal(cfg Config, disk *diskDir) *LocalStore {
	var p persister // a nil *diskDir would be a non-nil persister
	if disk != nil {
		p = disk
	}
	return &LocalStore{c: newCore(cfg.Now, p), disk: disk, records: recordBook{}}
}

// Close ends the store: every later call fails with [ErrClosed]; closing
// again returns nil. A file store releases its directory lock, so another
// store may open the directory. Close does not wait: writes that returned
// are already durable.
func (s *LocalStore) Close() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.c.closed {
		return nil
	}
	s.c.closed = true
	if s.disk == nil {
		return nil
	}
	if err := s.disk.lock.Close(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Load implements [Checkpoints.Load].
func (s *LocalStore) Load(ctx context.Context, key Key) (Checkpoint, error) {
	return s.c.load(ctx, key)
}

// Commit implements [Checkpoints.Commit]. In a file store the new
// checkpoint is on disk before Commit returns.
func (s *LocalStore) Commit(ctx context.Context, key Key, cursor []byte, expect int64, lease Lease) (Checkpoint, error) {
	return s.c.commit(ctx, key, cursor, expect, lease)
}

// Acquire implements [Leases.Acquire]. In a file store the grant and its
// token are on disk before Acquire returns, so a token is never reused
// after a restart.
func (s *LocalStore) Acquire(ctx context.Context, stream, owner string, ttl time.Duration) (Lease, error) {
	return s.c.acquire(ctx, stream, owner, ttl)
}

// Renew implements [Leases.Renew].
func (s *LocalStore) Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error) {
	return s.c.renew(ctx, lease, ttl)
}

// Release implements [Leases.Release].
func (s *LocalStore) Release(ctx context.Context, lease Lease) error {
	return s.c.release(ctx, lease)
}

// AddGap implements [Gaps.AddGap].
func (s *LocalStore) AddGap(ctx context.Context, gap Gap) (Gap, error) {
	return s.c.addGap(ctx, gap)
}

// ListGaps implements [Gaps.ListGaps].
func (s *LocalStore) ListGaps(ctx context.Context, q GapQuery) ([]Gap, error) {
	return s.c.listGaps(ctx, q)
}

// ResolveGap implements [Gaps.ResolveGap].
func (s *LocalStore) ResolveGap(ctx context.Context, id int64) error {
	return s.c.resolveGap(ctx, id)
}

// AddCoverage implements [Coverages.AddCoverage].
func (s *LocalStore) AddCoverage(ctx context.Context, series string, r Range) error {
	return s.c.addCoverage(ctx, series, r)
}

// Coverage implements [Coverages.Coverage].
func (s *LocalStore) Coverage(ctx context.Context, series string) (Coverage, error) {
	return s.c.coverage(ctx, series)
}
