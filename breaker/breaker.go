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
)

// Errors returned by this package. Allow and Do return ErrOpen and
// ErrTooManyProbes themselves (not wrapped), so the fast-fail path does not
// allocate; compare with errors.Is all the same.
var (
	// ErrOpen is returned by Allow and Do while the breaker is open: the
	// provider is known to be unhealthy, no request was attempted, and the
	// caller should not spend its retry budget on it.
	ErrOpen = errors.New("breaker: open")
	// ErrTooManyProbes is returned by Allow and Do while the breaker is
	// half-open and all Config.HalfOpenProbes probes are in flight.
	ErrTooManyProbes = errors.New("breaker: half-open, too many probes in flight")
	// ErrInvalidConfig is wrapped by every error New returns.
	ErrInvalidConfig = errors.New("breaker: invalid config")
)

// The defaults of the zero Config.
const (
	defaultFailureRatio   = 0.5
	defaultMinRequests    = 10
	defaultWindow         = 60 * time.Second
	defaultOpenTimeout    = 30 * time.Second
	defaultHalfOpenProbes = 1
)

// Config configures a Breaker. The zero Config is valid and means all
// defaults.
type Config struct {
	// Name identifies the breaker in transitions and logs, typically the
	// provider key (e.g. "exchange-x"). Keep it free of secrets. Defaults
	// to "".
	Name string

	// FailureRatio is the share of failures, in (0, 1], among the outcomes
	// counted in the window at which the closed breaker opens:
	// Failures / (Successes + Failures) >= FailureRatio. Defaults to 0.5.
	FailureRatio float64

	// MinRequests is the minimum-throughput guard: the number of counted
	// outcomes (Success or Failure; Ignored and in-flight requests do not
	// count) the current window must hold before the breaker may open.
	// Without it a cold start whose first request fails would open the
	// breaker. If fewer requests than this arrive per Window, the breaker
	// never opens. Defaults to 10.
	MinRequests int

	// Window is the length of the closed state's counting window
	// (gobreaker's Interval): counts are cleared once it has elapsed since
	// the breaker closed or last cleared them, at the first call after
	// that. Defaults to 60s.
	Window time.Duration

	// OpenTimeout is how long the breaker stays open before it turns
	// half-open (at the first call after it elapsed). Defaults to 30s.
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

// configError is a validation failure of one Config field.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return ErrInvalidConfig }

func invalid(format string, args ...any) error {
	return &configError{msg: "breaker: " + fmt.Sprintf(format, args...)}
}

// withDefaults validates c and fills in the defaults, reporting every
// invalid field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	switch {
	case c.FailureRatio == 0:
		c.FailureRatio = defaultFailureRatio
	case !(c.FailureRatio > 0 && c.FailureRatio <= 1):
		errs = append(errs, invalid("Config.FailureRatio must be in (0, 1] (got %v)", c.FailureRatio))
	}
	switch {
	case c.MinRequests == 0:
		c.MinRequests = defaultMinRequests
	case c.MinRequests < 0 || c.MinRequests > math.MaxUint32:
		errs = append(errs, invalid("Config.MinRequests must be in [1, %d] (got %d)", uint32(math.MaxUint32), c.MinRequests))
	}
	switch {
	case c.Window == 0:
		c.Window = defaultWindow
	case c.Window < 0:
		errs = append(errs, invalid("Config.Window must be positive (got %v)", c.Window))
	}
	switch {
	case c.OpenTimeout == 0:
		c.OpenTimeout = defaultOpenTimeout
	case c.OpenTimeout < 0:
		errs = append(errs, invalid("Config.OpenTimeout must be positive (got %v)", c.OpenTimeout))
	}
	switch {
	case c.HalfOpenProbes == 0:
		c.HalfOpenProbes = defaultHalfOpenProbes
	case c.HalfOpenProbes < 0 || c.HalfOpenProbes > math.MaxUint32:
		errs = append(errs, invalid("Config.HalfOpenProbes must be in [1, %d] (got %d)", uint32(math.MaxUint32), c.HalfOpenProbes))
	}
	return c, errors.Join(errs...)
}

