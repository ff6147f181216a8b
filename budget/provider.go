package budget

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/gcra"
	"github.com/forage-go/forage/internal/redact"
	"github.com/forage-go/forage/retry"
)

// Provider is the gate every request attempt to one provider passes. A
// [Registry] hands out one per provider key; [NewLocal] makes a standalone
// one; processes that call one provider share its budget through
// [Config.Shares].
type Provider interface {
	// Do runs one logical request: it admits against run (nil: no request
	// cap nor deadline, and retries drawn from the provider's own retry
	// budget, 20% of first attempts with a floor of 3),
	// fails fast when the breaker is open, paces at the rate the provider
	// allows, calls attempt for exactly one outbound request, classifies the
	// outcome, feeds it back, and retries within run's retry budget with
	// full-jitter backoff floored by Retry-After.
	//
	// Do returns nil when an attempt succeeded, and otherwise a *[Error]
	// whose [forage.Reason] says why it stopped. The attempt's context is cancelled
	// when the attempt returns: read the response body inside it.
	Do(ctx context.Context, run *Run, attempt func(ctx context.Context) forage.Outcome, opts ...CallOption) error
	// Snapshot returns the provider's counters and state.
	Snapshot() Snapshot
}

// CallOption adjusts one [Provider.Do] call, e.g.
// CallOption{Weight: 10}. The zero CallOption changes nothing; of several,
// the heaviest Weight counts, and one NoRetry makes the call a single
// attempt.
type CallOption struct {
	// Weight is what the call costs of every weighted [Limit] (endpoints
	// that cost more than others). Zero means the default, 1; a negative
	// weight stops the call as permanent (see [ErrInvalidConfig]).
	Weight int
	// NoRetry makes the call a single attempt: for requests that are not
	// safe to replay.
	NoRetry bool

	keepContext bool          // the attempt's context outlives the attempt (Transport)
	settle      *settler      // a success is settled when its body is read (Transport)
	borrow      chan struct{} // inside an attempt of this provider: its slot, which one such call at a time may borrow (Transport)
	held        chan struct{} // the attempt's slot this call borrowed (see borrow); nil: a slot of its own
}

// local is the in-process [Provider] that [NewLocal] and [Registry.Get]
// make.
type local struct {
	key         string
	cfg         Config
	ctl         *aimd.Controller
	pacer       Pacer
	limits      atomic.Pointer[[]*gcra.Limiter] // the known Limits' limiters (see lims)
	limMu       sync.Mutex                      // held while booking the known limits (see bookLimits)
	limGen      uint64                          // bookings of the known limits so far; guarded by limMu
	slot        slotState                       // the known limits' slots, when shared (see slotAt); guarded by limMu
	pending     []int                           // per known limit, the units booked on the current limiters for calls still waiting for their slot; guarded by limMu
	spent       []atomic.Int64                  // per known limit, the time (Unix ns) its record accounts for (see keepSpent)
	restoredAt  []int64                         // per known limit of a shared provider, the time (Unix ns) its record held it until (see restoreSpent); guarded by limMu
	spentQuiet  atomic.Int64                    // Unix ns until which keepSpent saves nothing (a save failed)
	spentCalls  atomic.Int64                    // calls the retry budget stopped since warnSpent's last line
	spentWarned atomic.Int64                    // Unix ns of warnSpent's last line; 0 before the first
	okLatency   atomic.Int64                    // smoothed latency of successes, ns (see stuck); 0 before the first
	paceSpent   atomic.Int64                    // the pacer's time (Unix ns) the record accounts for (see keepPace)
	paceFrom    time.Time                       // the pacer's accounted time in the record loaded; set before any call
	brk         *breaker.Breaker
	slots       chan struct{}
	ceiling     float64       // the tightest known limit, requests/s; 0 if none
	limitBurst  int           // that limit's burst (see fitBurst); 0 if none
	retries     *retry.Budget // for calls made without a Run
	restored    bool          // started from a learned rate in its record (see load); set before any call

	mu        sync.Mutex    // held by the one goroutine moving the pacer (see follow)
	dirty     atomic.Bool   // the controller changed since the pacer last followed
	rate      float64       // the rate last given to the pacer
	pausedTil time.Time     // the pause last given to the pacer
	cutsSeen  uint64        // the controller's decreases when the rate was last logged
	savedTil  time.Time     // the pause last saved to cfg.Records
	savedWhy  forage.Reason // the reason saved with savedTil
	nextSave  time.Time     // when follow may next save the learned state

	reportMu  sync.Mutex  // orders the reports of Rate and Pause before the Forget (see forget)
	forgotten atomic.Bool // the registry dropped the provider (see forget, mute): it reports and logs nothing more; set under reportMu

	transported *atomic.Bool // its registry's: a Transport sends through it (see attemptKey); nil for NewLocal

	rec recorder // the provider's record in cfg.Records (see record.go)
	// warnedNested is set once a Transport request inside an attempt of
	// this provider was keyed to another (see Transport.RoundTrip).
	warnedNested atomic.Bool
	sh           sharer   // the provider's lease in cfg.Shares (see share.go)
	op           operator // an operator's status, read from cfg.Records (see status.go)

	lastFail atomic.Pointer[string] // the last failed attempt's cause, redacted (see fastFail)
	bans     atomic.Int32           // bans in a row since the last success (see Config.BanPause)
	banMu    sync.Mutex             // guards banUntil
	banUntil time.Time              // the end of the latest ban's pause

	n counters
}

