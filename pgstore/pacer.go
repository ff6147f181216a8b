package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/gcra"
)

// PacerConfig configures a [Pacer]. The zero PacerConfig is valid and means
// all defaults.
type PacerConfig struct {
	// Rate is the rate, in units (requests) per second, of the shared row
	// when this pacer is the first to use its key (unless that first use
	// is [Pacer.SetRate], which creates the row at the rate it proposes).
	// An existing row keeps its rate: the rate is shared state, moved by
	// the policy of [Pacer.SetRate] (which a budget provider calls at once
	// and whenever its controller's rate changes).
	// It is rounded to a whole-nanosecond interval, as gcra does, so it must
	// be in (about 1.1e-10, 1e9]. Defaults to 1 ([gcra.DefaultRate]).
	Rate float64

	// Burst is how many unit requests may go back to back after an idle
	// spell, and the largest cost of one request, for a row this pacer
	// creates. The row keeps the burst it was created with, so processes
	// sharing a key should agree on it. Burst × 1/Rate must fit in int64
	// nanoseconds. Negative is an error. Defaults to 1 (strict pacing).
	Burst int

	// Timeout bounds each database call of the methods that take no
	// context: [Pacer.SetRate], [Pacer.PauseUntil], and the give-back of a
	// slot after a cancelled [Pacer.WaitN]. Negative is an error. Defaults
	// to 5s.
	Timeout time.Duration

	// Logger receives the errors that no caller can: a PauseUntil or a
	// give-back that could not reach the database. Nil means silent.
	Logger *slog.Logger

	// HoldAfterCut is how long after a cut of the shared rate the climbs of
	// other pacers are ignored, and within which cuts by other pacers
	// count as the same overshoot (the deepest applies, they do not
	// compound); see [Pacer.SetRate]. Processes sharing a key should agree
	// on it. Negative is an error. Defaults to 2s.
	HoldAfterCut time.Duration

	// MaxGrowth is the largest factor by which climbs may raise the shared
	// rate per second, whatever the number of processes climbing at once
	// (at most one second of growth is banked while no one climbs): so
	// many controllers cannot ratchet the rate up faster than one
	// controller's slow start doubles it. Processes sharing a key should
	// agree on it. It must be in (1, 1000]; 0 means the default. Defaults
	// to 2 (doubling per second).
	MaxGrowth float64

	// BookAhead is the furthest ahead of the database's now that
	// [Pacer.WaitN] books a slot: a caller whose slot is further away
	// waits without booking and books when it comes within BookAhead. A
	// booking is never given back by a process that dies (kill -9, a lost
	// machine) while it waits, and it delays every process sharing the
	// key; so a dead process leaves at most BookAhead of such debt,
	// however many of its callers were waiting. The callers of one Pacer
	// take turns to book, so they do not poll the database together. Too
	// short and a slot may pass while its booking travels to the
	// database. Negative is an error. Defaults to 100ms.
	BookAhead time.Duration
}

// Defaults of [PacerConfig].
const (
	defaultHoldAfterCut = 2 * time.Second
	defaultMaxGrowth    = 2.0
	defaultBookAhead    = 100 * time.Millisecond
)

// Pacer is a GCRA pacer whose state lives in one database row per key, so
// every process that paces the provider, on any machine, draws on one
// budget: it implements [budget.Pacer], for [budget.Config.Pacer] or
// [budget.RegistryConfig.NewPacer].
//
// Each admission is a single statement that locks the row, runs the exact
// arithmetic of [gcra.Reserve] (or [gcra.Decide]) in SQL and writes the new
// theoretical arrival time (TAT), so concurrent admissions from any number
// of processes serialize on the row and never share a slot.
//
// # Time
//
// The shared TAT is kept on the database clock (clock_timestamp(), in
// nanoseconds since the Unix epoch): machines whose clocks disagree still
// agree on the schedule, because only the database's clock places
// bookings. A caller receives a duration to wait, which is immune to skew.
// Likewise [Pacer.PauseUntil] turns its local deadline into a delay from
// the caller's now and applies it from the database's now. The forms ending
// in At take times on that shared time base instead, for tests and for
// hosts that pass one trusted clock everywhere; do not mix them with the
// plain forms on a key unless the clocks agree. Explicit times must lie
// between the years 1678 and 2262 (int64 nanoseconds since the epoch).
//
// # Rate
//
// The rate is shared too, and changed by a policy rather than by the last
// writer: see [Pacer.SetRate]. [Pacer.Rate] reads it.
//
// A Pacer holds no budget state in memory, only the rate its controller
// last proposed and a pause it could not store yet; it is safe for
// concurrent use, and many Pacers (in many processes) may share a key.
// Give each rate controller a Pacer of its own.
type Pacer struct {
	s            *Store
	key          string
	id           int64 // this pacer's identity in the rate policy
	iv           int64 // interval of a row this pacer creates
	burst        int   // burst of a row this pacer creates
	timeout      time.Duration
	log          *slog.Logger
	holdAfterCut time.Duration
	growth       float64
	ahead        time.Duration // BookAhead
	head         chan struct{} // held by the one WaitN that books next

	rateMu sync.Mutex // serializes SetRate; guards lastIV
	lastIV int64      // the interval this pacer last proposed; 0 before the first

	mu      sync.Mutex
	pending time.Time // a pause not yet stored (local clock); zero if none

	onAdmit func(slot int64) // tests: the database time each WaitN admission conforms at
}

