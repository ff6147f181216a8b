package breaker

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/internal/cfgerr"
)

// Errors returned by this package. Allow and Do return their errors
// preallocated, so the fast-fail path does not allocate; compare with
// errors.Is.
var (
	// ErrOpen is returned by Allow and Do while the breaker refuses
	// requests: the provider is known to be unhealthy, no request was
	// attempted, and the caller should not spend its retry budget on it.
	// Allow returns it itself while the breaker is open, and an error that
	// Is ErrOpen (saying "half-open, too many probes in flight") while it
	// is half-open and all Config.HalfOpenProbes probes are in flight.
	ErrOpen = errors.New("breaker: open")
	// ErrInvalidConfig is wrapped by every error New returns.
	ErrInvalidConfig = errors.New("breaker: invalid config")
)

// errTooManyProbes is the refusal of a half-open breaker whose probes are
// all in flight: it Is [ErrOpen], with its own message.
var errTooManyProbes error = probesInFlight{}

type probesInFlight struct{}

func (probesInFlight) Error() string        { return "breaker: half-open, too many probes in flight" }
func (probesInFlight) Is(target error) bool { return target == ErrOpen }

// The defaults of the zero Config.
const (
	defaultFailureRatio   = 0.5
	defaultMinRequests    = 9
	defaultWindow         = 10 * time.Second
	defaultBuckets        = 10 // BucketPeriod defaults to Window/defaultBuckets
	defaultOpenTimeout    = 15 * time.Second
	defaultHalfOpenProbes = 1
)

// minOpenTimeout is the shortest OpenTimeout: gobreaker is handed
// OpenTimeout − 1ns (see New), which must stay positive, and anything
// shorter than a millisecond is not a pause for a provider to recover in.
const minOpenTimeout = time.Millisecond

// maxBuckets bounds Window/BucketPeriod: gobreaker allocates a bucket each
// and, after an idle spell, walks them all once per elapsed bucket.
const maxBuckets = 100

// burstShare is the constant of the trip rule (see the package doc): the
// ratio rule needs burstShare × MinRequests outcomes in the window, and a
// burst of failures must be at least 1/burstShare of them.
const burstShare = 6