type counters struct {
	requests, ok, throttled, overloaded, transient, permanent atomic.Uint64
	retries, fastFails, saturated, inFlight                   atomic.Int64
	saveErrs                                                  atomic.Int64
	settling                                                  atomic.Int64 // successes through the Transport not settled yet (see settleLater)
}

var _ Provider = (*local)(nil)

// NewLocal returns the in-process [Provider] for key, or an error naming
// the invalid field of cfg: an [aimd.Controller] discovering the ceiling, a
// [Pacer] (by default a [gcra.Limiter]) holding the rate, a
// [breaker.Breaker], the known [Limit]s, and a bulkhead. It is safe for
// concurrent use. It starts no goroutine of its own but one: with
// [Config.Records] set, a call may start a short-lived one that saves the
// record (at most one at a time, at most every few seconds), so the call
// never waits for the store. A [Registry] makes the same, one per key.
//
// With [Config.Records] set, NewLocal loads the record saved for key: the
// provider starts at the learned rate and holds every call until the pause
// in force ends, so a restart does not climb again from the conservative
// start; a failing load is an error (a provider that forgot a ban would
// call into it).
func NewLocal(key string, cfg Config) (Provider, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := cfg.validate("Config"); err != nil {
		return nil, err
	}
	p, err := newLocal(key, cfg, "Config")
	if err != nil {
		return nil, err // a nil Provider, not a nil *local in one
	}
	return p, nil
}

// checkKey rejects a provider key that breaks the name rule of every
// store (checkpoint.CheckName): empty, over maxKeyLen bytes, not UTF-8,
// or holding a control character, a format character (bidi controls,
// zero-width characters) or a line or paragraph separator. Keys name
// providers in logs, metrics, records and the status page, where a newline
// forges a line and a format character makes a key read as another
// ("\u202emoc.elgoog" reads "google.com"); and a key no store can name
// can be neither saved nor steered by an operator.
func checkKey(key string) error {
	if key == "" || len(key) > maxKeyLen || !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool {
		return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
	}) {
		return invalid.Must("key", fmt.Sprintf("be 1 to %d bytes of UTF-8 text without control, format (bidi, zero-width) or separator characters", maxKeyLen),
			fmt.Sprintf("%q", redact.Clip(key, 64)))
	}
	return nil
}

// maxKeyLen is the longest key, in bytes: checkpoint.MaxNameLen.
const maxKeyLen = 1024

