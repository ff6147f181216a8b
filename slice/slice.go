package slice

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"

	"github.com/forage-go/forage/internal/cfgerr"
)

// ErrInvalidConfig is wrapped by every configuration error of this package:
// a [Config] that [New] rejects and a [FillPolicy] that [PlanFill]
// rejects.
var ErrInvalidConfig = errors.New("slice: invalid config")

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("slice", ErrInvalidConfig)

// ErrInvalidPage is wrapped by the error a run returns when the [Source]
// broke its contract: a page without a Next cursor, with an inverted
// Covered range, or whose Next goes back to a cursor the run passed (one
// of the last 1024 it started at or committed: a cursor that cycles would
// fetch and write the same pages for good). Nothing of such a page is
// written or committed.
var ErrInvalidPage = errors.New("slice: invalid page")

// Slice is the smallest replayable unit of a stream: one request's worth
// (one page, one time window). The [Source] plans it with [Source.Next]; the
// runner fetches it, writes it and only then commits the cursor after it, so
// a crash replays at most the slices of one write ([Config.MaxBatch]).
type Slice struct {
	// After is the cursor the slice starts after: the committed checkpoint
	// for a stream run, the position inside the range for a fill. Empty at
	// the very start. The runner sets it to the cursor it passed to
	// [Source.Next]; whatever Next put there is overwritten.
	After []byte
	// Range is the time window the slice asks for, when the source is
	// time-based (e.g. up to 1000 one-minute candles); the zero Range
	// otherwise. The runner only logs it; it is the Source's own note to
	// [Source.Fetch].
	Range checkpoint.Range
}

// Page is what one successful fetch of a [Slice] returned.
type Page[R any] struct {
	// Records are the records of the slice, in any order. May be empty (the
	// provider had nothing there); an empty page is not given to the Sink.
	Records []R
	// Next is the cursor after the slice: the provider's next-page token, or
	// a position the host encodes. Next equal to the slice's After, with no
	// Records, means the source made no progress: the stream is caught up
	// (or the fill range is done) and nothing is committed; with Records it
	// is an [ErrInvalidPage] error, nothing written (the next run would
	// fetch and write them again); at a stream's very start (After
	// empty) that is an empty Next with no Records, the answer of a
	// provider that has nothing yet. Otherwise required: an empty Next
	// after a non-empty After, or with Records, is an [ErrInvalidPage]
	// error, as is a Next the run already passed. The runner cannot tell
	// "nothing there" from "nothing sent": a Source whose provider answered
	// nothing where the Source expects data (a short or empty page inside
	// a history it knows, a count that does not add up) must not answer
	// with Next equal to After, which reads as caught up with a hole
	// behind; it returns an outcome that stops the run instead
	// (forage.Mark(err, forage.Transient) to try again, forage.Permanent
	// for a lie), and the checkpoint stays where it was. Likewise a
	// provider that answers the cursor it was given while it says more
	// follows (has_more true, next the same token): a stuck cursor, which
	// read as caught up would leave the stream idle at it for good; the
	// Source stops the run with an outcome that says so.
	Next []byte
	// Covered is the time range the provider answered for, even when it
	// returned no records (an empty answer proves there is nothing to fetch
	// there). Optional: the zero Range means unknown. With [Config.Series]
	// set, it is added to the series' coverage after the slice is durable.
	Covered checkpoint.Range
	// Last says the provider has nothing after this page for now (its
	// has_more is false, its next-page token null): a stream run commits
	// the page and is caught up, without asking after Next again (slices a
	// Predictor's fetch-ahead had under way are abandoned); the next run
	// starts from Next, which the last page must set too (a provider's
	// last page often has no next-page token: use the position after its
	// last record, e.g. that record's id, in a form the Source reads
	// back; with opaque tokens, this page's own token and its last
	// record's id, where Fetch asks with the token again and keeps only
	// the records after that id, so nothing is written or counted twice).
	// Optional: without it, a stream run asks after
	// Next until a page makes no progress, one request more per run (a
	// followed feed polled at the full rate all through each run instead
	// of once per turn). Ignored by a fill, whose range says where it ends.
	Last bool
	// NotYet, on a page that made no progress (Next equal to After, no
	// Records), says the provider has not published yet what the slice
	// asks for, though the Source knows it is due (a backfill up to a
	// boundary whose last candles are still forming at a provider whose
	// clock or feed runs behind ours), and when to ask again. The run
	// then stops short with [forage.ReasonBehind], Until NotYet (now, if
	// earlier), and a gap record (a fill: one for the rest of its range),
	// instead of reading as caught up with a hole behind (a backfill done,
	// a range filled, without its last candles). Zero means caught up:
	// nothing is due (a followed feed at its head).
	NotYet time.Time
}