var _ budget.Pacer = (*Pacer)(nil)

// NewPacer returns the pacer of key (a provider key, e.g. "binance"). It
// performs no I/O: the row is created on first use. It returns an error
// wrapping [ErrInvalidConfig] for an empty key or a field out of range.
func (s *Store) NewPacer(key string, cfg PacerConfig) (*Pacer, error) {
	bad := func(field, rule string, got any) error {
		return invalid.Must("PacerConfig."+field, "be "+rule, got)
	}
	if key == "" {
		return nil, invalid.Must("NewPacer's key", "not be empty: name the provider, e.g. \"binance\"", `""`)
	}
	rate := cfg.Rate
	if rate == 0 {
		rate = gcra.DefaultRate
	}
	iv, rule := intervalOf(rate)
	if rule != "" {
		return nil, bad("Rate", rule, cfg.Rate)
	}
	burst := cfg.Burst
	switch {
	case burst < 0:
		return nil, bad("Burst", ">= 0", cfg.Burst)
	case burst == 0:
		burst = 1
	}
	if int64(burst) > math.MaxInt64/iv {
		return nil, bad("Burst", fmt.Sprintf("such that Burst × interval (%v) fits in int64 nanoseconds", time.Duration(iv)), cfg.Burst)
	}
	timeout := cfg.Timeout
	switch {
	case timeout < 0:
		return nil, bad("Timeout", ">= 0", cfg.Timeout)
	case timeout == 0:
		timeout = 5 * time.Second
	}
	holdAfterCut := cfg.HoldAfterCut
	switch {
	case holdAfterCut < 0:
		return nil, bad("HoldAfterCut", ">= 0", cfg.HoldAfterCut)
	case holdAfterCut == 0:
		holdAfterCut = defaultHoldAfterCut
	}
	growth := cfg.MaxGrowth
	switch {
	case growth == 0:
		growth = defaultMaxGrowth
	case !(growth > 1 && growth <= 1000):
		return nil, bad("MaxGrowth", "in (1, 1000]", cfg.MaxGrowth)
	}
	ahead := cfg.BookAhead
	switch {
	case ahead < 0:
		return nil, bad("BookAhead", ">= 0", cfg.BookAhead)
	case ahead == 0:
		ahead = defaultBookAhead
	}
	return &Pacer{s: s, key: key, id: rand.Int64(), iv: iv, burst: burst, timeout: timeout, log: cfg.Logger,
		holdAfterCut: holdAfterCut, growth: growth, ahead: ahead, head: make(chan struct{}, 1)}, nil
}

// intervalOf converts a rate in events per second to a whole number of
// nanoseconds exactly as gcra does, or names the rule the rate breaks.
func intervalOf(rate float64) (int64, string) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return 0, "> 0 and finite"
	}
	if rate > 1e9 {
		return 0, "at most 1e9 per second (an interval of at least 1ns)"
	}
	iv := math.Round(1e9 / rate)
	if iv >= math.MaxInt64 {
		return 0, "large enough that its interval fits in int64 nanoseconds"
	}
	return int64(iv), ""
}

// Key returns the provider key the pacer shares.
func (p *Pacer) Key() string { return p.key }

// Wait blocks until one request conforms, booking it; it is WaitN(ctx, 1).
func (p *Pacer) Wait(ctx context.Context) error { return p.WaitN(ctx, 1) }

