// Package checkpoint persists where collection stands, so a run resumes
// exactly where the last one stopped, never skips data and never lets two
// collectors advance the same cursor.
//
// A [Store] holds four things, each behind a small interface whose methods
// are contracts that every implementation passes as the
// [github.com/forage-go/forage/checkpoint/checkpointtest] suite:
//
//   - [Checkpoints]: commit-gated bookmarks, one per [Key] (a stream in a
//     [Mode]). A run commits a cursor only after its sink confirmed the data
//     durable. [Checkpoints.Commit] is a compare-and-swap on a version, so
//     a bookmark never regresses and a lost race returns [ErrConflict].
//     Cursors are opaque bytes, the provider's own page tokens where it has
//     them. [CatchUp] and [SteadyState] are separate bookmarks: a backfill
//     never moves the incremental cursor.
//   - [Leases]: an in-flight marker per stream with an owner and a TTL. A
//     second owner gets [ErrLeaseHeld] (a [*LeaseHeldError] naming the
//     holder and its expiry) and yields; an expired lease can be taken
//     over, and so can, at once, a lease whose holder the store knows is
//     dead (a file store at open, the PostgreSQL store when the holder's
//     session ends), so a restart after a crash never waits for itself. Every grant carries a fencing token that commits present,
//     so a holder that paused past its TTL and woke up after a takeover gets
//     [ErrLeaseLost] instead of writing over the new holder.
//   - [Gaps]: records of runs that stopped early (budget exhausted, or the
//     provider pushed back) with the cursor at the stop point and the reason,
//     for a scheduler to drain page by page and resolve.
//   - [Coverages]: per series, the time ranges the provider has answered
//     for, as a [Coverage] whose ranges merge on overlap or touch. A planner
//     asks [Coverage.Missing] what is left to fetch.
//
// One stream run, as the slice runner drives it:
//
//	lease, err := store.Acquire(ctx, stream, owner, ttl) // ErrLeaseHeld: yield
//	cp, err := store.Load(ctx, key)
//	for each slice after cp.Cursor:
//	    fetch, write to the sink, wait until durable
//	    cp, err = store.Commit(ctx, key, next, cp.Version, lease)
//	store.Release(ctx, lease)
//
// One implementation ships here, [LocalStore], for one process: in memory
// ([NewMemoryStore]), the embedded default, or in crash-safe files in a
// directory ([OpenFileStore]: temp file, fsync, rename, fsync the
// directory; checksummed, so corruption is an [ErrCorrupt] error that names
// the file and says how to recover, never empty progress). A PostgreSQL store for many processes lives in the
// pgstore module. Names (streams, series, owners, reasons) follow one rule
// in every store, [CheckName]. Stores read time from an injectable clock
// ([Config.Now]), so lease expiry is tested without sleeping.
//
// It also keeps one [forage.ProviderRecord] per provider key (the
// learned rate, the pause in force, an operator's status, counters) for the
// budget package's RecordStore: [LocalStore.LoadRecord] and
// [LocalStore.SaveRecord], whose contract is the
// [github.com/forage-go/forage/budget/budgettest] suite.
package checkpoint
