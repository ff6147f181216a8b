package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/gcra"
	"github.com/forage-go/forage/internal/redact"
	"github.com/forage-go/forage/retry"
)

// errNoAttempt is the error of a Do call with a nil attempt.
var errNoAttempt = errors.New("budget: Do needs an attempt (got nil)")

// do is local.Do without the metrics of a call's stop.
func (p *local) do(ctx context.Context, run *Run, attempt func(context.Context) forage.Outcome, opts ...CallOption) error {
	if attempt == nil {
		return &Error{Provider: p.key, Reason: forage.ReasonPermanent, Err: errNoAttempt}
	}
	var o CallOption
	for _, opt := range opts {
		if opt.Weight < 0 {
			return &Error{Provider: p.key, Reason: forage.ReasonPermanent, Err: fmt.Errorf("%w: Weight %d: a weight is at least 1", ErrInvalidConfig, opt.Weight)}
		}
		o.Weight = max(o.Weight, opt.Weight)
		o.NoRetry = o.NoRetry || opt.NoRetry
		o.keepContext = o.keepContext || opt.keepContext
		if opt.borrow != nil {
			o.borrow = opt.borrow
		}
		if opt.settle != nil {
			o.settle = opt.settle
		}
	}
	if o.Weight == 0 {
		o.Weight = 1
	}
	if err := p.checkWeight(o.Weight); err != nil {
		return err // before any admit or pacing: such a call can never be sent
	}
	var bo *retry.Backoff   // made on the first retry: the success path needs none
	var last forage.Outcome // the previous attempt's outcome, for the stop error
	for try := 0; ; try++ {
		out, class, err := p.once(ctx, run, attempt, o, try == 0)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				if e.Status == 0 && e.Err == nil {
					e.Status, e.Err = last.Status, last.Err // keep what the provider last said
				}
				e.sent = try > 0 || class == forage.Canceled // once's Canceled: stopped mid-attempt
			}
			return err
		}
		if class == forage.Success {
			return nil
		}
		last = out
		stop := &Error{Provider: p.key, Reason: stopReason(class), Status: out.Status, Err: out.Err, sent: true}
		if p.banned(class, out) {
			stop.Reason = forage.ReasonBanned
		}
		if !class.Retryable() || stop.Reason == forage.ReasonBanned || o.NoRetry || try+1 >= p.cfg.MaxAttempts {
			stop.Until = p.until(stop.Reason)
			return stop
		}
		if bo == nil {
			bo, _ = retry.NewBackoff(p.cfg.Backoff) // validated in New
		}
		now := time.Now()
		wake := now.Add(retry.Floor(bo.NextBackOff(), out.RetryAfter))
		forced := out.RetryAfter > 0
		if pu := p.ctl.Snapshot().PausedUntil; pu.After(wake) {
			wake, forced = pu, true
		}
		if wake.Sub(now) > p.cfg.MaxWait {
			stop.Until = wake
			return stop // a long pause: the scheduler waits it out, not Do
		}
		if left, ok := run.remaining(now); ok && wake.Sub(now) >= left {
			if forced {
				stop.Until = wake // the provider's pause outlasts the run
				return stop
			}
			return &Error{Provider: p.key, Reason: forage.ReasonDeadline, Status: out.Status, Err: out.Err, sent: true}
		}
		if d, ok := ctx.Deadline(); ok && wake.After(d) {
			if forced {
				stop.Until = wake // the pause outlasts the caller's deadline
				return stop
			}
			return &Error{Provider: p.key, Reason: forage.ReasonCanceled, Status: out.Status, Err: context.DeadlineExceeded, sent: true}
		}
		// The token is taken before the sleep, so a retry that is then
		// refused (breaker, run, deadline) has spent it: conservative, the
		// budget is never exceeded.
		if !p.retryBudget(run).Withdraw() {
			// The call stops for what the provider did: the retry budget
			// only says the run may not retry it. (Stopped as a spent
			// budget, a provider that never answered read as a planned
			// hand-off, and a scheduler never counted a failure.)
			p.warnSpent(out.Status)
			stop.Err, stop.Until = retrySpent(out.Err), p.until(stop.Reason)
			return stop
		}
		p.logRetry(try+1, class, out, wake.Sub(now))
		if err := sleepUntil(ctx, wake); err != nil {
			return &Error{Provider: p.key, Reason: forage.ReasonCanceled, Status: out.Status, Err: err, sent: true}
		}
	}
}

// logRetry logs at Debug that attempt n of a call met class and is tried
// again after wait: a retried failure (a 502, a body that did not decode)
// is otherwise seen only in the counters.
func (p *local) logRetry(n int, class forage.Class, out forage.Outcome, wait time.Duration) {
	l := p.cfg.Logger
	if l == nil || !l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.Int("attempt", n), slog.String("class", class.String()), slog.Duration("wait", wait)}
	if out.Status != 0 {
		attrs = append(attrs, slog.Int("status", out.Status))
	}
	if out.Err != nil {
		attrs = append(attrs, slog.String("error", redact.String(out.Err.Error())))
	}
	p.event(slog.LevelDebug, "budget: retrying", attrs...)
}

// retrySpent is the error of a call stopped because the run's retry
// budget had no token for a retry: [retry.ErrBudgetExhausted], with what
// the provider last said.
func retrySpent(err error) error {
	if err == nil {
		return retry.ErrBudgetExhausted
	}
	return fmt.Errorf("%w: %w", retry.ErrBudgetExhausted, err)
}

// checkWeight refuses a weight a weighted limit cannot carry in one call:
// above both its burst and half its count (see heaviest); the whole
// limit's, not this process's share of it (a call the limit admits is
// legal in every process; see reserve).
func (p *local) checkWeight(weight int) error {
	for _, l := range p.cfg.Limits {
		if most := l.heaviest(); l.Weighted && weight > most {
			return &Error{Provider: p.key, Reason: forage.ReasonPermanent,
				Err: fmt.Errorf("%w: weight %d exceeds the %d limit %q carries in one call (its Burst, or half its Count); raise its Burst to the weight", ErrInvalidConfig, weight, most, l.Name)}
		}
	}
	return nil
}

