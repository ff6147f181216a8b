package budget

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/gcra"
	"github.com/forage-go/forage/retry"
)

// Config configures one provider's gate. The zero Config is valid: the rate
// is discovered from a conservative start (see [aimd.Config]), no limit is
// known in advance, and every default below applies.
type Config struct {
	// Adaptive configures the controller that discovers the provider's
	// ceiling; its rate drives the pacer. The zero value means aimd's
	// defaults (a start at 4 requests/s, or at the tightest known Limit
	// that counts requests: a Weighted one says nothing of requests/s).
	Adaptive aimd.Config
	// Burst is how many requests the adaptive pacer may send back to back
	// after an idle spell. Zero means 1, fitted: collectors pace, they do
	// not burst; once the controller has measured a burst allowance of 3
	// or more at the provider, the pacer allows 2, so a slot its timer
	// wakes late for is made up at the next one, and with a known Limit
	// the pacer allows the tightest one's Burst (its word). Set it (1 for
	// requests always one interval apart) and it is kept. Raise it for
	// rates above a few hundred per second, where timer overshoot (about a
	// millisecond) would otherwise cost throughput.
	Burst int
	// Limits are the provider's published limits, if any (Binance: 6000
	// request weight per minute and 61,000 raw requests per 5 minutes). Each
	// is enforced on its own; a call draws from every one, all at the one
	// time it is sent (the latest at which each admits it). The adaptive rate
	// never exceeds the tightest of those that count requests (not
	// Weighted ones: those hold by their own limiter alone). A call that would wait for them
	// longer than MaxWait stops at once with [forage.ReasonQuota] (see MaxWait).
	Limits []Limit
	// Breaker configures the provider's circuit breaker. Its Name defaults to
	// the provider key. Its OnTransition and Logger are the one place to
	// watch and log the provider's breaker transitions. A refusal for rate
	// (Throttled: a 429) that set a pause counts as a failure once per
	// pause (those in flight when it came are its echoes); one that leaves
	// no pause in force (a bare 429) is the rate's to answer and counts as
	// neither. A 503 always counts: it is also how an outage answers.
	Breaker breaker.Config
	// Backoff configures the full-jitter sleep between retries; a provider's
	// Retry-After floors it. The zero value means retry's defaults.
	Backoff retry.BackoffConfig
	// AttemptTimeout bounds one attempt: its context is cancelled after it.
	// Defaults to 30s; NoTimeout disables it.
	AttemptTimeout time.Duration
	// MaxInFlight caps the attempts in flight to the provider at once (a
	// bulkhead), whoever makes them. Defaults to 64.
	MaxInFlight int
	// MaxAttempts caps the attempts of one call, retries included. Defaults
	// to 6; 1 turns retries off (one attempt per call).
	MaxAttempts int
	// MaxWait is the longest pause a call sleeps through inside Do (a
	// Retry-After, a quota the provider reports spent), and the longest it
	// waits for the next slot of the known Limits (with the pacing at
	// their rate); a longer one ends the call at once as source pressure
	// with [Error.Until] set, for the scheduler to wait out: the pause's
	// reason, or [forage.ReasonQuota] for a known limit, which books nothing and
	// sends no request. So does a wait that would end at or after the
	// run's or the caller's deadline. A pause that comes while a call
	// already waits for its slot holds it too, and stops it within MaxWait
	// when it is longer. Defaults to 1 minute.
	MaxWait time.Duration
	// MaxPause is the longest pause a provider may impose by one answer
	// (a Retry-After, a spent quota's reset); a longer one is clamped to
	// it, and a Retry-After or a spent quota's reset so clamped is logged
	// (see Logger).
	// Defaults to 1 hour; at least 1 second. Headers are untrusted input:
	// "Retry-After: 99999999999999999999" would otherwise park every
	// caller for the 72 hours the header parsers allow. An hour covers
	// every pause a provider means for a client that backs off (seconds to
	// minutes for a 429, an hourly quota's reset); against a longer real
	// ban it costs one refused request an hour, each answered with the ban's
	// remaining time and so a new pause, which is not the hammering that
	// escalates a ban. Raise it for a provider known to ban for days.
	MaxPause time.Duration
	// BanPause is how long a ban pauses the provider when it says nothing
	// of how long the ban lasts: a 418 (Binance's IP ban) whose
	// Retry-After is absent, zero or unreadable. Each further ban in a row
	// (no success in between) pauses twice as long as the one before, up
	// to MaxPause: 1, 2, 4, … minutes by default, so a provider that bans
	// again as soon as the pause ends is left alone longer each time, and
	// one refused request per pause is all it sees. A Retry-After that
	// comes with the ban wins. Defaults to 1 minute, or
	// MaxPause if that is shorter; a BanPause set longer than MaxPause is
	// an error. Calling a banned provider before its ban
	// ends only extends the ban, which is why a ban never leaves the
	// provider unpaused.
	BanPause time.Duration
	// Records, if set, keeps the provider's record where a later process
	// finds it (see [RecordStore]): a provider loads its record when it is
	// created, restoring the learned rate and ceiling and the pause in
	// force, so a restart neither climbs again from the conservative start
	// (a record more than a minute old is climbed back to in a second or
	// two) nor calls a provider that asked to be left alone. It saves the record
	// whenever a pause is set or extended, in the background at most every
	// few seconds while what it learned changes, and when a [Registry]
	// evicts it. A provider with no record yet is not saved until it
	// learned something of its limits (a ceiling, a pause, a refusal, a
	// known limit's spent time) or was sent 20 requests: a crawler's
	// registry meets a provider per host, most called once or twice, and
	// each would leave a record for good. Nil keeps it all in memory only.
	Records RecordStore
	// Shares, if set, shares the provider with the other processes that
	// call it through the same store (see [ShareStore]): each holds a
	// lease on a share of the provider's rate, renewed about every second
	// in the background, and paces locally at it; what its controller
	// learns (a cut, a climb, a pause) reaches the others at their next
	// renewal, and news (a pause, a cut, turns) within milliseconds when
	// the store is a [ShareWatcher]. The provider's rate is split by
	// demand: a process that uses
	// less than its share gives the rest back. Each known Limit is split
	// the same way, share of its pace and of its burst (at least one
	// unit), so together the processes never send more than the Limit in
	// any window. When those units add up to more than Burst (more
	// processes than Burst, or one holding most of it beside others
	// holding a unit each), the Limit is slotted: time is cut into slots
	// of one interval of its pace, on each process's clock, the store
	// hands each process its own slots with its share, and each sends at
	// most one call per slot of its own, at its start, so any window of Per
	// still holds at most Count (for calls of Weight up to Burst). No
	// process waits for another; together they send 88-98% of the Limit's
	// pace (3 or 8 processes, Burst 1 or 2). Processes on
	// different machines need clocks that agree to well under a slot's
	// opening (a quarter of the Limit's interval, at most 125 ms for slow
	// Limits). A process that dies loses
	// its share when its lease ends, 3 s after its last renewal. One that
	// cannot reach the store keeps its share until its lease ends and then
	// paces at half of it, known limits too, until the store answers
	// again (and at a quarter of the whole if it never reached it); while
	// the store is in trouble for every process (a database restart), the
	// others are not granted that half, so the guarantee holds through
	// it. Nil: the provider is this process's alone.
	Shares ShareStore
	// Classify, if set, reads each attempt's outcome for this provider
	// instead of the default rules ([forage.Outcome.Class]): a provider
	// whose 503s come from a flaky gateway rather than from load shedding
	// returns [forage.Transient] for them, so they are retried but never
	// slow the provider down; one that signals its limit with 420 returns
	// [forage.Throttled]. It must be safe for concurrent use and fast (it
	// runs once per attempt). A class other than the six of
	// [forage.Class] is read as Permanent. Nil means the default rules, which also tell
	// noise from pressure by themselves: a provider that has refused with
	// 429 names its limit that way, so its 503s count as failures; and 503s
	// that a cut does not stop are read as noise (see the aimd package).
	Classify func(forage.Outcome) forage.Class
	// Ban, if set, reports whether an answer is the provider's ban: it
	// refuses every request for a while and counts each one sent before
	// the ban ends. A ban is read as throttling, pauses the provider
	// (see BanPause) and stops the call with [forage.ReasonBanned],
	// never retried. Nil means a 418 read as throttling (Binance's IP
	// ban); set it for a provider that bans otherwise (Bybit and
	// Binance's firewall answer 403 to an address that called too
	// often: read as a request it forbids, each call went out and was
	// refused). It sees the answer as Classify does, and must be as safe
	// for concurrent use and as fast.
	Ban func(forage.Outcome) bool
	// Pacer, if set, paces the provider instead of a local [gcra.Limiter].
	// It is paced at the adaptive rate (this process's share of it, with
	// Shares). A pacer paces one provider: in a [Registry] set it in the
	// override of that key; a Pacer in [RegistryConfig.Defaults] is
	// rejected. To share a provider among processes, use Shares.
	Pacer Pacer
	// Logger receives the provider's own structured records, each with its
	// key: a pause the provider imposed (a Retry-After, a ban, a spent
	// quota; Info, with its end and reason), an answer that asked for a
	// pause longer than MaxPause (Warn, with what it asked), a cut of the
	// pacing rate (Info; a raise at Debug), a call stopped because its
	// retry budget is spent (Warn), and a provider record that could not
	// be saved to Records (Warn). Breaker transitions are the breaker's: watch them
	// with Breaker.OnTransition and log them with Breaker.Logger. Nil
	// means silent.
	Logger *slog.Logger
	// Metrics, if set, receives the provider's measurements (see
	// [Metrics]): attempts by class with their latency, pacing waits,
	// calls stopped and why, pauses, rate changes and breaker
	// transitions, labelled by the provider key only. Nil means none, at
	// the cost of a nil check.
	Metrics Metrics
}

