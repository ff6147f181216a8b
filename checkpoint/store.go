package checkpoint

import (
	"context"
	"time"
)

// Store is everything a stream run persists: bookmarks, leases, gap records
// and coverage. Implementations must be safe for concurrent use and pass
// [github.com/forage-go/forage/checkpoint/checkpointtest.Run].
//
// Rules common to every method:
//   - A done ctx makes the method fail with an error wrapping ctx.Err()
//     before it changes anything. A method that fails for any reason other
//     than an I/O error changed nothing.
//   - Argument errors wrap [ErrInvalid] and are reported before any other.
//   - Every name passed in (a stream, in a Key, a Lease, a GapQuery or
//     alone; a series; a lease owner; a gap reason) must pass [CheckName]:
//     1 to [MaxNameLen] bytes of valid UTF-8 without control characters.
//     Any other is an [ErrInvalid] error, in every store, so a name that
//     one store accepts is accepted by all and comes back unchanged after
//     a restart. "Empty stream" below is short for a stream that fails it.
//   - Byte slices passed in are copied; byte slices returned are the
//     caller's to keep and modify.
//   - Time-dependent decisions (lease expiry, UpdatedAt, Created) read the
//     store's own clock, which tests inject; callers never pass times in.
//   - After an I/O error the outcome may be unknown, as with any remote
//     store: Load (or list) to find out before retrying a write.
type Store interface {
	Checkpoints
	Leases
	Gaps
	Coverages
}

// Checkpoints holds the commit-gated bookmarks, one per (stream, mode).
//
// A run loads its bookmark, writes a slice to its sink, and only after the
// sink confirms durability commits the cursor after that slice. A crash in
// between replays one slice (sinks are idempotent); the bookmark never runs
// ahead of the data.
type Checkpoints interface {
	// Load returns the last committed checkpoint of key. A key never
	// committed is not an error: Load returns a Checkpoint with that Key,
	// Version 0, an empty Cursor and a zero UpdatedAt.
	//
	// Errors: [ErrInvalid] for an empty stream or an invalid mode.
	Load(ctx context.Context, key Key) (Checkpoint, error)

	// Commit stores cursor as key's new checkpoint if and only if key's
	// current version equals expect, and returns the new checkpoint, whose
	// Version is expect+1. It is a compare-and-swap: versions never regress,
	// and of many concurrent commits with the same expect exactly one wins.
	//
	// lease fences the write. A non-zero lease (Token > 0) must be the
	// stream's current grant: the latest Acquire for key.Stream, same Owner
	// and Token, not released. Expiry alone does not revoke it: a holder that
	// outlived its TTL may still commit until another owner takes the lease
	// over. The zero Lease commits unfenced, which is allowed only while the
	// stream has no unreleased lease (hosts that never lease).
	//
	// Commit is not idempotent: retrying a commit that succeeded returns
	// ErrConflict; Load and compare the cursor to tell the cases apart.
	//
	// Errors, in the order checked: [ErrInvalid] (empty stream, invalid
	// mode, expect < 0, lease.Token < 0, or a lease with a token for another
	// stream or with an empty owner);
	// [ErrLeaseLost] (a lease that is not the current grant); [ErrLeaseHeld]
	// (an unfenced commit on a leased stream); [ErrConflict] (the version is
	// not expect). Commit never changes the lease.
	Commit(ctx context.Context, key Key, cursor []byte, expect int64, lease Lease) (Checkpoint, error)
}