// Source is the host's side of one stream: it plans slices and fetches them.
// It is an extension point; implementations used by concurrent runs must be
// safe for concurrent use.
type Source[R any] interface {
	// Next plans the slice after cursor, and reports false when there is
	// none: the stream is caught up (nothing newer yet), or the range is
	// done. within bounds the slice for a fill (see [Runner.Fill]): plan
	// only inside it. The zero within means unbounded: a stream run. Next
	// makes no request to the provider; an error stops the run.
	Next(ctx context.Context, cursor []byte, within checkpoint.Range) (Slice, bool, error)
	// Fetch makes exactly one outbound request for s and returns the page
	// and the attempt's [forage.Outcome]. The runner calls it inside
	// [budget.Provider.Do], so it may be called again for the same slice
	// (retries); only the page of the successful attempt is kept. ctx is
	// cancelled when Fetch returns: read the whole response inside it.
	Fetch(ctx context.Context, s Slice) (Page[R], forage.Outcome)
}

// Predictor is an optional interface a [Source] implements to let a stream
// run fetch ahead (see [Config.Prefetch]): the runner plans slice k+1 from
// the cursor slice k is expected to end at, before slice k's fetch returns.
//
// A Source that implements Predictor has its Fetch called concurrently, up
// to 1+Prefetch calls at once for one run, so it must be safe for
// concurrent use; Next and Expect are only called from the run's own
// goroutine.
type Predictor interface {
	// Expect returns the cursor after s if the provider answers s in full:
	// the Page.Next that Fetch will return unless the provider has less
	// there than asked (a short page, a hole in history, the head). ok false
	// means no prediction: the runner fetches nothing after s before s's
	// page is in. Expect makes no request. A wrong prediction costs
	// requests, never data: when a page's Next differs from what was
	// expected, every slice planned after it is discarded unwritten and
	// planned again from the actual cursor.
	Expect(s Slice) (next []byte, ok bool)
}

// Sink is the host's durable store for records. It is an extension point;
// implementations used by concurrent runs must be safe for concurrent use.
//
// Within one run, Write and the Store's Commit alternate, even when the
// run fetches ahead ([Config.Prefetch]): a page is written only after the
// previous page's commit returned, and committed (its Next) only after its
// own Write returned nil. To make the two one transaction, implement
// [TxSink] instead: no staging between the calls.
//
// A page a stream run writes may be several slices' pages merged (group
// commit, [Config.MaxBatch]): their Records concatenated in slice order,
// the last one's Next, and the union of their Covered ranges, which is one
// range (the run merges only pages whose Covered are all zero or touch).
// The Sink cannot tell it from one page of a larger slice.
type Sink[R any] interface {
	// Write stores the page's records and returns only once they are
	// durable: after Write returns nil, the runner commits the cursor past
	// them. Write must be idempotent (an upsert on a natural key): a crash
	// or an error between Write and the commit replays the page (every
	// slice merged into it), so the same records arrive again. An error
	// stops the run with the checkpoint unchanged.
	Write(ctx context.Context, p Page[R]) error
}

// TxSink is a [Sink] that can also make a page durable and commit the
// cursor after it in one transaction, so a stream run is exactly once: no
// page is ever replayed after a crash, and a failure leaves neither the
// records nor the checkpoint. Set it as [Config.TxSink] instead of
// [Config.Sink]; pgstore.NewTxSink provides one on PostgreSQL.
//
// Where a stream run with a Sink calls Sink.Write and then Store.Commit, a
// run with a TxSink calls Commit alone, for every page that moves the
// cursor (a batch too, [Config.MaxBatch]), pages without records included.
// Write is for what commits no checkpoint: the pages of [Runner.Fill] and
// of [Runner.Drain]'s range fills, and a page with records that made no
// progress (its Next is the checkpoint's cursor). Both are upserts, as for
// any Sink: a fill may write records a stream run committed.
//
// The TxSink commits into the checkpoint store the run loads from
// ([Config.Store]): for pgstore, the same *pgstore.Store. It is an
// extension point; implementations used by concurrent runs must be safe
// for concurrent use. Within one run, Write and Commit never overlap.
type TxSink[R any] interface {
	Sink[R]
	// Commit stores p's records and commits p.Next as key's checkpoint, in
	// one transaction: when Commit returns nil both are durable, and when it
	// returns an error from the list below neither is. The checkpoint half
	// has the contract of [checkpoint.Checkpoints.Commit]: a
	// compare-and-swap on expect (the new checkpoint's Version is
	// expect+1), fenced by lease, with the same errors, wrapped so that
	// errors.Is finds them: [checkpoint.ErrInvalid], [checkpoint.ErrLeaseLost]
	// (a stale holder writes no record), [checkpoint.ErrLeaseHeld],
	// [checkpoint.ErrConflict]. Any other error (a write that failed, a
	// store that went away) stops the run too; if the outcome is unknown
	// (an I/O error while committing), the next run's Load tells, and
	// either everything landed or nothing did. p may hold no records: the
	// checkpoint moves alone.
	Commit(ctx context.Context, key checkpoint.Key, p Page[R], expect int64, lease checkpoint.Lease) (checkpoint.Checkpoint, error)
}