// defaultMaxPause is the default [Config.MaxPause].
const defaultMaxPause = time.Hour

// defaultBanPause is the default [Config.BanPause]: the pause of the first
// ban in a row that comes without a usable Retry-After.
const defaultBanPause = time.Minute

// NoTimeout, as [Config.AttemptTimeout], sets no per-attempt timeout.
const NoTimeout = time.Duration(-1)

// Limit is one published limit of a provider: at most Count units in any
// window of length Per. A request draws 1 unit, or its weight (see
// [CallOption] Weight) when the limit is Weighted.
type Limit struct {
	// Name identifies the limit in snapshots, e.g. "weight/1m". Optional.
	Name string
	// Count is the units allowed per window; required (> 0).
	Count int
	// Per is the window length; required (> 0).
	Per time.Duration
	// Weighted makes the limit count a request's weight instead of 1.
	Weighted bool
	// Burst is how many units may go back to back after an idle spell.
	// Defaults to Count/10 (at least 1). After it the limit paces at
	// (Count−Burst)/Per, or, when that leaves a unit unused for long (a
	// slow limit: 3 per hour), just under (Count−Burst+1)/Per, so that no
	// window of length Per ever carries more than Count units, however the
	// requests fall; so a host that runs in short spells (once a day
	// against 2 a day) gets Burst units a spell, not Count. A call may
	// carry a [CallOption] Weight up to Burst, or up to Count/2 when that
	// is more (it then waits until the limit has been idle for its excess
	// over Burst); a heavier call stops as permanent, with
	// [ErrInvalidConfig].
	Burst int
}