// Leases grants exclusive, expiring ownership of a stream (an in-flight
// marker), so that two collectors never advance the same cursor. Each grant
// carries a fencing token; see [Lease].
//
// A lease is live until the store's clock reaches Expires, or until the
// store learns that its holder died, whichever comes first: a file store
// ([OpenFileStore]) ends at open every lease granted before (its directory lock proves their
// holders gone), and a store shared by processes may end a lease when its
// holder's process or connection ends. Either way the end only permits
// takeover: until another owner acquires the stream, the old holder may
// still Renew and Commit, and once it is taken over, fencing refuses it. Tokens of one stream strictly increase
// with every grant, are persisted, and are never reused, even after release.
type Leases interface {
	// Acquire grants owner a lease on stream that expires ttl after the
	// store's now, with a token greater than every token granted before for
	// stream. It succeeds when the stream has never been leased, when the
	// last lease was released, or when it expired (a takeover: the old
	// holder's lease is lost from then on).
	//
	// Acquire is exclusive, whatever the owner: while a lease is live, every
	// Acquire fails, including one by the same owner (use Renew to extend).
	// Of many concurrent Acquires on a free stream exactly one wins.
	//
	// Errors: [ErrInvalid] (empty stream or owner, ttl <= 0); [ErrLeaseHeld]
	// (a live lease exists), as a [*LeaseHeldError] that names the holder
	// and its expiry.
	Acquire(ctx context.Context, stream, owner string, ttl time.Duration) (Lease, error)

	// Renew extends lease to expire ttl after the store's now and returns
	// the renewed lease (same Token). It succeeds while lease is the
	// stream's current grant, even if it has expired, as long as nobody took
	// it over. Renewing is idempotent apart from moving Expires.
	//
	// Errors: [ErrInvalid] (empty stream or owner, Token <= 0, ttl <= 0);
	// [ErrLeaseLost] (released, taken over, or never granted).
	Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error)

	// Release ends lease so that another owner may acquire the stream at
	// once. Releasing an already released lease is a no-op returning nil.
	// Release never touches a later grant.
	//
	// Errors: [ErrInvalid] (empty stream or owner, Token <= 0); [ErrLeaseLost] (a
	// later grant exists, i.e. the lease was taken over, or it was never
	// granted).
	Release(ctx context.Context, lease Lease) error
}

// Gaps records the holes runs leave behind when they stop early, so that a
// scheduler can re-enqueue the remainder without an operator.
type Gaps interface {
	// AddGap records gap as unresolved and returns it as stored, with ID and
	// Created assigned (the values passed in are ignored). It is not
	// idempotent: every call records a new gap.
	//
	// Errors: [ErrInvalid] (empty stream, invalid mode, empty reason, or a
	// non-zero Range that is empty or inverted).
	AddGap(ctx context.Context, gap Gap) (Gap, error)

	// ListGaps returns the unresolved gaps matching q, oldest first (by ID),
	// at most q.Limit of them when it is positive. Drain them by passing
	// the last ID returned as the next q.After until a page is empty; the
	// page size never stops the drain.
	//
	// Errors: [ErrInvalid] (a Stream that is neither empty nor a valid
	// name, a Mode that is neither zero nor valid, a negative After or
	// Limit).
	ListGaps(ctx context.Context, q GapQuery) ([]Gap, error)

	// ResolveGap marks gap id resolved: ListGaps no longer returns it.
	// Resolving a resolved gap is a no-op returning nil (idempotent).
	//
	// Errors: [ErrInvalid] (id <= 0); [ErrNotFound] (no gap was ever
	// recorded with that ID).
	ResolveGap(ctx context.Context, id int64) error
}

// Coverages persists, per series, the time ranges the provider has answered
// for (including answered-empty), merged as they are written.
type Coverages interface {
	// AddCoverage merges r into series' coverage: r is united with every
	// stored range it overlaps or touches, in one atomic step. It is
	// idempotent and commutative: adding the same ranges in any order, any
	// number of times, concurrently, stores the same coverage.
	//
	// Errors: [ErrInvalid] (empty series, or r empty or inverted).
	AddCoverage(ctx context.Context, series string, r Range) error

	// Coverage returns series' stored coverage. A series never covered is not
	// an error: the result is the empty Coverage.
	//
	// Errors: [ErrInvalid] (empty series).
	Coverage(ctx context.Context, series string) (Coverage, error)
}