// Config configures a Breaker. The zero Config is valid and means all
// defaults. The package documentation states the trip rule these fields
// parameterise, with the detection times its defaults give.
type Config struct {
	// Name identifies the breaker in transitions and logs, typically the
	// provider key (e.g. "exchange-x"). Keep it free of secrets. Defaults
	// to "".
	Name string

	// FailureRatio is the threshold of the ratio rule, in (0, 1]: the
	// closed breaker opens when Failures / (Successes + Failures) over the
	// window reaches it, provided the window holds at least 6 ×
	// MinRequests counted outcomes. It is what catches a partial outage.
	// Defaults to 0.5.
	FailureRatio float64

	// MinRequests is the amount of evidence the breaker needs, in counted
	// outcomes (successes or failures; ignored and in-flight requests do
	// not count):
	//
	//   - the breaker never opens while the window holds fewer than
	//     MinRequests outcomes: a cold start whose first requests fail
	//     does not open it, and neither does a provider called fewer than
	//     MinRequests times per Window;
	//   - the burst rule opens it on MinRequests or more failures in a
	//     row that make up at least a sixth of the window's outcomes; this
	//     catches a total outage within MinRequests requests at low rates;
	//   - the ratio rule needs 6 × MinRequests outcomes in the window, so
	//     that a small sample with a random failure share is not taken for
	//     an outage.
	//
	// Defaults to 9: nine failures in a row are 4.5s of a total outage at
	// 2 requests/s, and have a chance of 0.2⁹ (about 5 in 10⁷) at a
	// random 20% failure share.
	MinRequests int

	// Window is the length of the closed state's rolling counting window:
	// the outcomes of the requests admitted in about the last Window
	// count (see BucketPeriod for the exact span). A short window forgets
	// earlier successes quickly, so that an outage after hours of success
	// opens the breaker as fast as one on a cold start. Defaults to 10s.
	Window time.Duration

	// BucketPeriod is the step in which the window rolls. Outcomes are
	// counted in buckets of this length (gobreaker's BucketPeriod), the
	// first starting when the breaker was made or last closed, each in the
	// bucket its request was admitted in; the window is the current bucket
	// and the Window/BucketPeriod − 1 before it, so it spans between
	// Window − BucketPeriod and Window. When a bucket leaves the window
	// its counts leave with it, and outcomes reported later for requests
	// admitted in it are dropped. Window must be a multiple of
	// BucketPeriod, of at most 100 buckets. BucketPeriod equal to Window
	// makes a fixed window instead, cleared whole at the first call
	// strictly after Window has elapsed since the breaker closed or last
	// cleared it, dropping the outcomes of requests admitted before.
	// Defaults to Window/10 (1s for the default Window).
	BucketPeriod time.Duration

	// OpenTimeout is how long the breaker stays open: it turns half-open
	// at the first call once OpenTimeout has elapsed since it opened (at
	// OpenUntil or later). Each half-open spell sends HalfOpenProbes
	// requests to a provider that may still be down, so 15s costs a dead
	// provider 4 probes a minute, while a recovered one waits 7.5s on
	// average to be called again. At least 1ms. Defaults to 15s.
	OpenTimeout time.Duration

	// HalfOpenProbes is the number of probe requests the half-open breaker
	// admits at a time (gobreaker's MaxRequests); that many consecutive
	// successful probes close it. Defaults to 1.
	HalfOpenProbes int

	// OnTransition, if not nil, is called once for every state change, in
	// order, outside the breaker's locks, so it may call back into the
	// Breaker. It runs synchronously on the goroutine of the call that
	// caused the change (or of a concurrent call already delivering), so
	// keep it short. Defaults to nil: no hook.
	OnTransition func(Transition)

	// Logger, if not nil, receives one record per state change (Warn when
	// the breaker opens, Info otherwise) with the attributes breaker, from,
	// to, reason, requests, successes, failures, consecutive_failures.
	// Defaults to nil: silent.
	Logger *slog.Logger
}

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("breaker", ErrInvalidConfig)

// withDefaults validates c and fills in the defaults, reporting every
// invalid field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	switch {
	case c.FailureRatio == 0:
		c.FailureRatio = defaultFailureRatio
	case !(c.FailureRatio > 0 && c.FailureRatio <= 1):
		errs = append(errs, invalid.Must("Config.FailureRatio", "be in (0, 1]", c.FailureRatio))
	}
	switch {
	case c.MinRequests == 0:
		c.MinRequests = defaultMinRequests
	case c.MinRequests < 0 || c.MinRequests > math.MaxUint32:
		errs = append(errs, invalid.Must("Config.MinRequests", fmt.Sprintf("be in [1, %d]", uint32(math.MaxUint32)), c.MinRequests))
	}
	switch {
	case c.Window == 0:
		c.Window = defaultWindow
	case c.Window < 0:
		errs = append(errs, invalid.Must("Config.Window", "be positive", c.Window))
	}
	errs = append(errs, c.bucketPeriod())
	switch {
	case c.OpenTimeout == 0:
		c.OpenTimeout = defaultOpenTimeout
	case c.OpenTimeout < minOpenTimeout:
		errs = append(errs, invalid.Must("Config.OpenTimeout", fmt.Sprintf("be at least %v", minOpenTimeout), c.OpenTimeout))
	}
	switch {
	case c.HalfOpenProbes == 0:
		c.HalfOpenProbes = defaultHalfOpenProbes
	case c.HalfOpenProbes < 0 || c.HalfOpenProbes > math.MaxUint32:
		errs = append(errs, invalid.Must("Config.HalfOpenProbes", fmt.Sprintf("be in [1, %d]", uint32(math.MaxUint32)), c.HalfOpenProbes))
	}
	return c, errors.Join(errs...)
}