// Pacer paces the requests of one provider in one process; [gcra.Limiter]
// implements it. Its methods are called from many goroutines at once (the
// calls waiting for a slot, the controller moving the rate, a pause
// another process announced), so it must be safe for concurrent use. To
// share a provider among processes, use [Config.Shares], not a Pacer.
type Pacer interface {
	// WaitN blocks until n units conform and books them, or returns an error
	// without booking when ctx ends first or its deadline comes before the
	// slot would (an error wrapping context.DeadlineExceeded).
	WaitN(ctx context.Context, n int) error
	// SetRate changes the pacing rate, in units per second.
	SetRate(rate float64) error
	// PauseUntil holds every request until t (a provider's Retry-After); it
	// never shortens an earlier pause.
	PauseUntil(t time.Time)
}

var _ Pacer = (*gcra.Limiter)(nil)

// RecordStore keeps one [forage.ProviderRecord] per provider key across
// restarts: the learned rate and ceiling, so a restart starts where the last
// process left off, and the pause in force with its reason, so a provider
// that asked to be left alone (a 429 with Retry-After, a ban, a spent
// quota) is not called again before the pause ends, by this process or the
// next one (retrying during a ban only extends it), and a call refused
// after a restart says banned rather than throttled. The checkpoint
// package's LocalStore implements it (in memory or in files), and so does the
// PostgreSQL store; the record is a type of the root package, so stores
// need not import this one. [github.com/forage-go/forage/budget/budgettest]
// is the contract as a test suite.
//
// Implementations must be safe for concurrent use. Saves are rare (one per
// pause set or extended, one every few seconds per provider while its rate
// moves, one per eviction), so a store may write synchronously.
type RecordStore interface {
	// LoadRecord returns the record saved for key and true, or the zero
	// record and false when none was saved. A key that is not a valid
	// name ([github.com/forage-go/forage/checkpoint.CheckName]) is an
	// error, and so is a ctx that has ended.
	LoadRecord(ctx context.Context, key string) (forage.ProviderRecord, bool, error)
	// SaveRecord upserts r under r.Key, durably before it returns nil. It
	// is idempotent, and saves of different keys are independent. Every
	// field takes r's value except two, merged so that saves from many
	// processes, in any order, lose neither a pause nor an operator's
	// word: PausedUntil keeps the later of the saved and the new end, and
	// PauseReason the reason saved with that end (for an equal end, r's);
	// Status and Why keep the saved ones when r.Status is "". A key, a
	// non-empty Status, Why or PauseReason that is not a valid name, a
	// Rate or Ceiling that is negative, NaN or infinite, or a ctx that has
	// ended is an error, and nothing changes.
	SaveRecord(ctx context.Context, r forage.ProviderRecord) error
}

