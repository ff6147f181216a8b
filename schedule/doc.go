// Package schedule runs many collection jobs over many providers: fresh
// data first, history when a provider is idle, never more at once than the
// limits allow, and never before a provider's rate-limit pause has ended.
//
// # Streams
//
// The usual job is a stream of records moved forward resumably: a host
// declares each one with [AddStream] (a [Stream]: its name, its provider,
// a Source for its history and one for its head, a Sink) and runs the
// scheduler. The scheduler makes the stream's jobs (a backfill, an
// incremental job every Every), maps each kind to the stream's checkpoint
// mode (backfill to catch-up, incremental and refresh to steady state, gap
// fill to draining the gap records), runs it through a
// [github.com/forage-go/forage/slice] runner whose lease carries the job's
// lease owner, and reads the run's report itself:
//
//	the run ...                         the job
//	caught up (backfill)                success
//	caught up (incremental)             idle until its next cycle
//	used up its RunFor                  queued, due again at once (head first)
//	stopped: budget or source pressure  as in the outcome table below
//	found the stream held elsewhere     queued until the holder's lease ends
//	                                    (within [Requeue, PressureWait]): a yield
//	                                    is neither a success nor a failure
//	failed                              failed, backed off
//
// Jobs of one stream never run at once: they would contend for its
// checkpoint and lease ([JobStore.Claim] leases one job per stream). A
// backfill therefore runs in turns of at most RunFor, so the stream's
// incremental job, which goes first when due, waits at most one turn.
// Example_streams is the whole host: many streams over many providers,
// resumable, head first, backfill when idle.
//
// Jobs that are not streams (a crawl, an export) are run by the host's
// [Worker], given to [New].
//
// # Jobs
//
// A [Job] is one stream's recurring or resumable work, identified by
// (Provider, Kind, Stream), so adding it twice is an idempotent upsert and
// there is at most one pending run per stream and kind. The kinds, in their
// default priority order (lower runs first):
//
//	gap_fill     10  refetch the holes earlier runs left; deleted when done
//	incremental  20  new data at the head, every Interval (± Jitter)
//	refresh      30  metadata such as markets, every Interval (6–24h)
//	backfill     40  history towards the earliest data; success when done
//
// Refresh ranks after incremental work: a new listing matters less than a
// late candle, and a refresh is one cheap request every few hours.
// Backfills and gap fills run until their run reports them done (a stream
// caught up, a [Worker]'s [Result.Done]): the run, not the configuration,
// discovers where a provider's history begins.
//
// # Picking the next job
//
// Each pass of [Scheduler.Run] decides which due jobs start. Due jobs are
// ranked by NextRun + Priority × Aging: strict priority for jobs due
// together, and a job waiting Aging longer gains a point, so low-priority
// work is never starved by fresher work of its class (head work, or
// backfills; see below for how the two share a provider). Within that
// order a job starts only if
//
//   - fewer than MaxRunning jobs run in this scheduler, and fewer than
//     MaxPerProvider of its provider run anywhere (live leases in the
//     store), so one slow provider cannot hold every slot;
//   - its provider is not paused and not cooling down;
//   - it is head work, or it is a backfill and its provider has no head
//     job due or running (head first, tail when idle) and
//     [Config.Spare] says the provider has budget to spare. Under
//     saturation backfills wait; fresh data does not. Aging does not lift
//     this rule: a provider whose head work never idles (a cursor feed
//     whose backlog never drains: each turn that ends with more to fetch
//     is due again at once) runs none of its backfills until it does.
//
// The store does the picking ([JobStore.Claim]), so the rule holds across
// processes sharing a database, and the memory store indexes due jobs per
// provider, so a decision never scans every job. Nothing is queued in
// memory: however many jobs are added, the scheduler holds only its
// running jobs.
//
// # Outcomes
//
// What a run returns (a [Worker]'s result, or what the scheduler read
// from a stream's report, see Streams) decides what happens next:
//
//	result                      state               next run                      provider
//	nil, refresh / incremental  idle                last due + Interval ± Jitter  -
//	nil, backfill / gap fill    queued              now + Requeue                 -
//	nil + Done, backfill        success             never (run now re-arms it)    -
//	nil + Done, gap fill        (deleted)           -                             -
//	budget exhaustion           queued              now + Requeue                 no cool-down
//	source pressure             waiting_rate_limit  Error.Until (*)               cooled until then
//	  ... the provider failing  failed (counted)    Error.Until (*)               cooled until then
//	  (circuit_open, or unavailable with its breaker open)
//	  ... unavailable, breaker  failed (counted)    the later of Error.Until (*)  -
//	  closed (the job's alone)                      and the backoff (**)
//	other error                 failed              now + Backoff × 2^(n-1) (**)  -
//	interrupted (cancellation)  queued              unchanged: due at once        -
//	turn over (a stream)        queued              now                           -
//	turn over, nothing done     queued              the provider's next slot      -
//	  ... and no slot to wait   failed              now + Backoff × 2^(n-1) (**)  -
//	behind (a stream)           queued              Report.Until (1 s on at least) -
//	yield (LeaseHeldError)      queued              holder's lease end (***)      -
//
// (*) now + PressureWait when the error names no end (an operator's pause,
// which has none: now + 5 s at most, to see a resume soon); never sooner
// than now + Requeue, so that a run failing at once cannot spin. (***) within [now +
// Requeue, now + PressureWait]: the holder may finish sooner. (**) n is the
// number of consecutive failures; capped at MaxBackoff; only a success
// resets n. A done gap fill that changed during its run (new work upserted
// into it, paused, rescued elsewhere) is kept, as if unfinished.
//
// The run's error decides the outcome even when the scheduler
// interrupted the run: only a cancellation (context.Canceled,
// [ErrInterrupted], a [budget.Error] with ReasonCanceled) counts as
// interrupted, so source pressure met by a run being paused still cools
// its provider. A context error of the runner's own while the run's
// context is alive (a Sink's statement timeout, a Source's client
// closed) is a failure, not a cancellation: read as one, it was run
// again at once, with no failure counted nor reason kept, for good. A job paused during its run stays paused whatever the
// outcome, which still sets its stats and next run. Every outcome releases
// the lease and counts the run.
//
// Budget exhaustion ([forage.Reason.Exhausted]: request cap, deadline,
// RunTimeout) is a planned hand-off: the remainder is due
// again soon and nothing cools. Source pressure
// ([forage.Reason.SourcePressure]: throttled, quota, unavailable, circuit
// open, banned, paused) cools that provider only: none of its jobs starts before the
// pause ends, and the job that met it resumes exactly then. A known quota
// that is spent ([forage.ReasonQuota]: a [budget.Limit] whose next slot is
// further off than the call may wait) is such a planned wait: the run
// stops at once, before any request, and the job waits in
// waiting_rate_limit until the limit admits a request again, then resumes
// from its cursor, rather than blocking a slot or re-running every
// Requeue. Cool-downs and provider pauses ([Scheduler.SetProviderPaused]) live
// in one Scheduler's memory, per process: other processes sharing the
// store do not see them.
// What holds a provider back across processes is the budget package's
// sharing of its rate through a store ([github.com/forage-go/forage/budget.Config.Shares],
// such as the PostgreSQL store), not the scheduler. A job that fell behind skips the cycles it missed rather than
// running back to back.
//
// # Control
//
// Jobs are paused and resumed ([Scheduler.SetPaused]), run now
// ([Scheduler.RunNow]) and deleted ([Scheduler.Delete]), and listed and read
// through the job store ([Scheduler.Store]: List, Get); providers are paused
// and resumed with [Scheduler.SetProviderPaused]. A running job that is paused or deleted, or whose provider is
// paused, has its run's context cancelled with cause [ErrInterrupted]: a
// slice runner stops at its next slice boundary and the run is not counted
// as a failure. [Scheduler.SnapshotPage] gives the metrics, with a
// page of providers. Package [github.com/forage-go/forage/admin] serves all of it
// as JSON, plus an HTML status page, behind an Authorize hook of the
// host's. Errors the scheduler stores have their URLs' query values and
// userinfo, and the values of well-known secret keys (apikey=…, token: …,
// Authorization: Bearer …), redacted. Provider keys and stream names meet the name rule of every
// store ([github.com/forage-go/forage/checkpoint.CheckName]).
//
// # Storage
//
// [JobStore] has six methods, each a contract tested by
// [github.com/forage-go/forage/schedule/jobstoretest]. Time is always an
// argument, so the suite controls it and SQL stores take it as a
// parameter. [NewMemoryJobStore] makes the default; a PostgreSQL store
// claims with FOR UPDATE SKIP LOCKED, and a crashed scheduler's jobs are
// rescued when their leases expire.
package schedule