// bucketPeriod validates BucketPeriod against Window (already defaulted),
// filling in its default.
func (c *Config) bucketPeriod() error {
	if c.BucketPeriod < 0 {
		return invalid.Must("Config.BucketPeriod", "be positive", c.BucketPeriod)
	}
	if c.Window <= 0 {
		return nil // reported already
	}
	note := ""
	if c.BucketPeriod == 0 {
		c.BucketPeriod = c.Window / defaultBuckets
		note = ", defaulted to Window/10"
	}
	switch {
	case c.BucketPeriod == 0 || c.Window%c.BucketPeriod != 0:
		return invalid.Must("Config.Window", fmt.Sprintf("be a multiple of Config.BucketPeriod (%v%s)", c.BucketPeriod, note), c.Window)
	case c.Window/c.BucketPeriod > maxBuckets:
		return invalid.Must("Config.BucketPeriod", fmt.Sprintf("be at least Window/%d (%v)", maxBuckets, c.Window/maxBuckets), c.BucketPeriod)
	}
	return nil
}

// Breaker is a circuit breaker over gobreaker's TwoStepCircuitBreaker with a
// rolling window, an evidence floor, a ratio rule and a burst rule, and
// transition events. It is safe for concurrent use.
//
// The zero Breaker is not usable (its methods panic): make one with [New].
type Breaker struct {
	cb           *gobreaker.TwoStepCircuitBreaker[struct{}]
	name         string
	failureRatio float64
	minRequests  uint32
	onTransition func(Transition)
	logger       *slog.Logger

	// probeSuccesses counts Success outcomes since the last state change;
	// read when the breaker leaves half-open. Only gobreaker's callbacks
	// touch it, under gobreaker's mutex; atomic all the same.
	probeSuccesses atomic.Uint32

	// openUntil is when the breaker last opened plus OpenTimeout, in Unix
	// nanoseconds: the first instant it lets a probe through.
	openUntil   atomic.Int64
	openTimeout time.Duration

	// hasPending is a lock-free hint that pending is not empty, so that
	// the common call with no transition skips mu.
	hasPending atomic.Bool

	mu         sync.Mutex   // guards the fields below; never held while calling gobreaker or a hook
	tripCounts Counts       // the counts readyToTrip tripped on, for the closed → open transition
	tripReason string       // and the rule that tripped
	pending    []Transition // transitions made but not yet delivered, oldest first
	spare      []Transition // the last delivered batch, reused as the next pending buffer
	delivering bool         // a goroutine is delivering; it will also deliver what is queued meanwhile
	enqueued   uint64       // transitions ever queued (tests compare it with deliveries)
}

// New returns a closed Breaker configured by c, or an error wrapping
// ErrInvalidConfig that names every invalid field.
func New(c Config) (*Breaker, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Breaker{
		name:         c.Name,
		failureRatio: c.FailureRatio,
		minRequests:  uint32(c.MinRequests),
		onTransition: c.OnTransition,
		logger:       c.Logger,
		openTimeout:  c.OpenTimeout,
	}
	// gobreaker turns half-open strictly after its Timeout; one nanosecond
	// less makes that exactly OpenUntil, so a caller that sleeps until
	// OpenUntil finds the breaker half-open, not open.
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:          c.Name,
		MaxRequests:   uint32(c.HalfOpenProbes),
		Interval:      c.Window,
		BucketPeriod:  c.BucketPeriod,
		Timeout:       c.OpenTimeout - 1,
		ReadyToTrip:   b.readyToTrip,
		OnStateChange: b.onStateChange,
		IsSuccessful:  b.isSuccessful,
		IsExcluded:    isExcluded,
	})
	return b, nil
}

// OpenUntil returns when an open breaker lets its first probe through: the
// time it opened plus OpenTimeout, the first instant at which State reports
// half-open, so a caller may sleep until it and call again. It returns the
// zero Time when the breaker is not open.
func (b *Breaker) OpenUntil() time.Time {
	if b.State() != StateOpen {
		return time.Time{}
	}
	return time.Unix(0, b.openUntil.Load())
}

// State returns the current state, first rolling the window or applying an
// elapsed OpenTimeout (which may deliver a transition).
func (b *Breaker) State() State {
	s := b.cb.State()
	b.flush()
	return stateOf(s)
}