// WaitN blocks until n units conform and books them, as
// [gcra.Limiter.WaitN] does, and returns nil when the request may be sent.
// It books only once the slot is within [PacerConfig.BookAhead] of the
// database's now (one statement; before that it sleeps without booking),
// so a process that dies while waiting leaves almost nothing booked; the
// callers of one Pacer take turns to book. If ctx ends while waiting, or
// its deadline comes before the slot would, it gives a booked slot back
// (another statement) and returns ctx.Err(), or at once an error wrapping
// [gcra.ErrWouldExceedDeadline]. A cost outside [0, Burst] returns an
// error wrapping [gcra.ErrInvalidCost] without booking. A database error
// is returned as is; if it struck after the booking committed, the slot
// is lost, which only slows the pacer.
func (p *Pacer) WaitN(ctx context.Context, n int) (err error) {
	if n < 0 {
		return fmt.Errorf("pgstore: pacer %q: WaitN cost %d: %w", p.key, n, gcra.ErrInvalidCost)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case p.head <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	headHeld := true
	defer func() {
		if headHeld {
			<-p.head
		}
	}()
	if err := p.flushPause(ctx); err != nil {
		return err
	}
	for {
		// The booking runs outside ctx: cancelled mid-flight, the
		// statement may still commit on the server and its slot would be
		// lost. If ctx ended meanwhile, the slot is given back below.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
		wait, burst, now, booked, err := p.reserveWithin(rctx, nil, n, p.ahead)
		cancel()
		if err != nil {
			return err
		}
		if wait == gcra.Never {
			return fmt.Errorf("pgstore: pacer %q: WaitN cost %d with Burst %d: %w", p.key, n, burst, gcra.ErrInvalidCost)
		}
		if deadline, ok := ctx.Deadline(); ok {
			if left := time.Until(deadline); left < wait {
				if booked {
					p.giveBack(ctx, n)
				}
				return fmt.Errorf("%w (pacer %q: wait %v, deadline in %v)", gcra.ErrWouldExceedDeadline, p.key, wait, left)
			}
		}
		if !booked {
			// Too far ahead to book: sleep until the slot comes within
			// BookAhead, still at the head, and ask again.
			if !sleepCtx(ctx, wait-p.ahead) {
				return ctx.Err()
			}
			continue
		}
		<-p.head // the next caller may book while this one waits its slot
		headHeld = false
		if p.onAdmit != nil {
			defer func() {
				if err == nil {
					p.onAdmit(now + int64(wait))
				}
			}()
		}
		if err := ctx.Err(); err != nil {
			p.giveBack(ctx, n)
			return err
		}
		if wait == 0 {
			return nil
		}
		if !sleepCtx(ctx, wait) {
			p.giveBack(ctx, n)
			return ctx.Err()
		}
		return nil
	}
}

// sleepCtx sleeps for d, and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// giveBack returns an unused slot, outside ctx (which may be done), and
// logs a failure: the slot is then lost, which only slows the pacer.
func (p *Pacer) giveBack(ctx context.Context, n int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
	defer cancel()
	if err := p.unreserve(ctx, nil, n); err != nil && p.log != nil {
		p.log.Warn("pgstore: pacer could not give a slot back", "key", p.key, "cost", n, "err", err)
	}
}

// PauseUntil holds every request of every process sharing the key until t
// (a provider's Retry-After), as [gcra.Limiter.PauseUntil] does: the TAT
// moves forward to at least t + L, never backwards. t is read on the local
// clock and applied as the delay t − time.Now() from the database's now.
// PauseUntil cannot report an error: if the database cannot be reached, the
// pause is logged and kept, and the next WaitN stores it first.
func (p *Pacer) PauseUntil(t time.Time) {
	p.mu.Lock()
	if t.After(p.pending) {
		p.pending = t
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if err := p.flushPause(ctx); err != nil && p.log != nil {
		p.log.Warn("pgstore: pacer could not store a pause; the next WaitN retries", "key", p.key, "until", t, "err", err)
	}
}

// flushPause stores the pending pause, if any.
func (p *Pacer) flushPause(ctx context.Context) error {
	p.mu.Lock()
	t := p.pending
	p.mu.Unlock()
	if t.IsZero() {
		return nil
	}
	delay := int64(time.Until(t))
	if err := p.pause(ctx, nil, &delay); err != nil {
		return err
	}
	p.mu.Lock()
	if p.pending.Equal(t) {
		p.pending = time.Time{}
	}
	p.mu.Unlock()
	return nil
}
