// Package slice runs one stream of a collection: it fetches the stream
// slice by slice through a [budget.Provider], writes each slice to the
// host's sink, and commits the checkpoint only once the sink says the slice
// is durable, so a run can stop anywhere and the next one resumes exactly
// there, with nothing lost and nothing passed.
//
// # Slices
//
// A [Slice] is the smallest replayable unit: one page, one time window, one
// request's worth. The host brings a [Source] (plans the slice after a
// cursor, fetches it with exactly one outbound request per attempt) and a
// [Sink] (writes a page durably and idempotently), or a [TxSink] (writes it
// and commits the checkpoint in one transaction). A [Runner] drives them
// ([Runner.Run]):
//
//	lease the stream ── held elsewhere? yield
//	load the checkpoint of (stream, mode)
//	for each slice after the cursor:
//	    budget check at the boundary (run.ExhaustedAt)
//	    fetch through Provider.Do
//	    Sink.Write, which returns once the page is durable
//	    Store.Commit the cursor after the slice
//	      (or both in one transaction: TxSink.Commit)
//	release the lease
//
// The lease is a [checkpoint.Leases] grant, the budget check
// [budget.Run.ExhaustedAt], the fetch [budget.Provider.Do], the commit
// [checkpoint.Checkpoints.Commit].
//
// The checkpoint is commit-gated: it never passes the last page the sink
// confirmed. A crash between the write and the commit replays what was
// written (one slice, or one batch of them, see below), which the sink's
// upsert absorbs: delivery is at least once, the effect exactly once.
// [JSONLines] is such a sink for any record with a natural key, in a file.
// A [TxSink] closes that window (see below). Commits are a compare-and-swap fenced by the lease's token,
// so a runner that stalled past its lease and was taken over cannot write
// over the new holder. Gap records are not fenced by the store, so the
// runner renews its lease before it writes or resolves any, and resolves
// only the cursor gaps that were pending when its run started.
//
// # Fetching ahead
//
// One slice at a time, a stream spends most of its time not calling the
// provider: it waits for the page, then for the durable write, then for the
// commit. A Source that also implements [Predictor] says where a slice will
// end if the provider answers it in full, and a stream run then plans and
// fetches up to [Config.Prefetch] slices ahead of the one it is writing
// ([NoPrefetch] turns it off). By default it starts at 8 and widens, up to
// 64, while the provider has fewer requests in flight than its rate times
// its round trip asks for: a provider allowing 200 requests a second from
// 100 ms away needs about 20 (simulated: 87 slices a second with 8 ahead,
// 189 with the widened window):
//
//	fetch k ─┐ fetch k+1 ─┐ fetch k+2 ─┐   (concurrent, through Provider.Do)
//	         write k, commit k; write k+1, commit k+1; ...   (in order)
//
// Commits stay commit-gated and in order. If page k ends elsewhere than
// predicted (a short page, a hole in the provider's history), the slices
// fetched after it are cancelled and discarded unwritten, and planning
// resumes from page k's actual Next: a wrong prediction costs requests,
// never data. [Runner.Fill] and the range fills of [Runner.Drain] fetch one
// slice at a time.
//
// # Group commit
//
// A sink and a store that sync to disk cost milliseconds per write and per
// commit, whatever they hold: one slice at a time, a stream could never go
// faster than one write and one commit per slice. So when the sink is free
// and several fetched pages are ready in order, a stream run makes them
// durable together ([Config.MaxBatch], default 64): one [Sink.Write] of a
// page that merges them (Records concatenated in order, the last Next, the
// union of the Covered ranges) and one Store.Commit of the last cursor:
//
//	fetch k..k+8 ─┐ fetch k+9..k+17 ─┐           (landing meanwhile)
//	              write k..k+8, commit k+8; write k+9..k+17, commit k+17
//
// It waits for the oldest page only, never for more pages to batch: a
// batch is what landed while the one before it was being made durable, so
// batches grow only while the sink and the store are slower than the
// provider. Write and Commit still alternate; a page is never split; a
// page that ended elsewhere than predicted ends its batch, as does a stop,
// and pages whose Covered ranges would leave a hole are not merged. A
// crash between the write and the commit replays the batch.
//
// # Exactly once: a transactional sink
//
// When the records and the checkpoint live in one database, a page and the
// cursor after it can become durable in one transaction. A host that sets
// [Config.TxSink] instead of [Config.Sink] gets that: where a run would
// call Sink.Write and then Store.Commit, it calls [TxSink.Commit] once,
// with the checkpoint key, the page (a batch, with group commit), the
// expected version and the lease:
//
//	TxSink.Commit(key, page, version, lease)   one transaction: the lease
//	    fence and the compare-and-swap of page.Next, and the page's records
//
// Both land or neither does: a failed write leaves the checkpoint where it
// was, and a lost compare-and-swap or lease ([checkpoint.ErrConflict],
// [checkpoint.ErrLeaseLost], returned as the run's error) leaves no record.
// A crash replays nothing, so delivery is exactly once, not only the
// effect. Everything else is as with a Sink: Config.Store still loads the
// checkpoint, leases the stream and keeps gaps and coverage (it must be the
// store the TxSink commits to), and pages that commit no checkpoint (fills)
// go through the TxSink's Write. pgstore.NewTxSink provides one on
// PostgreSQL, given the host's write of a page in a pgx.Tx.
//
// # Budget checks at boundaries, gaps on a stop
//
// The run's envelope (request cap, wall clock) is checked at slice
// boundaries, when a fetch starts, never inside one: an in-flight slice is
// finished, not torn, and with fetching ahead every slice before the one
// that stopped is still written and committed before the gap is recorded. When the
// budget is spent ([forage.Reason.Exhausted]: request_cap, deadline)
// or the provider pushes back or fails
// ([forage.Reason.SourcePressure]: throttled, quota, unavailable,
// circuit_open, banned, paused), the run stops, records a [checkpoint.Gap] at the last committed
// cursor with the reason, and returns a [Report] saying why: a planned
// hand-off, not an error. For source pressure the Report carries Until, when
// the provider may be called again. [Runner.Drain] recovers pending gaps
// page by page until none is left or the provider's safety stops it.
//
// # Catch-up and steady state
//
// A stream has two bookmarks ([checkpoint.CatchUp] for the historical
// backfill, [checkpoint.SteadyState] for new data), and a Runner advances
// exactly one of them: a catch-up run never moves the steady-state cursor.
//
// # Gap filling
//
// [PlanFill] is the gap-fill planner for series such as candles: from the
// [checkpoint.Coverage] a series already has, it plans the ranges that fill
// its holes and extend it back to the required history, newest first,
// never re-fetching what is covered and never the forming candle.
// [Runner.Fill] fetches such ranges without touching the checkpoint.
package slice