// Breaker is a circuit breaker over gobreaker's TwoStepCircuitBreaker with a
// minimum-throughput guard and transition events. It is safe for concurrent
// use.
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
	// nanoseconds: when it will let a probe through.
	openUntil   atomic.Int64
	openTimeout time.Duration

	// hasPending is a lock-free hint that pending is not empty, so that
	// the common call with no transition skips mu.
	hasPending atomic.Bool

	mu         sync.Mutex   // guards the fields below; never held while calling gobreaker or a hook
	tripCounts Counts       // the counts readyToTrip tripped on, for the closed → open transition
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
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:          c.Name,
		MaxRequests:   uint32(c.HalfOpenProbes),
		Interval:      c.Window,
		Timeout:       c.OpenTimeout,
		ReadyToTrip:   b.readyToTrip,
		OnStateChange: b.onStateChange,
		IsSuccessful:  b.isSuccessful,
		IsExcluded:    isExcluded,
	})
	return b, nil
}

// Name returns Config.Name.
func (b *Breaker) Name() string { return b.name }

// OpenUntil returns when an open breaker lets its first probe through: the
// time it opened plus OpenTimeout. It returns the zero Time when the breaker
// is not open.
func (b *Breaker) OpenUntil() time.Time {
	if b.State() != StateOpen {
		return time.Time{}
	}
	return time.Unix(0, b.openUntil.Load())
}

// State returns the current state, first applying an elapsed Window or
// OpenTimeout (which may deliver a transition).
func (b *Breaker) State() State {
	s := b.cb.State()
	b.flush()
	return stateOf(s)
}

// Counts returns the counts of the current state (in the closed state, of
// the current Window), first applying an elapsed Window or OpenTimeout.
func (b *Breaker) Counts() Counts {
	b.cb.State() // gobreaker's Counts does not apply an elapsed window itself
	c := b.cb.Counts()
	b.flush()
	return countsOf(c)
}

// Allow asks to send one request. If the breaker admits it, Allow returns a
// done func that the caller must call once with the request's Outcome: later
// calls are ignored, an Outcome other than Success, Failure or Ignored
// panics, and a probe that never reports keeps its half-open slot forever
// (so defer it). Otherwise Allow returns ErrOpen or ErrTooManyProbes and a
// nil done. done may be called from any goroutine.
func (b *Breaker) Allow() (done func(Outcome), err error) {
	report, err := b.cb.Allow()
	b.flush()
	switch {
	case err == nil:
		t := &ticket{b: b, report: report}
		return t.done, nil
	case errors.Is(err, gobreaker.ErrOpenState):
		return nil, ErrOpen
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return nil, ErrTooManyProbes
	}
	return nil, fmt.Errorf("breaker: %w", err) // gobreaker v2.4.0 returns no other error
}

// Do runs fn if the breaker admits a request and reports the Outcome fn
// returns. It returns ErrOpen or ErrTooManyProbes without running fn, and
// nil otherwise; fn's own result travels through its closure. If fn panics,
// the request is reported Ignored (a panic is a bug in the caller, not
// evidence about the provider) and the panic continues.
func (b *Breaker) Do(fn func() Outcome) error {
	done, err := b.Allow()
	if err != nil {
		return err
	}
	outcome := Ignored
	defer func() { done(outcome) }()
	outcome = fn()
	return nil
}

// ticket is one admitted request; its done method is the func Allow returns.
type ticket struct {
	b      *Breaker
	report func(error)
	used   atomic.Bool
}

// Sentinel errors handed to gobreaker to carry an Outcome; never returned.
var (
	errFailure = errors.New("breaker: failure")
	errIgnored = errors.New("breaker: ignored")
)

func (t *ticket) done(o Outcome) {
	var err error
	switch o {
	case Success:
	case Failure:
		err = errFailure
	case Ignored:
		err = errIgnored
	default:
		panic(fmt.Sprintf("breaker: done called with invalid %v", o))
	}
	if t.used.Swap(true) {
		return
	}
	t.report(err)
	t.b.flush()
}

// isExcluded tells gobreaker not to count Ignored outcomes at all.
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

// readyToTrip is called by gobreaker, under its mutex, after every Failure
// in the closed state. It is the minimum-throughput guard plus the failure
// ratio; when it trips it keeps the counts for the transition, which
// gobreaker clears before calling onStateChange.
func (b *Breaker) readyToTrip(c gobreaker.Counts) bool {
	counted := uint64(c.TotalSuccesses) + uint64(c.TotalFailures)
	if counted < uint64(b.minRequests) || float64(c.TotalFailures)/float64(counted) < b.failureRatio {
		return false
	}
	b.mu.Lock()
	b.tripCounts = countsOf(c)
	b.mu.Unlock()
	return true
}
