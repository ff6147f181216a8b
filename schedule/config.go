package schedule

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/redact"
)

// Config configures a [Scheduler]. The zero value is valid: eight jobs at
// once, at most two per provider, one priority point of aging per minute,
// ±5% jitter, a one-minute lease and a one-second poll.
//
// Cool-downs (after source pressure) and provider pauses live in this
// Scheduler's memory, per process: another process sharing the store does
// not see them. What holds a provider back across processes is the budget
// package's sharing of its rate through a store
// ([github.com/forage-go/forage/budget.Config.Shares], such as the
// PostgreSQL store).
type Config struct {
	// MaxRunning caps how many jobs run at once in this scheduler, over all
	// providers. At most 65536. Defaults to 8.
	MaxRunning int
	// MaxPerProvider caps how many jobs of one provider run at once,
	// counting every scheduler sharing the store (live leases). A process
	// that dies without releasing holds its slots until its leases end: at
	// LeaseTTL, or at once with a store that ties leases to their holder's
	// process (pgstore, unless its NoLeaseSession is set). Keep it
	// below MaxRunning so that one slow provider cannot hold every slot.
	// Must not exceed MaxRunning. Defaults to 2, or MaxRunning if smaller.
	MaxPerProvider int
	// Aging is the wait worth one priority point: a due job that has waited
	// Aging longer than another ranks as if its priority were one lower, so
	// a low-priority job is never starved by a stream of fresh
	// high-priority work of its class (head work, or backfills: a
	// backfill waits while its provider has head work due or running,
	// aging or not). At most [MaxAging]. Defaults to 1 minute;
	// [NoAging] turns aging off (strict priority: a job never gains points
	// by waiting).
	Aging time.Duration
	// Jitter is the fraction by which each interval (and each backoff) is
	// randomly lengthened or shortened, so that jobs added together do not
	// run together forever. In [0, 0.5]. Zero means the default, 0.05
	// (±5%); [NoJitter] turns jitter off, so every interval and backoff is
	// exact.
	Jitter float64
	// Random returns uniform numbers in [0, 1) for jitter. Nil means
	// math/rand/v2. Tests pin it.
	Random func() float64
	// Requeue is how long a job waits before running again after its run
	// spent the run's budget (request cap, deadline, retry budget) or left
	// a backfill or gap fill unfinished. Budget exhaustion is a planned
	// hand-off: no cool-down of the provider, just a short pause of the job
	// and a place at the back of the queue. It is also the shortest wait
	// after source pressure, so that a runner failing at once cannot spin.
	// Defaults to 1 second.
	Requeue time.Duration
	// PressureWait is how long a provider cools after source pressure whose
	// end is unknown (a [budget.Error] with a zero Until). The cool-down
	// holds the provider's jobs back in this process only (see the
	// [Config] doc). Defaults to 1 minute.
	PressureWait time.Duration
	// Backoff is the wait after a job's first consecutive failure; each
	// further failure doubles it, up to MaxBackoff. Defaults to 5 seconds.
	Backoff time.Duration
	// MaxBackoff caps the failure backoff. At least Backoff. Defaults to
	// 1 hour.
	MaxBackoff time.Duration
	// LeaseTTL is how long a claim holds a job before another scheduler may
	// rescue it; running jobs are renewed every LeaseTTL/3. It is also how
	// long a killed process's jobs wait, and hold their providers'
	// MaxPerProvider slots, unless the store ends a dead holder's leases
	// sooner (pgstore does). At least 3 × Poll. Defaults to 1 minute, or
	// 3 × Poll if that is longer.
	LeaseTTL time.Duration
	// Poll is the longest the scheduler sleeps before asking the store for
	// due jobs again. It also wakes when a run ends, when a job it knows of
	// comes due, when a provider's cool-down ends and on every control call,
	// so Poll matters only for work another process added. At most
	// LeaseTTL/3. Defaults to 1 second, or LeaseTTL/3 if that is shorter
	// (when only LeaseTTL is set).
	Poll time.Duration
	// RunTimeout caps one run's wall clock: the runner's context ends after
	// it, and if the runner then returns its context's error the run counts
	// as budget exhaustion (the job is re-queued). A runner that returns
	// its own verdict instead (source pressure, a failure) keeps it.
	// Zero (the default) means no cap; the runner's own envelope applies.
	RunTimeout time.Duration
	// Owner prefixes the lease owner of every claim, so an operator can tell
	// which process runs a job. Like every name a store holds, it must be
	// valid UTF-8 without control characters ([checkpoint.CheckName]), at
	// most 994 bytes. A claim appends ".<random>/<sequence>" to it (the
	// random part per Scheduler, so processes given one Owner hold
	// distinct leases). Defaults to "schedule-<pid>-<random>", to which a
	// claim appends "/<sequence>".
	Owner string
	// Spare reports whether provider has budget to spare for a backfill.
	// It is consulted only after the head-first rule allowed the backfill
	// (no head job of the provider is due or running), from inside the
	// store's claim: it must be quick and must not call the scheduler.
	// Nil means: with Budget set, the provider's breaker is not open (a
	// half-open one gets its probe), it is not paused, and its bulkhead saw no new saturation since the last
	// check; without Budget, always.
	Spare func(provider string) bool
	// Budget is the host's registry of providers, if any: declared streams
	// ([AddStream]) take their provider from it, a [Snapshot] (and so the
	// admin API and status page of [github.com/forage-go/forage/admin])
	// shows each provider's budget snapshot, and the default Spare reads
	// it. Nil means none (and no streams).
	Budget *budget.Registry
	// Checkpoints keeps the checkpoints, leases, gap records and coverage
	// of the streams declared with [AddStream]. Required to declare one;
	// unused otherwise.
	Checkpoints checkpoint.Store
	// Logger receives one structured record per run's end (a failure at
	// Warn; the provider's pushback, a yield, a deferral and a backfill
	// done at Info, with the reason and the next run; an ordinary cycle at
	// Debug) and one per store error and lost lease (Warn), every error
	// with its URLs and secrets redacted. Nil means silent.
	Logger *slog.Logger
}