// RecordLister is a [RecordStore] that can also list its records, so
// that an admin process which calls no provider itself still lists every
// connector the other processes share through the store
// ([Registry.RecordPage]). The checkpoint package's LocalStore and the
// PostgreSQL store implement it;
// [github.com/forage-go/forage/budget/budgettest] checks it with the rest
// of the contract.
type RecordLister interface {
	RecordStore
	// ListRecords returns the saved records whose keys come after after
	// in byte order ("" for the first), in that order, at most limit of
	// them (limit > 0; fewer means no more are saved). Each is what
	// LoadRecord would return for its key. A limit < 1 or a ctx that has
	// ended is an error.
	ListRecords(ctx context.Context, after string, limit int) ([]forage.ProviderRecord, error)
}

// validate checks c, naming its fields from path: "Config" for a
// provider's own, "RegistryConfig.Defaults" for a registry's.
func (c *Config) validate(path string) error {
	bad := func(field, rule string, got any) error {
		return invalid.Must(path+"."+field, "be "+rule, got)
	}
	switch {
	case c.Burst < 0:
		return bad("Burst", ">= 0", c.Burst)
	case c.AttemptTimeout < 0 && c.AttemptTimeout != NoTimeout:
		return bad("AttemptTimeout", ">= 0 or NoTimeout", c.AttemptTimeout)
	case c.MaxInFlight < 0:
		return bad("MaxInFlight", ">= 0", c.MaxInFlight)
	case c.MaxAttempts < 0:
		return bad("MaxAttempts", ">= 0", c.MaxAttempts)
	case c.MaxWait < 0:
		return bad("MaxWait", ">= 0", c.MaxWait)
	case c.MaxPause < 0 || c.MaxPause > 0 && c.MaxPause < time.Second:
		// Under a second, every Retry-After and ban pause is cut to
		// nothing: the provider is asked again at once, which is how a
		// ban is earned (1ns was accepted).
		return bad("MaxPause", "0 (the default) or >= 1s", c.MaxPause)
	case c.BanPause < 0:
		return bad("BanPause", ">= 0", c.BanPause)
	}
	if d := c.withDefaults(); c.BanPause > d.MaxPause {
		return bad("BanPause", fmt.Sprintf("<= MaxPause (%v)", d.MaxPause), d.BanPause)
	}
	for i, l := range c.Limits {
		field := fmt.Sprintf("Limits[%d]", i)
		switch {
		case l.Count <= 0:
			return bad(field+".Count", "> 0", l.Count)
		case l.Per <= 0:
			return bad(field+".Per", "> 0", l.Per)
		case l.Burst < 0 || l.Burst > l.Count || (l.Burst == l.Count && l.Count > 1):
			return bad(field+".Burst", "in [0, Count) (or 1 when Count is 1)", l.Burst)
		}
	}
	if _, err := retry.NewBackoff(c.Backoff); err != nil {
		return invalid.Wrap(path+".Backoff", err)
	}
	// Build the provider once: what newLocal derives (the controller
	// bounded by the known limits, the pacer, the breaker) is validated
	// here, so a Registry never fails later on a key it accepted.
	probe := *c
	probe.Pacer, probe.Records, probe.Metrics, probe.Shares = nil, nil, nil, nil // no I/O, no reports: a probe has no record nor lease
	_, err := newLocal("", probe, path)
	return err
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 30 * time.Second
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 64
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 6
	}
	if c.MaxWait == 0 {
		c.MaxWait = time.Minute
	}
	if c.MaxPause == 0 {
		c.MaxPause = defaultMaxPause
	}
	if c.BanPause == 0 {
		c.BanPause = min(defaultBanPause, c.MaxPause)
	}
	return c
}