// reserve books a call of cost n in lim at at, and unreserve gives it
// back, in pieces of at most the burst. A call may weigh more than the
// limiter's burst B: up to half the limit's count with the default burst
// (a weight of 2 against 10 per second, whose burst is 1, failed as
// permanent), or more than a process's share of the burst when a weighted
// limit is shared (a weight of 10 against a burst of 10 split in two).
// Such a call waits until the limiter has been idle n − B intervals (see
// waitAt): its units are then those of a stream the limiter admits, n − B
// paced out over that time and a burst of B at its end, all sent at the
// end; the calls after it follow as they would that stream's. Every
// window of the limit's Per that holds the call holds what one of that
// stream's windows holds, as long as those n − B intervals are at most
// half of Per (n ≤ (Count + B)/2; for a share, of the share's rate).
// (Sent as soon as the burst was there, with 2n − B units booked, a weight
// of 5 after three of 2 put 11 units in a minute against 10.)
func reserve(lim *gcra.Limiter, at time.Time, n int) {
	for b := lim.Burst(); n > 0; n -= b {
		lim.ReserveNAt(at, min(n, b))
	}
}

// unreserve gives back what reserve booked, while it is still the last
// booked (see unbookLimits).
func unreserve(lim *gcra.Limiter, now time.Time, n int) {
	for b := lim.Burst(); n > 0; n -= b {
		lim.UnreserveNAt(now, min(n, b))
	}
}

// once makes at most one attempt: admit, breaker, bulkhead, pacing, the
// attempt itself, and the feedback. A non-nil error means no attempt was
// made (or the caller gave up) and the call must stop with it.
func (p *local) once(ctx context.Context, run *Run, attempt func(context.Context) forage.Outcome, o CallOption, first bool) (forage.Outcome, forage.Class, error) {
	if err := ctx.Err(); err != nil {
		return forage.Outcome{}, 0, &Error{Provider: p.key, Reason: forage.ReasonCanceled, Err: err}
	}
	if err := p.operatorPaused(); err != nil {
		return forage.Outcome{}, 0, err // before each attempt: a retry too
	}
	if reason, ok := run.admitAt(time.Now()); !ok {
		return forage.Outcome{}, 0, &Error{Provider: p.key, Reason: reason}
	}
	// Fail fast before waiting for a slot when the breaker is open; the
	// ticket itself is taken after pacing, so a breaker that opened during
	// the wait still stops the attempt.
	if p.brk.State() == breaker.StateOpen {
		return forage.Outcome{}, 0, p.fastFail(run, breaker.ErrOpen)
	}
	t0 := p.metricsClock()
	held, err := p.acquire(ctx, run, o.Weight, o.borrow)
	if err != nil {
		run.unadmit()
		return forage.Outcome{}, 0, err
	}
	o.held = held
	if err := p.operatorPaused(); err != nil {
		// Paused by an operator while the call waited for its slot: no
		// attempt (the slot is spent).
		p.release(o.held)
		run.unadmit()
		return forage.Outcome{}, 0, err
	}
	done, err := p.brk.Allow()
	if err != nil {
		p.release(o.held)
		return forage.Outcome{}, 0, p.fastFail(run, err)
	}
	if first {
		p.retryBudget(run).Deposit()
	} else {
		p.n.retries.Add(1)
	}
	p.begin(t0, first)
	out, start, end, timedOut := p.call(ctx, attempt, o, done)
	asked := out.RetryAfter
	out.RetryAfter = min(out.RetryAfter, p.cfg.MaxPause) // see Config.MaxPause
	class, banned := p.read(&out, start, done, o.held)
	if asked > p.cfg.MaxPause && class != forage.Success && class != forage.Canceled {
		// Named, so an operator tells a garbage header clamped to
		// MaxPause from a provider that meant it.
		p.event(slog.LevelWarn, "budget: a pause longer than MaxPause asked; paused for MaxPause",
			slog.Int("status", out.Status), slog.Duration("asked", asked), slog.Duration("max_pause", p.cfg.MaxPause))
	}
	if refused := refusedInside(out, class); refused != nil {
		// A budget refused a request of the attempt before sending it (a
		// known limit spent, a pause, an open breaker: the Transport's
		// answer to a second request of the attempt, or to one keyed to
		// another provider). The provider said nothing: the call stops as
		// that refusal, with its Until. (forage.FromHTTP read it as a
		// permanent failure of the provider, which the counters showed.)
		p.release(o.held)
		done(forage.Canceled)
		p.end(forage.Canceled, out.Latency)
		return out, forage.Canceled, refused
	}
	stuck := false
	switch {
	case out.Err != nil && ctx.Err() != nil:
		class = forage.Canceled // the caller gave up mid-attempt: not the provider's fault
		// Unless, through the Transport (no AttemptTimeout: the caller's
		// context is the attempt's only bound), its deadline came while
		// the attempt had been in flight a second or more and four times
		// as long as the provider's successes take: the provider did not
		// answer in time, which the breaker counts (a provider that never
		// answered was never seen failing). Not one the caller's batch
		// ending caught just after it was sent.
		var unsent *unsentError
		if o.keepContext && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.As(out.Err, &unsent) {
			stuck = end.Sub(start) >= max(4*time.Duration(p.okLatency.Load()), stuckFloor)
		}
	case class == forage.Canceled && timedOut:
		class = forage.Transient // our attempt timeout, not the caller's cancel
	}
	switch {
	case banned && class == forage.Throttled: // not one the caller gave up
		p.ban(end, &out)
	case class == forage.Success && p.bans.Load() != 0:
		p.bans.Store(0) // a ban in a row needs no success in between
	}
	// A 429 to a request sent while a pause an earlier 429 set was in
	// force (it was in flight, or booked, when that came back) is an echo
	// of it: the pause handles it, and the breaker does not count it as an
	// outage (a dozen requests in flight at a window's end opened it for
	// 15 s). A 503 always counts: a provider that is down answers every
	// request in flight with one, and counting each pause's first alone,
	// the breaker never saw enough of them to open.
	echo := class == forage.Throttled && p.ctl.Snapshot().PausedUntil.After(start)
	if class == forage.Success && o.settle != nil {
		// Through the Transport, a success is the provider's once its
		// body is read: until then the request holds its slot and its
		// breaker ticket, and the controller has not heard of it. A body
		// cut short is a transient failure (200s whose bodies a provider
		// under load cut short climbed the rate from 4/s to 726/s in two
		// seconds, the breaker closed), and a streaming answer counts in
		// MaxInFlight until it ends.
		p.settleLater(o.settle, out, start, done, o.held)
		return out, class, nil
	}
	p.release(o.held)
	seen := class // what the provider is told it did
	if stuck {
		seen = forage.Transient
	}
	p.feedback(start, end, &out, seen)
	if seen == forage.Transient || seen == forage.Overloaded {
		p.failed(out)
	}
	// A refusal that leaves no pause in force (a bare 429: a fixed window
	// spent refuses every request until it ends) is the rate's to answer,
	// and the controller's cuts space such refusals out: the provider is
	// up and says so. Counted, a spent window's refusals in a row opened
	// the breaker for 15 s, half of a 30 s run.
	bare := seen == forage.Throttled && !p.ctl.Snapshot().PausedUntil.After(end)
	if echo || bare {
		done(forage.Canceled)
	} else {
		done(seen)
	}
	p.end(seen, out.Latency)
	if class == forage.Canceled {
		return out, class, &Error{Provider: p.key, Reason: forage.ReasonCanceled, Status: out.Status, Err: out.Err}
	}
	return out, class, nil
}