// FetchFunc adapts a function to the [Source] of a cursor feed (an API
// that pages with a token: "events after this one", "the page after this
// link"): Next plans one slice after each cursor, with no time range, and
// Fetch calls f with it, whose After is the cursor to ask after (empty at
// the stream's very start). f returns the page with its Next (the
// provider's next-page token) and Last (the provider says nothing follows
// for now), as [Page] says. It is safe for concurrent use when f is. A
// cursor feed has no time ranges: [Runner.Fill] of one is an error.
//
// Last is how f says the feed is caught up. A successful answer's page
// with no records whose Next is the cursor it was asked after, without
// Last (or NotYet), is a stuck cursor (a provider that answers has_more
// true with the token it was given, or, at the stream's start, with no
// token), never read as caught up, which would end the run done with
// everything after it unfetched: its attempt fails as [forage.Transient],
// is asked again within the retry budget, and then the run stops
// unavailable with a gap record, the checkpoint where it was. A provider
// with no has_more says it is caught up by answering nothing: set Last
// on its empty page.
type FetchFunc[R any] func(ctx context.Context, s Slice) (Page[R], forage.Outcome)

// Next returns the slice after cursor: one request's worth, always there
// (the provider says when the feed is caught up), or an error for a fill.
func (f FetchFunc[R]) Next(_ context.Context, cursor []byte, within checkpoint.Range) (Slice, bool, error) {
	if !within.IsZero() {
		return Slice{}, false, fmt.Errorf("slice: a FetchFunc source is a cursor feed, with no time ranges to fill (asked to fill %v)", within)
	}
	return Slice{After: cursor}, true, nil
}

// Fetch calls f(ctx, s), and fails a stuck cursor (see [FetchFunc]).
func (f FetchFunc[R]) Fetch(ctx context.Context, s Slice) (Page[R], forage.Outcome) {
	p, out := f(ctx, s)
	// A success only: a failed answer's empty page (a 401, a 429, as
	// forage.FromHTTP reads them: a status and no error) matched at the
	// stream's start, whose cursor is empty too, and was made a Transient
	// stuck cursor (a 401 asked again and "unavailable" for good).
	if out.Class() == forage.Success && len(p.Records) == 0 && bytes.Equal(p.Next, s.After) && !p.Last && p.NotYet.IsZero() {
		// At the feed's very start too: an empty first answer with no
		// token that does not say it is caught up (has_more true) ended
		// a run done with nothing fetched.
		where := fmt.Sprintf("after %q", cursorText(s.After))
		if len(s.After) == 0 {
			where = "at the feed's start"
		}
		out.Err = forage.Mark(fmt.Errorf("%w: a stuck cursor: the provider answered nothing %s, with the same cursor next, and did not say the feed is caught up (Page.Last)", ErrInvalidPage, where), forage.Transient)
		return Page[R]{}, out
	}
	return p, out
}

// SinkFunc adapts a function to a [Sink].
type SinkFunc[R any] func(ctx context.Context, p Page[R]) error

// Write calls f(ctx, p).
func (f SinkFunc[R]) Write(ctx context.Context, p Page[R]) error { return f(ctx, p) }

