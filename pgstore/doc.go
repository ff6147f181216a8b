// Package pgstore runs forage's storage contracts on PostgreSQL (through
// pgx/v5), so that many processes on many machines collect together: a
// [checkpoint.Store] whose commits can share the host's transaction, a
// [budget.ShareStore] through which the processes calling one provider
// share its rate and its known limits, the provider records, and a
// [schedule.JobStore] from which many schedulers claim jobs.
//
// It is a module of its own (github.com/forage-go/forage/pgstore), so the
// core module stays free of database drivers.
//
// # Setting up
//
// [New] wraps a *pgxpool.Pool the host owns ([Open] dials one from a DSN);
// [Config.Schema] names the schema the tables live in ("forage" by
// default), so several stores can share a database. [Store.Migrate]
// creates and upgrades the schema: embedded, numbered, idempotent
// migrations applied in one transaction under an advisory lock, safe to
// call at every start-up from every process. A store whose schema was
// never migrated fails with [ErrNotMigrated], naming the schema.
//
// # Checkpoints, leases, gaps, coverage
//
// [Store] passes the checkpointtest suite unchanged. Every change is one
// statement (autocommit), atomic on the rows it touches:
//
//   - [Store.Commit] share-locks the stream's lease row, checks the fence
//     (a lease token must be the current, unreleased grant; an unfenced
//     commit needs a stream with no unreleased lease), then compares and
//     swaps the version, reporting ErrInvalid, ErrLeaseLost, ErrLeaseHeld,
//     ErrConflict in that order.
//   - [Store.Acquire] is an upsert that takes the stream over only if its
//     lease was released, has expired, or belongs to a process that died,
//     adding one to the token, which therefore grows forever and is never
//     reused. A lease is tied to its holder's life by a session-level
//     advisory lock on one extra connection per pool ([Config.NoLeaseSession]
//     turns it off): when the process dies, PostgreSQL ends the session, and
//     a restart takes the stream over at once (in tests, within tens of
//     milliseconds of a SIGKILL) instead of waiting out the TTL.
//   - Every name (stream, series, lease owner, gap reason) must pass
//     [checkpoint.CheckName]; any other is a checkpoint.ErrInvalid error
//     before the database is asked, never a raw SQLSTATE.
//   - [Store.AddGap] draws IDs from a single locked counter row, so IDs
//     follow commit order and paging with GapQuery.After never skips a gap.
//   - [Store.AddCoverage] unites the range with the series' multirange in
//     one upsert that holds the series' row lock: overlapping and touching
//     ranges merge on write, and concurrent adds serialize on the row.
//
// Lease expiry and the stamps (UpdatedAt, Created, Expires) use the store's
// clock, [Config.Now], at microsecond precision; ranges keep every
// nanosecond of any time.Time.
//
// # Exactly once
//
// A sink that writes to the same database commits the cursor in the same
// transaction as the records: [Store.CommitTx] inside the host's pgx.Tx
// (for one of its own, see [pgx.BeginFunc] on [Store.Pool]) runs the fence
// and the compare-and-swap, and the host's commit makes both durable or
// neither. A lost race or a failed write leaves no records and no
// checkpoint, and a crash never replays a slice. With a [slice.Runner],
// [NewTxSink] wraps a write function into a [slice.TxSink]
// ([slice.Config.TxSink]) that does exactly that for every page or batch
// the runner commits: the fence and the compare-and-swap first, then the
// write, in a transaction of its own.
//
// # Provider records
//
// [Store] implements budget.RecordStore (table provider_records, one row
// per provider key): a provider created by any process, including one
// started later, starts at the rate the collectors learned, and honours a
// pause a provider imposed (a Retry-After, a ban, a spent quota's reset),
// ending a call at once with the time to resume instead of waiting for
// it. A save never shortens a pause nor undoes an operator's
// status, whatever the order of the processes' saves.
//
// # Sharing a provider among processes
//
// [Store] implements budget.ShareStore (table provider_shares, one row
// per provider key): set it as [budget.Config.Shares] and every process
// holds a lease on a share of each provider's rate, renewed about once a
// second, and paces locally at it. The policy is the budget package's,
// in Go; the store keeps its small document and updates it with a read
// and a compare-and-swap write ([Store.UpdateShares]), so a process makes
// about one round trip a second per provider it calls, however many
// requests it sends. It is also a budget.ShareWatcher: a renewal that saved
// news (a pause the provider asked for, a cut of the rate, turns) announces
// it with NOTIFY ([Store.AnnounceShares]), and every process calling the
// provider hears it within milliseconds on a LISTEN connection of its own,
// one per store ([Store.WatchShares]):
//
//	reg, err := budget.NewRegistry(budget.RegistryConfig{
//		Defaults: budget.Config{Shares: store}, // one rate, split by leases, for every process
//		Records:  store,                        // the learned rate and the pause in force, across restarts
//	})
//
// # Jobs
//
// [Store.Jobs] returns a [schedule.JobStore], which passes the
// jobstoretest suite unchanged: point several [schedule.Scheduler]s at it
// and they share one set of jobs. A job is a row keyed by (provider, kind,
// stream), so Upsert is one INSERT … ON CONFLICT, and IDs come from a
// sequence, never reused. Update is a compare-and-swap on the version.
// Time is always the caller's (Claim's now), never the database's clock.
//
// Claim is one READ COMMITTED transaction. It ranks the providers by their
// best eligible job and locks the rows of the best ones in a providers
// table with FOR UPDATE SKIP LOCKED, reads their candidates afresh, asks
// [schedule.ClaimFilter.Tail] about backfills, and leases the chosen jobs
// with FOR UPDATE SKIP LOCKED, rechecking that each is still claimable. Claims on different providers thus run side by
// side; one provider's claims take turns, so its per-provider cap and the
// head-first rule hold across processes; and a claim never waits for
// another, skipping what the other holds. Jobs whose lease expired are
// claimable again: that is how a crashed scheduler's jobs are rescued, and
// its late writes then lose the compare-and-swap. A job's lease is tied to
// its holder's process as a stream's is (the same session): when the
// process dies, its leases end at once, so its jobs are rescued by the
// next claim and stop holding their providers' MaxPerProvider slots and
// their streams in every process, instead of for the rest of LeaseTTL (a
// minute by default). Such a lease also reads as ended (Get, List, every
// job the store returns: Lease.Until is then the job's last write, a time
// past), so [schedule.Scheduler.RunNow] queues a dead holder's job at once
// instead of answering ErrRunning. A claim that takes jobs, or a renewal,
// records the session after one ping on its connection; a claim tests a
// session only for a lease that has not expired. Ranking does not scan
// the backlog: the claim visits each group of a provider's jobs (head or
// backfill, one priority) with one index probe, so its cost grows with the
// number of providers and priorities, not with the number of due jobs.
//
// # Testing
//
// The package's tests need a server: scripts/pg-test.sh starts a
// throwaway one and sets FORAGE_PG_DSN. Without it they skip, except in CI
// (CI set), where they fail. Each test works in a schema of its own.
package pgstore