// settleLater arms s to settle a success through the Transport once its
// body ends (see once): the slot, the feedback (a transient failure when
// the body was cut short), the breaker ticket and the metrics. A function
// of its own, so that a call that settles at once allocates nothing for
// the closure.
func (p *local) settleLater(s *settler, out forage.Outcome, start time.Time, done func(forage.Class), held chan struct{}) {
	p.n.settling.Add(1) // within the call: a registry drops the provider only once it is settled
	s.set(func(bodyErr error) {
		defer p.n.settling.Add(-1) // after the End: a Forget never comes between
		p.release(held)
		now, seen := time.Now(), forage.Success
		if gave := (*gaveUpError)(nil); errors.As(bodyErr, &gave) {
			// The request's context ended before the body did. A cancel
			// is the caller's, and so is a deadline soon after the send;
			// one that came a second or more, and four times as long as
			// the provider's answers take, after the send is a provider
			// that stalled its body, by the rule for one that stalls its
			// headers (see Do). A host that sent its headers, then a byte
			// every 200 ms, was counted a success each time, and its rate
			// rose.
			bodyErr = nil
			if errors.Is(gave.err, context.DeadlineExceeded) && now.Sub(start) >= max(4*time.Duration(p.okLatency.Load()), stuckFloor) {
				bodyErr = fmt.Errorf("the response body was still coming at the caller's deadline, %v after the request was sent: %w",
					now.Sub(start).Round(time.Millisecond), gave.err)
			}
		}
		if bodyErr != nil {
			seen, out.Err = forage.Transient, forage.Mark(forage.FromHTTP(nil, bodyErr).Err, forage.Transient)
		}
		p.feedback(start, now, &out, seen)
		if seen == forage.Transient {
			p.failed(out)
		}
		done(seen)
		p.end(seen, out.Latency)
	})
}

// refusedInside returns the refusal of a budget that an attempt's failed
// outcome carries, made before its request was sent, or nil.
func refusedInside(out forage.Outcome, class forage.Class) *Error {
	if class == forage.Success || out.Status != 0 || out.Err == nil {
		return nil
	}
	var e *Error
	if !errors.As(out.Err, &e) || e.sent {
		return nil
	}
	return e
}

// stuckFloor is the least time in flight for a request the caller's
// deadline ended to count as the provider's failure (see Do).
const stuckFloor = time.Second

// call runs the attempt under its timeout; the caller releases the
// bulkhead slot. If the attempt panics, the slot is released, the breaker
// ticket reported as canceled (ignored), and the panic goes on up.
func (p *local) call(ctx context.Context, attempt func(context.Context) forage.Outcome, o CallOption, done func(forage.Class)) (out forage.Outcome, start, end time.Time, timedOut bool) {
	actx, cancel := ctx, context.CancelFunc(nil)
	if p.cfg.AttemptTimeout > 0 && !o.keepContext {
		actx, cancel = context.WithTimeout(ctx, p.cfg.AttemptTimeout)
	}
	finished := false
	defer func() {
		if cancel != nil {
			cancel()
		}
		if !finished {
			p.release(o.held)
			done(forage.Canceled)
			p.end(forage.Canceled, time.Since(start))
		}
	}()
	// The attempt is this provider's: a Transport on its registry that the
	// attempt's request goes through sends it as this attempt, not as a
	// call of its own (see attemptKey).
	// Only where a Transport may send: a context costs an allocation.
	if p.transported != nil && p.transported.Load() {
		actx = context.WithValue(actx, attemptKey{}, &attemptMark{p: p})
	}
	start = time.Now()
	out = attempt(actx)
	end = time.Now()
	finished = true
	out.Latency = end.Sub(start)
	return out, start, end, actx != ctx && actx.Err() != nil
}

// read classifies an attempt's outcome and tells whether it is a ban,
// through the host's hooks (Config.Classify, Config.Ban). A hook that
// panics gives back the slot and the breaker ticket on the way up, as a
// panicking attempt does (see call): a host that recovered (net/http and
// the scheduler do) lost a slot per panic, and once MaxInFlight hooks had
// panicked every call of the provider waited for a slot for good.
func (p *local) read(out *forage.Outcome, start time.Time, done func(forage.Class), held chan struct{}) (class forage.Class, banned bool) {
	finished := false
	defer func() {
		if !finished {
			p.release(held)
			done(forage.Canceled)
			p.end(forage.Canceled, time.Since(start))
		}
	}()
	class = p.classify(out)
	banned = p.banned(class, *out)
	finished = true
	return class, banned
}