// Config configures a [Runner]. Stream, Mode, Store, Provider, Source and
// one of Sink and TxSink are required; every other field has a default.
type Config[R any] struct {
	// Stream names what is collected, e.g. "binance/BTC-USDT/1m": the
	// checkpoint key's stream and the lease's name. Required.
	Stream string
	// Mode selects the bookmark the runner advances: [checkpoint.CatchUp]
	// (historical backfill) or [checkpoint.SteadyState] (incremental).
	// Required: the zero Mode is an error, so the choice is never silent.
	Mode checkpoint.Mode
	// Owner names this runner in the stream's lease, for operators and
	// error messages. Defaults to "<hostname>/<pid>/<random hex>".
	Owner string
	// LeaseTTL is how long the stream's lease excludes other owners without
	// a renewal. The runner renews it at slice boundaries (when a fetch
	// starts) once less than half of it is left, so make it comfortably
	// longer than one slice (fetch with retries, and write). Defaults to 1
	// minute.
	LeaseTTL time.Duration
	// GapBatch is how many gap records one [checkpoint.Gaps.ListGaps] call
	// returns when the runner drains or resolves gaps. It is a transport
	// batch, never a stopping condition: the runner pages until a page is
	// empty. Defaults to 100.
	GapBatch int
	// Store persists the checkpoint, the lease, gap records and coverage.
	// Required.
	Store checkpoint.Store
	// Provider gates every fetch: pacing, breaker, retries, the run's
	// budget. Required; a [budget.Registry] hands one out per provider key.
	Provider budget.Provider
	// Source plans and fetches the slices. Required.
	Source Source[R]
	// Sink writes pages durably and idempotently; a stream run then commits
	// the cursor with Store.Commit. Exactly one of Sink and TxSink is
	// required.
	Sink Sink[R]
	// TxSink, instead of Sink, makes each page durable and commits the
	// cursor after it in one transaction ([TxSink.Commit]): exactly once,
	// with no replay after a crash. Exactly one of Sink and TxSink is
	// required.
	TxSink TxSink[R]
	// Prefetch is how many slices a stream run ([Runner.Run]) may fetch
	// ahead when the Source implements [Predictor]: up to 1+Prefetch slices
	// not yet handed to the Sink are in flight or landed at once, so while
	// one page (or batch, see MaxBatch) is written and committed the slices
	// after it are fetched, and one stream keeps a fast provider busy.
	// Writes and commits stay strictly in order and the checkpoint never
	// passes a durable page. Each slice fetched ahead that turns out to be
	// planned from a wrong prediction costs its request. Without a Predictor
	// the setting is moot: one slice at a time. [Runner.Fill] and
	// [Runner.Drain]'s range fills are always one slice at a time. 0 means
	// automatic: 8 ahead to begin with (enough for a provider 100 ms away
	// to be called about 80 times a second by one stream), widened one
	// slice at a time, up to 64, while the run keeps its window full and
	// the provider has fewer attempts in flight than its pacing rate times
	// the round trip (the shortest recent fetch) needs (while its slow
	// start climbs, fewer than two thirds of that); never wider than 1.5
	// times that plus two. A positive value is a fixed window.
	// [NoPrefetch] turns it off.
	Prefetch int
	// MaxBatch is the most slices a stream run ([Runner.Run]) makes durable
	// together, with one Sink.Write and one Store.Commit, or one
	// TxSink.Commit (group commit).
	// When the sink is free and several fetched pages are ready in order
	// (their fetches are in, each ended where it was predicted to), the run
	// merges them into one page (see [Sink]) and commits the cursor after
	// the last: a sink and a store that sync to disk pay for one sync per
	// batch, not per slice. The run never waits for a fetch just to batch
	// it: it takes what has landed, so batches grow only while writes and
	// commits are slower than fetches, and a single slice is written as
	// soon as it is in. A page is never split, and a page that would leave
	// a hole in the merged Covered range starts the next batch. A crash
	// between the write and the commit replays the batch, which the sink's
	// upsert absorbs. A batch holds at most the 1+Prefetch slices a run has
	// in flight, so without fetching ahead every batch is one slice. 0
	// means the default, 64; 1 turns batching off (one write and one
	// commit per slice).
	MaxBatch int
	// Series names the coverage series pages are recorded in: when set, the
	// Covered range of every durable page is added with
	// [checkpoint.Coverages.AddCoverage], and fills skip what is already
	// covered. Empty means no coverage is kept.
	Series string
	// Logger receives one record per stop (gap written, yield, error) and a
	// debug record per slice. Nil means silent.
	Logger *slog.Logger
	// Now is the runner's clock, read at slice boundaries for the run's
	// budget ([budget.Run.ExhaustedAt]) and the lease renewal. It should be
	// the store's clock. Defaults to time.Now.
	Now func() time.Time
}

