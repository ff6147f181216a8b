package checkpoint

import (
	"context"
	"time"
)

// Config configures a [MemoryStore] or a [FileStore]. The zero Config is
// valid and means all defaults.
type Config struct {
	// Now is the store's clock. It decides lease expiry (a lease is live
	// while Now() is before its Expires), computes Expires = Now()+ttl, and
	// stamps Checkpoint.UpdatedAt and Gap.Created. Inject a fake clock in
	// tests; the checkpointtest suite does. Defaults to time.Now.
	Now func() time.Time
}

// MemoryStore is a [Store] kept in memory: the embedded default for a single
// process, for tests, and the reference the other stores are checked
// against. Its state dies with the process.
//
// MemoryStore is safe for concurrent use.
//
// The zero MemoryStore is not usable (its methods panic): make one with [NewMemoryStore].
type MemoryStore struct {
	c *core
	// records is guarded by c.mu; see record.go.
	records recordBook
	// shares and watchers are guarded by c.mu; see UpdateShares and
	// WatchShares.
	shares   map[string][]byte
	watchers map[string][]*shareWatch
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore. It cannot fail: no Config
// value is invalid.
func NewMemoryStore(cfg Config) *MemoryStore {
	return &MemoryStore{c: newCore(cfg.Now, nil), records: recordBook{}, shares: map[string][]byte{}}
}

// Load implements [Checkpoints.Load].
func (m *MemoryStore) Load(ctx context.Context, key Key) (Checkpoint, error) {
	return m.c.load(ctx, key)
}

// Commit implements [Checkpoints.Commit].
func (m *MemoryStore) Commit(ctx context.Context, key Key, cursor []byte, expect int64, lease Lease) (Checkpoint, error) {
	return m.c.commit(ctx, key, cursor, expect, lease)
}

// Acquire implements [Leases.Acquire].
func (m *MemoryStore) Acquire(ctx context.Context, stream, owner string, ttl time.Duration) (Lease, error) {
	return m.c.acquire(ctx, stream, owner, ttl)
}

// Renew implements [Leases.Renew].
func (m *MemoryStore) Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error) {
	return m.c.renew(ctx, lease, ttl)
}

// Release implements [Leases.Release].
func (m *MemoryStore) Release(ctx context.Context, lease Lease) error {
	return m.c.release(ctx, lease)
}

// AddGap implements [Gaps.AddGap].
func (m *MemoryStore) AddGap(ctx context.Context, gap Gap) (Gap, error) {
	return m.c.addGap(ctx, gap)
}

// ListGaps implements [Gaps.ListGaps].
func (m *MemoryStore) ListGaps(ctx context.Context, q GapQuery) ([]Gap, error) {
	return m.c.listGaps(ctx, q)
}

// ResolveGap implements [Gaps.ResolveGap].
func (m *MemoryStore) ResolveGap(ctx context.Context, id int64) error {
	return m.c.resolveGap(ctx, id)
}

// AddCoverage implements [Coverages.AddCoverage].
func (m *MemoryStore) AddCoverage(ctx context.Context, series string, r Range) error {
	return m.c.addCoverage(ctx, series, r)
}

// Coverage implements [Coverages.Coverage].
func (m *MemoryStore) Coverage(ctx context.Context, series string) (Coverage, error) {
	return m.c.coverage(ctx, series)
}