// Counts returns the counts of the current state (in the closed state, of
// the window), first rolling the window or applying an elapsed OpenTimeout.
func (b *Breaker) Counts() Counts {
	b.cb.State() // gobreaker's Counts does not roll the window itself
	c := b.cb.Counts()
	b.flush()
	return countsOf(c)
}

// Allow asks to send one request. If the breaker admits it, Allow returns a
// done func that the caller must call once with the request's class, which
// the breaker counts as the package documentation says: later calls are
// ignored, a class other than the six of [forage.Class] panics, and a probe
// that never reports keeps its half-open slot forever (so defer it).
// Otherwise Allow returns an error that Is [ErrOpen] and a nil done. done
// may be called from any goroutine.
func (b *Breaker) Allow() (done func(forage.Class), err error) {
	report, err := b.cb.Allow()
	b.flush()
	switch {
	case err == nil:
		t := &ticket{b: b, report: report}
		return t.done, nil
	case errors.Is(err, gobreaker.ErrOpenState):
		return nil, ErrOpen
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return nil, errTooManyProbes
	}
	return nil, fmt.Errorf("breaker: %w", err) // gobreaker v2.4.0 returns no other error
}

// Do runs fn if the breaker admits a request and reports the class fn
// returns. It returns Allow's error (one that Is [ErrOpen]) without running fn, and
// nil otherwise; fn's own result travels through its closure. If fn panics,
// the request is ignored, as for Canceled (a panic is a bug in the caller,
// not evidence about the provider), and the panic continues.
func (b *Breaker) Do(fn func() forage.Class) error {
	done, err := b.Allow()
	if err != nil {
		return err
	}
	class := forage.Canceled
	defer func() { done(class) }()
	class = fn()
	return nil
}

// ticket is one admitted request; its done method is the func Allow returns.
type ticket struct {
	b      *Breaker
	report func(error)
	used   atomic.Bool
}

// Sentinel errors handed to gobreaker to carry what a class counts as;
// never returned.
var (
	errFailure = errors.New("breaker: failure")
	errIgnored = errors.New("breaker: ignored")
)

// done reports the request's class: source pressure and transient failures
// are failures, Success and Permanent (the provider answered) successes,
// and Canceled says nothing about the provider.
func (t *ticket) done(c forage.Class) {
	var err error
	switch c {
	case forage.Success, forage.Permanent:
	case forage.Throttled, forage.Overloaded, forage.Transient:
		err = errFailure
	case forage.Canceled:
		err = errIgnored
	default:
		panic(fmt.Sprintf("breaker: done called with invalid %v", c))
	}
	if t.used.Swap(true) {
		return
	}
	t.report(err)
	t.b.flush()
}

// isExcluded tells gobreaker not to count ignored (Canceled) outcomes at all.
func isExcluded(err error) bool { return err == errIgnored }

// isSuccessful is called by gobreaker, under its mutex, for every outcome it
// counts; it also tallies the successes of the current state.
func (b *Breaker) isSuccessful(err error) bool {
	if err != nil {
		return false
	}
	b.probeSuccesses.Add(1)
	return true
}

// readyToTrip is called by gobreaker, under its mutex, after every failure
// reported in the closed state, with the window's counts. It is the trip
// rule of the package doc; when it trips it keeps the counts and the rule
// for the transition, since gobreaker clears the counts before calling
// onStateChange.
func (b *Breaker) readyToTrip(c gobreaker.Counts) bool {
	n := uint64(c.TotalSuccesses) + uint64(c.TotalFailures)
	run, m := uint64(c.ConsecutiveFailures), uint64(b.minRequests)
	var reason string
	switch {
	case n < m:
		return false
	case n >= burstShare*m && float64(c.TotalFailures)/float64(n) >= b.failureRatio:
		reason = ReasonFailureRatio
	case run >= m && burstShare*run >= n:
		reason = ReasonConsecutiveFailures
	default:
		return false
	}
	b.mu.Lock()
	b.tripCounts, b.tripReason = countsOf(c), reason
	b.mu.Unlock()
	return true
}