// classify reads an attempt's outcome: the host's Config.Classify, or the
// default rules; an answer Config.Ban calls a ban is throttling.
func (p *local) classify(out *forage.Outcome) forage.Class {
	var c forage.Class
	if p.cfg.Classify == nil {
		c = out.Class()
	} else if c = p.cfg.Classify(*out); c > forage.Canceled {
		c = forage.Permanent
	}
	if c != forage.Success && c != forage.Canceled && p.cfg.Ban != nil && p.cfg.Ban(*out) {
		c = forage.Throttled // a ban refuses for rate, whatever its status says
	}
	return c
}

// fastFail is the stop for a call the breaker refused: no attempt made, the
// run's admit given back. Its error names the last failure the breaker
// counted, so "circuit open" says what the provider did (refused
// connections, a timeout, 502s).
func (p *local) fastFail(run *Run, err error) error {
	run.unadmit()
	p.n.fastFails.Add(1)
	if last := p.lastFail.Load(); last != nil {
		err = fmt.Errorf("%w (the last failure: %s)", err, *last)
	}
	return &Error{Provider: p.key, Reason: forage.ReasonCircuitOpen, Until: p.until(forage.ReasonCircuitOpen), Err: err}
}

// failed notes the cause of a failed attempt for fastFail: the status of
// an answer (never its body), or the redacted error of an attempt that got
// none (refused connection, unknown host, timeout) or whose 2xx answer the
// host could not read (HTML where JSON was due, a truncated body: "HTTP
// 200" alone said nothing of why it failed).
func (p *local) failed(out forage.Outcome) {
	why := fmt.Sprintf("HTTP %d", out.Status)
	switch {
	case out.Status == 0 && out.Err != nil:
		why = redact.String(out.Err.Error())
	case out.Status/100 == 2 && out.Err != nil:
		why += ": " + redact.String(out.Err.Error())
	}
	if r := []rune(why); len(r) > maxFailText {
		why = string(r[:maxFailText]) + "…"
	}
	p.lastFail.Store(&why)
}

// maxFailText bounds the last failure's text in a stop's error, in runes.
const maxFailText = 200

// release gives back a bulkhead slot, or the attempt's slot borrowed (see
// CallOption.borrow) when held is not nil.
func (p *local) release(held chan struct{}) {
	if held != nil {
		<-held
		return
	}
	<-p.slots
	p.n.inFlight.Add(-1)
}

// retryBudget returns run's retry budget, or for calls without a run the
// provider's own, so retries are always budgeted.
func (p *local) retryBudget(run *Run) *retry.Budget {
	if rb := run.retryBudget(); rb != nil {
		return rb
	}
	return p.retries
}

// acquire waits for a bulkhead slot, the pacer and every known limit, never
// past the run's deadline nor a pause or a known quota's wait longer than
// MaxWait. On error it holds nothing.
func (p *local) acquire(ctx context.Context, run *Run, weight int, borrow chan struct{}) (held chan struct{}, err error) {
	now := time.Now()
	if pu := p.ctl.Snapshot().PausedUntil; pu.After(now) && p.outlasts(ctx, run, pu, now) {
		// A pause (Retry-After, a ban) longer than a call may wait, or
		// than the run or the caller has left: the scheduler waits it
		// out, not the call, and learns at once when it may resume.
		// follow retries a save of the pause that failed: no response
		// comes to do it.
		p.follow(now)
		if p.cfg.Shares != nil {
			p.sh.waited.Add(1)
		}
		return nil, &Error{Provider: p.key, Reason: p.pauseReason(now), Until: pu}
	}
	if w := p.quotaWait(now, weight); w > 0 && p.outlasts(ctx, run, now.Add(w), now) {
		// A known quota spent for longer than the call may wait: a planned
		// wait for the scheduler, told at once, with nothing booked.
		return nil, p.quotaSpent(now.Add(w))
	}
	wctx, runBound := ctx, false
	if d, ok := run.Deadline(); ok {
		if cd, has := ctx.Deadline(); !has || d.Before(cd) {
			var cancel context.CancelFunc
			wctx, cancel = context.WithDeadline(ctx, d)
			defer cancel()
			runBound = true
		}
	}
	fail := func(err error) error {
		if ctx.Err() != nil || (!runBound && errors.Is(err, context.DeadlineExceeded)) {
			// The caller's own context ended, or its deadline comes before
			// the slot: the caller gives up, the run is not spent. In the
			// second case Until says when the slot comes: a caller that
			// tries again at once is refused at once (a worker's loop
			// spun 54,000 times a second on it, knowing no better).
			e := &Error{Provider: p.key, Reason: forage.ReasonCanceled, Err: err}
			if ctx.Err() == nil {
				now := time.Now()
				e.Until = p.nextSlot(now, weight)
				if pu := p.ctl.Snapshot().PausedUntil; pu.After(e.Until) {
					e.Until = pu
				}
			}
			return e
		}
		if errors.Is(err, context.DeadlineExceeded) {
			now := time.Now()
			reason, until := forage.ReasonDeadline, p.nextSlot(now, weight)
			if p.ctl.Snapshot().PausedUntil.After(now) {
				reason = p.pauseReason(now) // the provider's pause outlasts the run
				until = p.until(reason)
			}
			return &Error{Provider: p.key, Reason: reason, Until: until, Err: err}
		}
		// The pacer failed by itself (a host's Pacer whose backend went
		// away): not the provider's verdict.
		return &Error{Provider: p.key, Reason: forage.ReasonPacer, Err: err}
	}
	select {
	case p.slots <- struct{}{}:
	default:
		p.n.saturated.Add(1)
		select {
		case p.slots <- struct{}{}:
		case borrow <- struct{}{}:
			// A request inside an attempt of this provider, every slot
			// taken: it borrows the attempt's own, one such request at a
			// time (waiting for a slot of its own, it waited for good
			// under MaxInFlight 1 for the slot its attempt held).
			held = borrow
		case <-wctx.Done():
			return nil, fail(wctx.Err())
		}
	}
	if held == nil {
		p.n.inFlight.Add(1)
	}
	if err := p.pace(wctx, run, weight, now); err != nil {
		p.release(held)
		var stop *Error
		if errors.As(err, &stop) { // a planned wait: a known quota, a pause learned from the others
			return nil, err
		}
		return nil, fail(err)
	}
	return held, nil
}