// NoPrefetch, as [Config.Prefetch], turns fetching ahead off: a stream run
// fetches, writes and commits one slice at a time.
const NoPrefetch = -1

// Prefetch bounds: the default for a zero [Config.Prefetch], the most its
// window widens to (see pipeline.adapt), and the most accepted (each slice
// in flight holds a page in memory).
const (
	defaultPrefetch = 8
	autoPrefetch    = 64
	maxPrefetch     = 1024
)

// defaultMaxBatch is the default for a zero [Config.MaxBatch].
const defaultMaxBatch = 64

// Runner runs one stream: it leases it, resumes from its checkpoint, and
// fetches, writes and commits slice after slice until the stream is caught
// up or the run's budget or the provider stops it, leaving a gap record.
//
// A Runner holds no state between runs; it is safe for concurrent use, and
// concurrent runs of one stream exclude each other through the lease (one
// runs, the others yield).
//
// The zero Runner is not usable (its methods panic): make one with [New].
type Runner[R any] struct {
	cfg  Config[R]
	key  checkpoint.Key
	log  *slog.Logger
	sink Sink[R] // Config.Sink, or Config.TxSink for writes without a commit
	// autoPrefetch is set when Config.Prefetch was 0: a stream run's
	// window widens past the default to keep a distant provider busy
	// (see pipeline.adapt).
	autoPrefetch bool
}