// newLocal builds the provider for key, restored from its record in
// cfg.Records if any; its errors name cfg's fields from path (see
// Config.validate).
func newLocal(key string, cfg Config, path string) (*local, error) {
	cfg = cfg.withDefaults()
	p := &local{key: key, cfg: cfg, slots: make(chan struct{}, cfg.MaxInFlight), spent: make([]atomic.Int64, len(cfg.Limits)), restoredAt: make([]int64, len(cfg.Limits))}
	p.op.turn = make(chan struct{}, 1)
	lims := make([]*gcra.Limiter, 0, len(cfg.Limits))
	for i, l := range cfg.Limits {
		lim, err := l.limiter(1, false)
		if err != nil {
			return nil, invalid.Wrap(fmt.Sprintf("%s.Limits[%d]", path, i), err)
		}
		lims = append(lims, lim)
		if !l.Weighted { // a weighted limit says nothing of requests/s
			r := float64(l.Count) / l.Per.Seconds()
			if p.ceiling == 0 || r < p.ceiling {
				p.ceiling = r
				p.limitBurst, _ = l.shape()
			}
		}
	}
	p.limits.Store(&lims)
	p.pending = make([]int, len(lims))
	ac := cfg.Adaptive
	if p.ceiling > 0 && (ac.Max == 0 || ac.Max > p.ceiling) {
		// A known limit bounds the discovered rate; a very slow one (100
		// per hour) lowers the floor with it, down to the slowest rate
		// the controller takes (2 a month is slower: its limiter alone
		// holds it).
		ac.Max = max(p.ceiling, slowestRate)
		if ac.Initial == 0 {
			ac.Initial = ac.Max // told knowledge is used at once
		}
		ac.Initial = min(ac.Initial, ac.Max)
		if ac.Min != 0 { // zero: aimd's default, or Max if that is lower
			ac.Min = min(ac.Min, ac.Max)
		}
	}
	var err error
	if p.ctl, err = aimd.New(ac); err != nil {
		return nil, invalid.Wrap(path+".Adaptive", err)
	}
	bc := cfg.Breaker
	if bc.Name == "" {
		bc.Name = key
	}
	bc.OnTransition = breakerHook(key, cfg.Metrics, bc.OnTransition)
	if p.brk, err = breaker.New(bc); err != nil {
		return nil, invalid.Wrap(path+".Breaker", err)
	}
	p.retries, _ = retry.NewBudget(retry.BudgetConfig{}) // the defaults are valid
	// The record is restored before the pacer first hears of a rate, so
	// the pacer starts at the learned rate rather than moving to it.
	if err := p.load(context.Background()); err != nil {
		return nil, err
	}
	p.rate = p.ctl.Snapshot().Rate
	p.nextSave = time.Now().Add(recordEvery)
	p.pacer = cfg.Pacer
	if p.pacer == nil {
		burst := max(cfg.Burst, 1)
		if cfg.Burst == 0 && cfg.Shares == nil {
			// The tightest known limit runs the pacer at its rate: its
			// burst is the provider's word too (2 a day with a burst of 2,
			// paced one at a time, sent one a day to a host that ran daily).
			burst = max(burst, p.limitBurst)
		}
		if p.pacer, err = newLocalPacer(p.rate, burst); err != nil {
			return nil, invalid.Wrap(path+".Burst", err)
		}
	} else if err := p.pacer.SetRate(p.rate); err != nil {
		return nil, fmt.Errorf("budget: %s.Pacer: SetRate(%v): %w", path, p.rate, err)
	}
	if lp, ok := p.pacer.(localPacer); ok && p.restored && p.rate > 0 && (p.ceiling == 0 || p.rate < p.ceiling) {
		// The process before, killed while it sent at this rate, may have
		// left the provider's bucket spent: the first request waits one
		// interval, with no burst (restarted at once, each start's first
		// request was refused for the last one of the process before, and
		// a collector restarted again and again was banned for them), or
		// restoredWait when that is shorter: a slow rate's interval (20
		// minutes at 3 per hour) counted from every start held a host that
		// runs every 5 minutes off the provider for good. A slow rate's
		// slot is in the record instead (see keepPace). At a known
		// limit's rate, none: the limits restart from their record (see
		// keepSpent), and a wait would cost a host that runs once a day
		// the limit's burst.
		lp.PauseUntil(time.Now().Add(min(restoredWait, time.Duration(float64(time.Second)/p.rate))))
	}
	if lp, ok := p.pacer.(localPacer); ok && p.paceFrom.After(time.Now()) {
		lp.PauseUntil(p.paceFrom.Add(-time.Duration(lp.l.Burst()-1) * lp.l.Interval())) // its theoretical arrival time: paceFrom
		p.paceSpent.Store(p.paceFrom.UnixNano())
	}
	p.joinShares(time.Now())
	p.follow(time.Now()) // hands a restored pause, and the share, to the pacer
	p.reportRate(0, p.rate)
	return p, nil
}

// slowestRate is the least rate, in requests/s, aimd.Config takes (one
// request in 11.6 days).
const slowestRate = 1e-6

// restoredWait is the longest a provider restored from its record holds its
// first request (see newLocal).
const restoredWait = 2 * time.Second

// holding reports whether the provider holds state that must outlive an idle
// spell at now: an operator's pause, a pause (Retry-After, a ban), an open
// breaker, or a known
// limit that still owes time (its bucket not yet full again). The registry
// never evicts such a provider: its successor would start with the pause
// forgotten and full buckets, and send more than a limit allows in one of
// its windows. A limit that has fully recovered is in the very state a new
// limiter starts in, so dropping it changes nothing.
func (p *local) holding(now time.Time) bool {
	return p.op.paused.Load() || p.ctl.Snapshot().PausedUntil.After(now) || p.brk.OpenUntil().After(now) || p.owes(now)
}

// owes reports whether a known Limit still owes time at now: a successor
// starting with full buckets could send more in its window than it allows.
func (p *local) owes(now time.Time) bool {
	for _, lim := range p.lims() {
		if lim.AllowNAt(now, 0).ResetAfter > 0 {
			return true
		}
	}
	return false
}

// pausedOnly reports whether all p holds at now (see holding) is a pause
// the provider asked for (Retry-After, a ban): its controller's state says
// it whole, so a capacity eviction may keep that state alone (see
// Registry.shrink).
func (p *local) pausedOnly(now time.Time) bool {
	return !p.op.paused.Load() && p.ctl.Snapshot().PausedUntil.After(now) && !p.brk.OpenUntil().After(now) && !p.owes(now)
}

// lims returns the known Limits' limiters: this process's share of each
// when the provider is shared (see [Config.Shares]).
func (p *local) lims() []*gcra.Limiter { return *p.limits.Load() }