// NoJitter, as [Config.Jitter], turns jitter off: intervals and backoffs
// are exact.
const NoJitter = -1.0

// NoAging, as [Config.Aging], turns aging off: jobs due together run in
// strict priority order, however long a low-priority one has waited.
const NoAging = time.Duration(-1)

// maxOwnerSuffix is the longest suffix a claim appends to Config.Owner.
const maxOwnerSuffix = ".01234567/18446744073709551615"

// The defaults of [Config].
const (
	defaultMaxRunning   = 8
	defaultPerProv      = 2
	defaultAging        = time.Minute
	defaultJitter       = 0.05
	defaultPressureWait = time.Minute
	defaultRequeue      = time.Second
	defaultBackoff      = 5 * time.Second
	defaultMaxBackoff   = time.Hour
	defaultLeaseTTL     = time.Minute
	defaultPoll         = time.Second
)

// withDefaults validates c and returns it with every zero field defaulted.
func (c Config) withDefaults() (Config, error) {
	bad := func(field, rule string, got any) (Config, error) {
		return c, invalidConfig.Must("Config."+field, "be "+rule, got)
	}
	switch {
	case c.MaxRunning < 0 || c.MaxRunning > 1<<16:
		return bad("MaxRunning", "in [0, 65536]", c.MaxRunning)
	case c.MaxPerProvider < 0:
		return bad("MaxPerProvider", ">= 0", c.MaxPerProvider)
	case (c.Aging < 0 && c.Aging != NoAging) || c.Aging > MaxAging:
		return bad("Aging", "in [0, 24h] or NoAging", c.Aging)
	case (c.Jitter < 0 && c.Jitter != NoJitter) || c.Jitter > 0.5 || c.Jitter != c.Jitter:
		return bad("Jitter", "in [0, 0.5] or NoJitter", c.Jitter)
	case c.Requeue < 0:
		return bad("Requeue", ">= 0", c.Requeue)
	case c.PressureWait < 0:
		return bad("PressureWait", ">= 0", c.PressureWait)
	case c.Backoff < 0:
		return bad("Backoff", ">= 0", c.Backoff)
	case c.MaxBackoff < 0:
		return bad("MaxBackoff", ">= 0", c.MaxBackoff)
	case c.LeaseTTL < 0:
		return bad("LeaseTTL", ">= 0", c.LeaseTTL)
	case c.Poll < 0:
		return bad("Poll", ">= 0", c.Poll)
	case c.RunTimeout < 0:
		return bad("RunTimeout", ">= 0", c.RunTimeout)
	case c.Owner != "" && checkName("Owner", c.Owner+maxOwnerSuffix) != nil:
		return bad("Owner", fmt.Sprintf("valid UTF-8 without control characters, at most %d bytes", checkpoint.MaxNameLen-len(maxOwnerSuffix)), fmt.Sprintf("%q", redact.Clip(c.Owner, 64)))
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.MaxRunning == 0 {
		c.MaxRunning = defaultMaxRunning
	}
	if c.MaxPerProvider == 0 {
		c.MaxPerProvider = min(defaultPerProv, c.MaxRunning)
	}
	switch c.Jitter {
	case 0:
		c.Jitter = defaultJitter
	case NoJitter:
		c.Jitter = 0
	}
	switch c.Aging {
	case 0:
		c.Aging = defaultAging
	case NoAging:
		c.Aging = 0 // the store's "no aging"
	}
	def(&c.Requeue, defaultRequeue)
	def(&c.PressureWait, defaultPressureWait)
	def(&c.Backoff, defaultBackoff)
	def(&c.MaxBackoff, max(defaultMaxBackoff, c.Backoff))
	def(&c.LeaseTTL, max(defaultLeaseTTL, 3*c.Poll))
	def(&c.Poll, min(defaultPoll, c.LeaseTTL/3))
	switch {
	case c.MaxPerProvider > c.MaxRunning:
		return bad("MaxPerProvider", fmt.Sprintf("<= MaxRunning (%d)", c.MaxRunning), c.MaxPerProvider)
	case c.MaxBackoff < c.Backoff:
		return bad("MaxBackoff", fmt.Sprintf(">= Backoff (%v)", c.Backoff), c.MaxBackoff)
	case c.Poll <= 0:
		return bad("Poll", "> 0 (LeaseTTL is too short to derive it)", c.Poll)
	case c.LeaseTTL < 3*c.Poll:
		return bad("LeaseTTL", fmt.Sprintf(">= 3 × Poll (%v)", 3*c.Poll), c.LeaseTTL)
	}
	return c, nil
}