// New returns a Runner for cfg, or an error wrapping [ErrInvalidConfig] that
// names the missing or invalid field.
func New[R any](cfg Config[R]) (*Runner[R], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Owner == "" {
		cfg.Owner = defaultOwner()
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = time.Minute
	}
	if cfg.GapBatch == 0 {
		cfg.GapBatch = 100
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	auto := cfg.Prefetch == 0
	if auto {
		cfg.Prefetch = defaultPrefetch
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = defaultMaxBatch
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("stream", cfg.Stream, "mode", cfg.Mode.String())
	if cfgerr.IsNil(cfg.Sink) {
		cfg.Sink = nil // a typed nil beside a TxSink
	}
	if cfgerr.IsNil(cfg.TxSink) {
		cfg.TxSink = nil // a typed nil beside a Sink: commit would call it
	}
	r := &Runner[R]{cfg: cfg, key: checkpoint.Key{Stream: cfg.Stream, Mode: cfg.Mode}, log: log, sink: cfg.Sink, autoPrefetch: auto}
	if cfg.TxSink != nil {
		r.sink = cfg.TxSink
	}
	return r, nil
}

func (c *Config[R]) validate() error {
	missing := func(field, fix string) error {
		return invalid.Must("Config."+field, "be set: "+fix, "nil")
	}
	bad := func(field, rule string, got any) error {
		return invalid.Must("Config."+field, "be "+rule, got)
	}
	switch {
	case c.Stream == "":
		return invalid.Must("Config.Stream", `name the stream, e.g. "binance/BTC-USDT/1m"`, `""`)
	case checkpoint.CheckName("Config.Stream", c.Stream) != nil:
		return name("Config.Stream", c.Stream)
	case c.Owner != "" && checkpoint.CheckName("Config.Owner", c.Owner) != nil:
		return name("Config.Owner", c.Owner)
	case c.Series != "" && checkpoint.CheckName("Config.Series", c.Series) != nil:
		return name("Config.Series", c.Series)
	case !c.Mode.Valid():
		return bad("Mode", "checkpoint.CatchUp or checkpoint.SteadyState", c.Mode)
	case c.LeaseTTL < 0:
		return bad("LeaseTTL", ">= 0", c.LeaseTTL)
	case c.GapBatch < 0:
		return bad("GapBatch", ">= 0", c.GapBatch)
	case c.Prefetch < NoPrefetch || c.Prefetch > maxPrefetch:
		return bad("Prefetch", fmt.Sprintf("in [%d (NoPrefetch), %d]", NoPrefetch, maxPrefetch), c.Prefetch)
	case c.MaxBatch < 0:
		return bad("MaxBatch", ">= 0", c.MaxBatch)
	case cfgerr.IsNil(c.Store):
		return missing("Store", "use checkpoint.NewMemoryStore, checkpoint.OpenFileStore or a database store")
	case cfgerr.IsNil(c.Provider):
		return missing("Provider", "use budget.NewLocal or a budget.Registry's Provider for the stream's provider key")
	case cfgerr.IsNil(c.Source):
		return missing("Source", "implement slice.Source to plan and fetch the stream's slices")
	case cfgerr.IsNil(c.Sink) && cfgerr.IsNil(c.TxSink):
		return missing("Sink", "implement slice.Sink (or use slice.SinkFunc) to write pages durably, or set Config.TxSink")
	case !cfgerr.IsNil(c.Sink) && !cfgerr.IsNil(c.TxSink):
		return invalid.Must("Config.TxSink", "be nil when Config.Sink is set: set exactly one (the TxSink alone writes and commits in one transaction)", fmt.Sprintf("%T", c.TxSink))
	}
	return nil
}

// name reports a name that no store accepts (see [checkpoint.CheckName]):
// the run would fail at its first lease, commit or coverage.
func name(field, v string) error {
	return invalid.Reword(checkpoint.ErrInvalid.Error()+": ", field, checkpoint.CheckName(field, v))
}

// defaultOwner names this process and runner: host, pid and a random suffix
// so that two runners of one process are told apart in logs.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Report says what one run did and why it stopped.
type Report struct {
	// Stream is the runner's stream.
	Stream string
	// Mode is the runner's mode.
	Mode checkpoint.Mode
	// Yielded is true when another owner held the stream's lease: the run
	// did nothing, and that is not an error. It never means the stream is
	// done: another live process is running it (HeldBy, until HeldUntil).
	// A store ends a dead process's lease early (a file store at open, the
	// PostgreSQL store when the holder's session ends), so a restart after
	// a crash does not yield to its own dead run.
	Yielded bool
	// HeldBy is the owner of the lease a yielded run found
	// ([checkpoint.Lease.Owner], e.g. "host-7/4121/9f2c01aa"). Empty unless
	// Yielded (or when the store did not say who holds it).
	HeldBy string
	// HeldUntil is when the lease a yielded run found expires unless its
	// holder renews it: the earliest time another run may take the stream
	// over if the holder stops. Zero unless Yielded (or when the store did
	// not say).
	HeldUntil time.Time
	// Slices counts the slices fetched and made durable (and, for a stream
	// run, committed), however many were merged into one write.
	Slices int
	// Commits counts the checkpoint commits of a stream run: each made one
	// batch of slices durable with one Sink.Write (none if the batch had no
	// records) and one Store.Commit, or with one [TxSink.Commit]
	// ([Config.MaxBatch]). Slices/Commits is
	// the mean batch. Zero for a fill, which commits no checkpoint.
	Commits int
	// Records counts the records written to the sink: those of each
	// Sink.Write that returned nil, or of each TxSink.Commit or Write that
	// returned nil.
	Records int
	// Discarded counts slices fetched ahead ([Config.Prefetch]) whose page
	// was thrown away unwritten: an earlier page ended elsewhere than
	// predicted, or the run stopped before reaching them. Each cost at most
	// the requests its fetch made; none counts in Slices or Records.
	Discarded int
	// Cursor is the stream's last committed cursor when the run ended: where
	// the next stream run resumes. Nil for a run that never loaded it (a
	// yield, a fill).
	Cursor []byte
	// Reason is why the run stopped early: budget exhaustion
	// ([forage.Reason.Exhausted]), source pressure
	// ([forage.Reason.SourcePressure]) or [forage.ReasonBehind] (the
	// provider has not published what is due yet, see [Page.NotYet]), each
	// with a gap record, or [forage.ReasonPermanent] with an error. Empty
	// when the run finished its work (caught up, every range filled) or
	// failed for another reason (see the error).
	Reason forage.Reason
	// Until is when the provider may be called again after a stop for
	// source pressure (a Retry-After, a ban, the breaker's open state), from
	// [budget.Error.Until], or when to ask again after a stop behind.
	// Zero when unknown or irrelevant.
	Until time.Time
	// Stop is the provider's stop that ended the run early, as
	// [budget.Provider.Do] returned it: its Reason and Until are the ones
	// above, with the last answer's status and error (what a 503 said, the
	// dial error of a host that is down). Nil when no stop ended the run.
	Stop *budget.Error
	// Gaps are the gap records the run wrote, in order. A stream run writes
	// at most one; a fill writes one per range left unfetched.
	Gaps []checkpoint.Gap
	// Resolved counts the gap records the run resolved.
	Resolved int
}