// limiter builds the GCRA that enforces share of l (1: all of it): Burst
// back to back, then the pace shape gives, so any window of length Per
// holds at most Count. Processes that split l by shares (see
// [Config.Shares]) each take their share of the burst (see shareBurst)
// and of the pace, so together they hold the same bound; when their
// units add up to more than the burst, the slots hold it (see slotAt).
func (l Limit) limiter(share float64, slotted bool) (*gcra.Limiter, error) {
	_, rate := l.shape()
	rate *= share
	if math.IsInf(rate, 0) || !(rate > 0) {
		return nil, invalid.Must(fmt.Sprintf("Limit %q", l.Name), "have a usable rate: (Count-Burst)/Per > 0 and finite", rate)
	}
	return gcra.New(gcra.Config{Rate: rate, Burst: l.shareBurst(share, slotted)})
}

// shareBurst is the burst of share of l: its share of l's burst, at least
// one unit; slotted (see slotAt), at least two: the slots hold the limit
// then, and the share's pace only keeps the process near its share, one
// interval loose (a process's slots are spread over the cycle, not evenly
// spaced: paced at its share exactly, it missed every slot that came
// sooner than one interval, and three processes sent 77% of the limit).
func (l Limit) shareBurst(share float64, slotted bool) int {
	burst, _ := l.shape()
	least := 1
	if slotted {
		least = 2
	}
	return max(least, int(share*float64(burst)))
}

// key names l in a provider's record (see [forage.ProviderRecord.Spent]):
// its count, window, whether it is weighted, and its name.
func (l Limit) key() string {
	k := strconv.Itoa(l.Count) + "/" + l.Per.String()
	if l.Weighted {
		k += "/weighted"
	}
	if l.Name != "" {
		k += "/" + l.Name
	}
	return k
}

// heaviest returns the largest weight a call may carry against l (see
// [Limit.Burst]).
func (l Limit) heaviest() int {
	burst, _ := l.shape()
	return max(burst, l.Count/2)
}

// slowMargin and slowMarginMost bound the margin a slow limit's interval
// keeps (see shape): a host that runs once a day against 2 a day, at the
// same time each day, waits up to 2 s for its slot (MaxWait covers it),
// not 14 minutes (1% of 12 hours).
const (
	slowMargin     = 250 * time.Millisecond
	slowMarginMost = 2 * time.Second
)

// shape returns l's burst B and the rate, in units/s, it paces at after
// it. A GCRA of burst B and interval I admits at most B + ⌊W/I⌋ units in
// any window of length W, so an interval over Per/(Count−B+1) keeps every
// window of Per within Count. A fast limit paces at (Count−B)/Per, a whole
// unit under that, a margin against arrivals the network bunched; a slow
// one, whose unit is a long time, keeps a margin of 1% of its interval,
// within [slowMargin, slowMarginMost], instead (3 per hour with a burst of
// 1 paced at 2 per hour: a third of the quota unused).
func (l Limit) shape() (burst int, rate float64) {
	burst = l.Burst
	if burst == 0 {
		burst = max(1, l.Count/10)
	}
	if burst >= l.Count {
		burst = max(1, l.Count-1)
	}
	per := l.Per.Seconds()
	exact := per / float64(l.Count-burst+1) // the bound itself
	iv := exact + min(max(exact/100, slowMargin.Seconds()), slowMarginMost.Seconds())
	if whole := per / float64(l.Count-burst); l.Count > burst && whole < iv {
		iv = whole
	}
	return burst, 1 / iv
}