// outlasts reports whether a wait until pu (a pause, or a known quota's
// next slot) is longer than a call that began waiting at now may wait:
// past MaxWait, or ending at or after the run's deadline or ctx's. Such a
// call stops at once, rather than sleeping until a deadline it cannot meet.
func (p *local) outlasts(ctx context.Context, run *Run, pu, now time.Time) bool {
	if pu.Sub(now) > p.cfg.MaxWait {
		return true
	}
	if d, ok := run.Deadline(); ok && !pu.Before(d) {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !pu.Before(d)
}

// pace waits for the adaptive pacer (one unit per request) and then for each
// known limit (one unit, or weight when the limit is weighted). With limits
// known, the wait from start is bounded as local.outlasts says: a longer
// one stops the call with [forage.ReasonQuota], its limit slots given back (a
// pacer slot already taken stays spent: conservative). acquire has already
// refused, booking nothing, a call whose wait it could foresee; this bound
// catches the calls that lost a race for the same slots.
func (p *local) pace(ctx context.Context, run *Run, weight int, start time.Time) error {
	for {
		for {
			if p.cfg.Shares != nil {
				if err := p.waitShare(ctx, run, start); err != nil {
					return err
				}
			}
			if err := p.waitPacer(ctx, weight, start); err != nil {
				return err
			}
			p.keepPace(time.Now())
			if p.cfg.Shares == nil || p.inTurn(time.Now()) {
				break
			}
			// The pacer's slot came after this process's turn: the slot is
			// spent (nothing was sent), and the call waits for the next turn.
		}
		if p.cfg.Shares != nil {
			now := time.Now()
			p.sh.usedAt.Store(now.UnixNano()) // before used: a renewal that sees the call sees when it came
			p.sh.used.Add(1)
			if now.Sub(start) > time.Millisecond {
				p.sh.waited.Add(1) // the pacer held it: this process would use more
			}
		}
		if len(p.lims()) == 0 {
			return nil
		}
		for {
			now := time.Now()
			at, b, ok := p.bookLimits(now, weight, func(at time.Time) bool { return p.outlasts(ctx, run, at, start) })
			if !ok {
				return p.quotaSpent(at) // nothing booked
			}
			if p.cfg.Shares != nil && at.Sub(now) > time.Millisecond {
				p.sh.waited.Add(1) // a known limit held it: this process would use more of it
			}
			err := sleepUntil(ctx, at)
			p.woke(b)
			if err != nil {
				p.unbookLimits(b)
				return err
			}
			if p.limits.Load() == b.lims && p.slotsHold(b) {
				break
			}
			// This process's share of the limits changed while the call
			// waited (see splitLimits): its slot was booked at the old
			// share, which another process may hold now. It books again
			// at the new one. (Calls booked at a quarter went out at a
			// quarter after their process was cut to a fiftieth and
			// another granted the rest: 180 units in a second against a
			// limit of 100.)
		}
		if p.cfg.Shares != nil && p.sh.fraction() == 0 {
			// This process's share went to nothing while the call waited
			// for its slot (another learns the provider alone): its limits
			// keep the last share, which is no longer its to send at, so
			// the call waits for a share again (three processes cut to
			// nothing sent 60 units a second against a limit of 100 that
			// another held whole).
			continue
		}
		if p.ctl.Snapshot().PausedUntil.After(time.Now()) {
			// A Retry-After came while the call waited for its slot: its
			// slots are spent (conservative), and it waits for the pause,
			// or stops, as any call does.
			continue
		}
		return nil
	}
}

// slotsHold reports whether the slots b was booked in are still open: a
// call that woke late missed its slot, and books again. (Slots that are no
// longer this process's come with new limiters: see setSlots.)
func (p *local) slotsHold(b booking) bool {
	return b.closes.IsZero() || time.Now().Before(b.closes)
}

// booking is one call's booking of the known limits, for unbookLimits.
type booking struct {
	lims    *[]*gcra.Limiter
	gen     uint64
	weight  int
	pending bool // booked ahead of now: counted in local.pending until it wakes
	// closes is when the first of its slots closes (zero when no limit
	// is slotted), and last the slots used before it, per known limit
	// (see slotAt).
	closes time.Time
	last   []int64
}

// bookLimits books a call of weight in every known limit at one time, at,
// the latest at which each of them admits it, so the call is sent when
// every limit counts it. (Booked one after another with a sleep between,
// the calls that passed one limit at its pace queued behind another's slow
// slots and went out together: 41 in 40 ms against a limit of 10 a
// second.) When stop(at) says the call may not wait that long, it books
// nothing and reports false.
func (p *local) bookLimits(now time.Time, weight int, stop func(time.Time) bool) (time.Time, booking, bool) {
	p.limMu.Lock()
	defer p.limMu.Unlock()
	ptr := p.limits.Load()
	at := now
	for i, lim := range *ptr {
		if t := now.Add(waitAt(lim, now, p.cost(i, weight))); t.After(at) {
			at = t
		}
	}
	at, slots := p.slotsAt(at, weight)
	if at.After(now) && stop(at) {
		return at, booking{}, false
	}
	pending := at.After(now)
	for i, lim := range *ptr {
		reserve(lim, at, p.cost(i, weight))
		if pending {
			p.pending[i] += p.cost(i, weight)
		}
	}
	p.keepSpent(now, *ptr)
	p.limGen++
	b := booking{lims: ptr, gen: p.limGen, weight: weight, pending: pending}
	if slots != nil {
		b.last = slices.Clone(p.slot.last)
		for i, j := range slots {
			if j != noSlot {
				length, open := slotShape(p.cfg.Limits[i])
				if c := time.Unix(0, j*length+open); b.closes.IsZero() || c.Before(b.closes) {
					b.closes = c
				}
				p.slot.last[i] = j
			}
		}
	}
	return at, b, true
}

// noSlot marks a known limit that is not slotted in slotsAt's answer.
const noSlot = math.MinInt64

// slotsAt returns the first time at or after at at which every slotted
// known limit lets this process send a call of weight, and the slot of
// each (noSlot for a limit not slotted; nil when none is). A process that
// holds no slot of a slotted limit sends at a slot's start a cycle later,
// by which time a renewal will have given it some, or stopped it. p.limMu
// is held.
func (p *local) slotsAt(at time.Time, weight int) (time.Time, []int64) {
	if !slices.Contains(p.slot.on, true) {
		return at, nil
	}
	slots := make([]int64, len(p.slot.on))
	for range 8 { // limits of different slot lengths: until every slot agrees
		moved := false
		for i, on := range p.slot.on {
			slots[i] = noSlot
			if !on {
				continue
			}
			t, j, ok := p.slotAt(i, at, p.cost(i, weight))
			if !ok {
				length, _ := slotShape(p.cfg.Limits[i])
				return at.Add(time.Duration(length) * slotCycle), nil
			}
			slots[i] = j
			if t.After(at) {
				at, moved = t, true
			}
		}
		if !moved {
			break
		}
	}
	return at, slots
}

// woke takes b's units out of the pending ones once its call stops waiting
// for its slot (sent or given up), unless the limiters were made again
// since (see splitLimits).
func (p *local) woke(b booking) {
	if !b.pending {
		return
	}
	p.limMu.Lock()
	defer p.limMu.Unlock()
	if p.limits.Load() == b.lims {
		for i := range p.pending {
			p.pending[i] -= p.cost(i, b.weight)
		}
	}
}

// unbookLimits gives back the slots of b, for a call that stops before its
// attempt, when they are still the last booked (no call booked after it,
// and the limits were not replaced): giving back booked time takes it off
// the end of the queue, which would hand a later call's slot to the next
// one (150 units in a second against a limit of 100). Otherwise they stay
// spent: conservative.
func (p *local) unbookLimits(b booking) {
	p.limMu.Lock()
	defer p.limMu.Unlock()
	if b.lims == nil || b.gen != p.limGen || p.limits.Load() != b.lims {
		return
	}
	now := time.Now()
	for i, lim := range *b.lims {
		unreserve(lim, now, p.cost(i, b.weight))
	}
	if b.last != nil {
		copy(p.slot.last, b.last)
	}
}

// waitPacer waits for the adaptive pacer. When a known limit sets its
// ceiling, the pacer runs at that limit's rate (for a limit slower than
// aimd's floor, at exactly it), so its wait is the quota's: it is bounded
// by MaxWait from start, past which the call stops with [forage.ReasonQuota].
func (p *local) waitPacer(ctx context.Context, weight int, start time.Time) error {
	limitBy := start.Add(p.cfg.MaxWait)
	if d, ok := ctx.Deadline(); ok && !limitBy.Before(d) {
		return p.pacer.WaitN(ctx, 1) // ctx's deadline comes first
	}
	var err error
	if lp, local := p.pacer.(localPacer); local {
		err = lp.waitBy(ctx, 1, limitBy) // allocates nothing when the slot is free
	} else {
		pctx, cancel := context.WithDeadline(ctx, limitBy)
		err = p.pacer.WaitN(pctx, 1)
		cancel()
	}
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	now := time.Now()
	if pu := p.ctl.Snapshot().PausedUntil; pu.After(now) {
		// A pause longer than MaxWait came while the call waited (one that
		// came before stopped it in acquire): it stops as that would, with
		// the pause's reason. (It slept through a 10-minute Retry-After.)
		reason := p.pauseReason(now)
		return &Error{Provider: p.key, Reason: reason, Until: p.until(reason)}
	}
	if p.ceiling > 0 {
		return p.quotaSpent(now.Add(max(p.pacerWait(now), p.quotaWait(now, weight))))
	}
	return p.pacer.WaitN(ctx, 1) // the learned rate alone: MaxWait does not bound its queue
}

// cost is what a call of weight draws from the i-th known limit.
func (p *local) cost(i, weight int) int {
	if p.cfg.Limits[i].Weighted {
		return weight
	}
	return 1
}

// quotaWait returns how long after now the known limits admit a call of
// weight, booking nothing: the longest wait of any of them, and, when one
// sets the pacer's ceiling, of the local pacer (see local.waitPacer).
// Zero when no limit is known or all admit the call at once.
func (p *local) quotaWait(now time.Time, weight int) time.Duration {
	var w time.Duration
	for i, lim := range p.lims() {
		w = max(w, waitAt(lim, now, p.cost(i, weight)))
	}
	if lp, ok := p.pacer.(localPacer); ok && p.ceiling > 0 {
		w = max(w, waitAt(lp.l, now, 1))
	}
	return w
}

// nextSlot returns when a call of weight could start, for a call that
// stopped because the run's deadline comes first: the local pacer's next
// slot (or, sharing the provider, the next renewal while the others hold
// it all) and the known limits'. A host that runs again then, not at once,
// does not spin on a pace slower than its runs. Zero when it cannot tell
// (a Pacer of the host's) or the slot is now.
func (p *local) nextSlot(now time.Time, weight int) time.Time {
	var w time.Duration
	if lp, ok := p.pacer.(localPacer); ok {
		w = waitAt(lp.l, now, 1)
	}
	if p.sh.gate.Load() != nil {
		w = max(w, shareSoon)
	}
	if tw, _ := p.turnWait(now); tw > 0 {
		w = max(w, tw) // shared, in turns: the next window of this process
	}
	if w = max(w, p.quotaWait(now, weight)); w <= 0 {
		return time.Time{}
	}
	return now.Add(w)
}

// pacerWait returns how long after now the pacer admits one request: read
// from the local pacer, or one interval at the controller's rate for a
// pacer that cannot tell.
func (p *local) pacerWait(now time.Time) time.Duration {
	if lp, ok := p.pacer.(localPacer); ok {
		return waitAt(lp.l, now, 1)
	}
	return time.Duration(float64(time.Second) / p.ctl.Snapshot().Rate)
}

// quotaSpent is the stop for a call whose known quota admits it only at
// until, later than the call may wait: source pressure the scheduler waits
// out. Nothing is booked and the run's admit is given back by the caller.
func (p *local) quotaSpent(until time.Time) error {
	return &Error{Provider: p.key, Reason: forage.ReasonQuota, Until: until}
}

// feedback reports one attempt to the controller and moves the pacer to the
// controller's new rate and pause.
func (p *local) feedback(start, end time.Time, out *forage.Outcome, class forage.Class) {
	p.n.requests.Add(1)
	switch class {
	case forage.Success:
		p.n.ok.Add(1)
		if l := int64(out.Latency); l > 0 {
			old := p.okLatency.Load()
			if old == 0 {
				old = l // the first taken whole
			}
			p.okLatency.Store(old + (l-old)/8)
		}
	case forage.Throttled:
		p.n.throttled.Add(1)
	case forage.Overloaded:
		p.n.overloaded.Add(1)
	case forage.Transient:
		p.n.transient.Add(1)
	case forage.Permanent:
		p.n.permanent.Add(1)
	default:
		return // cancelled: says nothing about the provider
	}
	q := out.Quota
	if left, ok := q.Left(); ok && left <= 0 {
		if q.Reset > p.cfg.MaxPause && !(class != forage.Success && out.RetryAfter >= p.cfg.MaxPause) {
			// Named as a Retry-After clamped is (see Do), unless this
			// answer's Retry-After was: a reset sent in milliseconds and
			// read as seconds paused the provider an hour with no word.
			p.event(slog.LevelWarn, "budget: a pause longer than MaxPause asked; paused for MaxPause",
				slog.Int("status", out.Status), slog.Duration("asked", q.Reset), slog.Duration("max_pause", p.cfg.MaxPause),
				slog.String("by", "a spent quota's reset"))
		}
		q.Reset = min(q.Reset, p.cfg.MaxPause) // a spent quota pauses until Reset
	}
	sig := aimd.Signal{Class: class, Latency: out.Latency, RetryAfter: out.RetryAfter, Sent: start, Quota: q}
	p.ctl.ObserveAt(end, sig) // the controller locks itself
	p.reconcile(end, out.Quota)
	p.follow(end)
}

// follow moves the pacer to the controller's current rate and pause. One
// goroutine at a time applies them, reading the controller under p.mu so
// the latest state is applied last; the others only mark the state dirty and
// go on, so a pacer that is slow to update (a database round trip) never
// holds up responses. A follower loops until no one marked it dirty. It
// saves the record when the pause in force is not yet saved, at once (see
// local.savePause), and otherwise at most every recordEvery, in the
// background (see local.saveSoon).
func (p *local) follow(now time.Time) {
	p.dirty.Store(true)
	for p.dirty.Load() && p.mu.TryLock() {
		p.dirty.Store(false)
		r := p.ctl.Snapshot().Rate
		if p.cfg.Shares != nil && !p.sh.turnOn.Load() {
			r *= p.sh.fraction() // this process's share of the provider's rate (in turns, the whole in its own windows)
		}
		if r > 0 && r != p.rate {
			if p.pacer.SetRate(r) == nil {
				p.logRate(p.rate, r)
				p.reportRate(p.rate, r)
				p.rate = r
			}
			p.fitBurst(now)
		}
		pu := p.ctl.Snapshot().PausedUntil
		if pu.After(p.pausedTil) {
			if pu.UnixNano() > p.sh.staggered.Load() {
				p.pausePacer(pu, p.ctl.Snapshot().Rate, nil)
			}
			p.pausedTil = pu
			p.reportPause(now, pu)
			p.event(slog.LevelInfo, "budget: provider paused", slog.Time("until", pu),
				slog.Duration("for", pu.Sub(now).Round(time.Millisecond)), slog.String("reason", string(p.pauseReason(now))))
		}
		if why := p.pauseReason(now); pu.After(now) && (pu.After(p.savedTil) || why != p.savedWhy) {
			p.savePause(now)
		}
		if p.cfg.Shares != nil {
			p.shareNews(now, pu)
		}
		if p.cfg.Records != nil {
			p.readStatus(now) // an operator's status set elsewhere
			if !now.Before(p.nextSave) {
				p.nextSave = now.Add(recordEvery)
				p.saveSoon()
			}
		}
		p.mu.Unlock()
	}
}

// event writes one record of the provider's own to cfg.Logger, if any,
// with its key, unless a registry dropped the provider (see mute). The hot
// path pays one nil check.
func (p *local) event(level slog.Level, msg string, attrs ...slog.Attr) {
	l := p.cfg.Logger
	if l == nil || p.forgotten.Load() || !l.Enabled(context.Background(), level) {
		return
	}
	l.LogAttrs(context.Background(), level, msg, append([]slog.Attr{slog.String("provider", p.key)}, attrs...)...)
}

// warnSpent logs at Warn that the retry budget stopped a call the
// provider answered with status, at most once every spentWarnEvery per
// provider, with how many calls it stopped since the line before (a host
// whose provider keeps failing logged a line per call).
func (p *local) warnSpent(status int) {
	n := p.spentCalls.Add(1)
	now, last := time.Now().UnixNano(), p.spentWarned.Load()
	if last != 0 && now-last < int64(spentWarnEvery) || !p.spentWarned.CompareAndSwap(last, now) {
		return
	}
	p.spentCalls.Add(-n)
	p.event(slog.LevelWarn, "budget: retry budget spent; the call stops without retrying", slog.Int("status", status), slog.Int64("calls", n))
}

// spentWarnEvery is how often at most warnSpent logs per provider.
const spentWarnEvery = 10 * time.Second

// catchUpAllowance is the least burst allowance (measured by the
// controller, in requests) at which the default pacer lets two requests go
// back to back (see fitBurst).
const catchUpAllowance = 3

// fitBurst sets the default pacer's burst: 1 (requests go one interval
// apart, as a provider that allows no burst needs) until the controller
// has measured an allowance of catchUpAllowance or more, 2 from then on.
// Paced one interval apart, every slot a timer wakes late for is lost (at
// 50/s, about 4% of the rate on a busy machine); with a burst of 2 the next
// slot makes up for it, which a provider with such an allowance admits.
// A Burst the host set, a pacer of its own and a shared provider (whose
// controller measures no allowance) keep theirs. A burst raised at now
// is earned by idling, not granted at once: the added slot is booked at
// now. The controller measures the allowance at a refusal, when the
// provider has next to none of it left; granted at once, the pacer let a
// second request go right behind the first, and the provider refused it.
// (Three streams 34 ms from 47.4/s with an allowance of 24, refusing with
// a bare 429, drew their fifth refused request so in 3 runs of 6, and a
// ban.) p.mu is held.
func (p *local) fitBurst(now time.Time) {
	lp, local := p.pacer.(localPacer)
	if !local || p.cfg.Burst != 0 || p.cfg.Shares != nil {
		return
	}
	want := 1
	if p.ctl.Snapshot().Allowance >= catchUpAllowance {
		want = 2
	}
	want = max(want, p.limitBurst) // the burst the tightest known limit declares
	if old := lp.l.Burst(); old != want {
		_ = lp.l.SetBurst(want) // valid: the limit's own was
		if want > old {
			lp.l.ReserveNAt(now, want-old)
		}
	}
}

// logRate records a change of the pacing rate from old to rate: a cut
// (the controller decreased for pressure it saw) at Info; a climb, or a
// rate lowered without pressure (the rest of a provider's announced quota
// spread over its window, a smaller share), at Debug, as they move it
// often. p.mu is held.
func (p *local) logRate(old, rate float64) {
	if p.cfg.Logger == nil {
		return // no attributes to build
	}
	snap := p.ctl.Snapshot()
	level, msg := slog.LevelDebug, "budget: rate raised"
	switch {
	case rate < old && snap.Decreases > p.cutsSeen:
		level, msg = slog.LevelInfo, "budget: rate cut"
	case rate < old:
		msg = "budget: rate lowered"
	}
	p.cutsSeen = snap.Decreases
	p.event(level, msg, slog.Float64("from", old), slog.Float64("to", rate), slog.Float64("ceiling", snap.Ceiling))
}

// ban pauses the provider for a ban answered at end: for the Retry-After
// that came with it, or, when it came with none, for BanPause doubled for
// each earlier ban in a row (see [Config.BanPause]). It sets out.RetryAfter
// so the controller pauses as for a provider that named the time itself.
func (p *local) ban(end time.Time, out *forage.Outcome) {
	n := p.bans.Add(1)
	if out.RetryAfter <= 0 {
		out.RetryAfter = p.banPause(int(n))
	}
	p.banMu.Lock()
	if u := end.Add(out.RetryAfter); u.After(p.banUntil) {
		p.banUntil = u
	}
	p.banMu.Unlock()
}

// banPause returns the pause of the n-th ban in a row without Retry-After:
// BanPause doubled n−1 times, at most MaxPause.
func (p *local) banPause(n int) time.Duration {
	d := p.cfg.BanPause
	for i := 1; i < n && d < p.cfg.MaxPause; i++ {
		d *= 2
	}
	return min(d, p.cfg.MaxPause)
}

// pauseReason names the pause in force at now: banned while a ban's pause
// lasts, throttled otherwise (a Retry-After on a 429, a spent quota).
func (p *local) pauseReason(now time.Time) forage.Reason {
	p.banMu.Lock()
	defer p.banMu.Unlock()
	if p.banUntil.After(now) {
		return forage.ReasonBanned
	}
	return forage.ReasonThrottled
}

// reconcile tightens a known limit to the usage the provider reports: when
// the provider says less is left than the local count believes (other
// clients share the quota, or the count drifted), the difference is booked.
func (p *local) reconcile(now time.Time, rl forage.Quota) {
	if !rl.HasRemaining && !rl.HasUsed {
		return // a limit, a window or a reset alone says nothing of usage
	}
	for i, l := range p.cfg.Limits {
		if rl.Window != 0 && rl.Window != l.Per {
			continue
		}
		if rl.Window == 0 && len(p.cfg.Limits) > 1 {
			continue // cannot tell which limit the headers describe
		}
		left := rl.Remaining
		if !rl.HasRemaining {
			left = float64(l.Count) - rl.Used
		}
		if left < 0 {
			left = 0
		}
		if p.cfg.Shares != nil {
			left *= p.sh.fraction() // what is left is every process's: this one holds its share
		}
		p.limMu.Lock()
		lim := p.lims()[i]
		if have := lim.AllowNAt(now, 0).Remaining; float64(have) > left {
			lim.ReserveNAt(now, have-int(left))
			p.limGen++ // a booking: calls booked before it can no longer give theirs back
		}
		p.limMu.Unlock()
	}
}

// until returns when the provider may be called again after a stop for
// reason: the end of the pause for source pressure, zero otherwise.
func (p *local) until(reason forage.Reason) time.Time {
	if !reason.SourcePressure() {
		return time.Time{}
	}
	if pu := p.ctl.Snapshot().PausedUntil; pu.After(time.Now()) {
		return pu
	}
	if reason == forage.ReasonCircuitOpen {
		return p.brk.OpenUntil()
	}
	return time.Time{}
}

// banned reports whether an attempt of class is a ban: what Config.Ban
// says, or else a throttling 418 (Binance's IP ban). A ban pauses the
// provider (see [Config.BanPause]) and stops the call with
// [forage.ReasonBanned]. classify has read a ban as throttling.
func (p *local) banned(class forage.Class, out forage.Outcome) bool {
	if p.cfg.Ban != nil {
		return class == forage.Throttled && p.cfg.Ban(out)
	}
	return class == forage.Throttled && out.Status == http.StatusTeapot
}

// sleepUntil blocks until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
