package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// embeddedSymbols are the symbols the embedded exchange lists, each with
// 30 days of history; any other symbol is "Invalid symbol.".
var embeddedSymbols = []string{"BTCUSDT", "ETHUSDT", "BNBUSDT", "SOLUSDT", "XRPUSDT"}

// embeddedLimit is the embedded exchange's true limit, in requests per
// second (burst 5), answered with 429 and Retry-After. The collector is not
// told: its provider discovers it.
const embeddedLimit = 20

// storeRetryWait is the first wait before a stream whose store failed
// with an error that may pass (see backend.transient) is run again,
// doubled at each failure in a row up to maxStoreWait: a store that is
// down (PostgreSQL restarting, a failover) is waited for until it returns
// or the command's -timeout ends it, with a line on stderr at each try.
const (
	storeRetryWait = 500 * time.Millisecond
	maxStoreWait   = 4 * time.Second
)

// storeGrace is how long past the deadline a stream run may still hold
// the command: a commit in progress ends within it. A run held longer
// waits on a store that does not answer (a database host that hangs, or
// a connection a dropped network left open), and the command is over
// without it: ending it cancels the call, and the transaction it was in
// commits nothing, so its checkpoint stays the last commit.
const storeGrace = 5 * time.Second

// longWait is the shortest wait after source pressure that is reported on
// stderr.
const longWait = 5 * time.Second

// pressureWait is how long a stream waits after source pressure that came
// without a time to resume at, and after a planned stop.
const pressureWait = time.Second

// collector runs every stream of one collect command and keeps the tally.
type collector struct {
	o        options
	base     string
	client   *http.Client
	be       backend
	key      string // the provider key
	reg      *budget.Registry
	provider budget.Provider
	run      *budget.Run
	verbose  io.Writer  // nil unless -v
	logOut   swapWriter // the provider's records, with -v: where verbose goes
	stderr   io.Writer
	changed  chan struct{}              // a run ended: all looks again
	progress map[string]*streamProgress // by symbol

	abandon chan struct{} // closed at endBy: a lease's release waits no longer

	mu sync.Mutex
	// stopped is when the streams were told to stop (zero until then):
	// the command waits for a store that does not answer until endBy.
	stopped time.Time
	streams []*streamStats          // in the order they started
	states  map[string]*symbolState // by symbol
	failure error                   // the first failure: the command ends with it
}

// symbolState is what the watch loop knows of one symbol's stream.
type symbolState struct {
	caughtUp bool // its catch-up reached until
	yielded  bool // its last run found it held by another live process
	spent    bool // a run stopped because the budget is spent
	blips    int  // store failures in a row that may pass
	paused   bool // its last run found the provider paused by an operator
	// short is set while its catch-up found nothing more short of until:
	// the provider, its clock behind this one, has not published the last
	// candles yet. The catch-up runs again at again (job is its job).
	short bool
	again time.Time
	tries int
	job   int64
}

// collect runs the collect command: it reaches the exchange, opens the
// store, runs every symbol's streams, and prints the summary.
func collect(ctx context.Context, e env, o options, stdout, stderr io.Writer) error {
	start := time.Now()
	stderr = &syncWriter{w: stderr} // progress lines and the streams' notes come from several goroutines
	c := &collector{o: o, base: o.baseURL, client: &http.Client{}, stderr: stderr, states: map[string]*symbolState{}, abandon: make(chan struct{})}
	key := "sim"
	if c.base != "" {
		u, _ := url.Parse(c.base) // validated by parseCollect
		key = u.Host
	}
	be, err := openBackend(ctx, o.store, o.schema)
	if err == nil && e.wrap != nil {
		be = e.wrap(be)
	}
	if err != nil {
		locked := errors.Is(err, checkpoint.ErrLocked)
		// Interrupted while connecting: not the store's failure.
		interrupted := ctx.Err() != nil && errors.Is(err, ctx.Err())
		if uerr := (usageError{}); (o.json || interrupted) && !errors.As(err, &uerr) {
			// A program reading -json gets its one line even now (a bad
			// flag's line is run's).
			s := failedToStart(o, key, time.Since(start), err)
			switch {
			case locked:
				s.Status = "yielded"
			case interrupted:
				s.Status, s.Error = "interrupted", ""
			}
			_ = s.print(stdout, o.json)
		}
		if interrupted {
			return nil
		}
		if locked {
			// Another live process holds the whole store: nothing done,
			// and not a failure (exit 3, as for a stream held elsewhere).
			return errYielded{[]string{"any stream: " + oneLine(err)}}
		}
		return err
	}
	defer func() {
		// Closing a store that does not answer waits for it (pgx cancels
		// what was in flight over a connection of its own, for up to
		// 15 s): the command is over by endBy all the same, and the
		// process's exit closes what is left.
		closed := make(chan struct{})
		go func() { defer close(closed); be.Close() }()
		waitUntil(closed, c.endBy(time.Now()))
	}()
	c.be = be
	if c.base == "" {
		srv, err := providertest.New(embeddedConfig())
		if err != nil {
			return err
		}
		var stop func()
		if c.base, c.client, stop, err = e.serve(srv); err != nil {
			return err
		}
		defer stop()
	}
	c.key = key
	defaults := budget.Config{MaxPause: o.maxPause, MaxWait: longWait, Shares: be.shares()}
	if o.verbose {
		// The provider's pauses and rate cuts, with the streams' lines.
		c.logOut.set(stderr)
		defaults.Logger = slog.New(slog.NewTextHandler(&c.logOut, nil))
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{
		Records: be.records(),
		// A pause longer than longWait comes back to loop, which says so.
		Defaults: defaults,
	})
	if err != nil {
		return err
	}
	c.reg = reg
	// The registry's Run saves every provider's record as it ends: what
	// was learned since the last background save (up to 5 s of it, and
	// the counters) outlives the run, before the store closes.
	regCtx, stopReg := context.WithCancel(context.WithoutCancel(ctx))
	regDone := make(chan struct{})
	go func() { defer close(regDone); _ = reg.Run(regCtx) }()
	defer func() {
		stopReg()
		// A store that does not answer would hold the command for the
		// whole of each save's timeout: what it could not save is lost
		// either way.
		waitUntil(regDone, c.endBy(time.Now()))
	}()
	if c.provider, err = reg.Get(key); err != nil {
		return err
	}
	env := budget.Envelope{MaxRequests: o.maxRequests}
	if o.timeout > 0 {
		env.Deadline = start.Add(o.timeout)
	}
	if c.run, err = budget.NewRun(env); err != nil {
		return err
	}
	if o.verbose {
		c.verbose = stderr
	}
	c.progress = map[string]*streamProgress{}
	for _, sym := range o.symbols {
		c.progress[sym] = &streamProgress{symbol: sym}
	}
	stopProgress := func() {}
	if o.progress {
		// While bars are drawn, the run's other lines go above them.
		c.stderr, stopProgress = c.showProgress(e, stderr)
		if c.verbose != nil {
			c.verbose = c.stderr
			c.logOut.set(c.stderr)
		}
	}
	err = c.all(ctx)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Interrupted while the streams were being declared: as
		// interrupted as later, not a failure.
		err = nil
	}
	stopProgress()
	sum := c.summary(time.Since(start), ctx.Err() != nil, err)
	if perr := sum.print(stdout, o.json); err == nil {
		err = perr
	}
	if err == nil && sum.Status == "yielded" {
		err = errYielded{sum.held()}
	}
	return err
}

// stopAt records that the streams were told to stop at now.
func (c *collector) stopAt(now time.Time) {
	c.mu.Lock()
	c.stopped = now
	c.mu.Unlock()
}

// endBy is how long the command, stopping at now, waits for what still
// runs on the store: storeGrace from when the streams were told to stop
// (from now if they were not), and never past storeGrace after the
// deadline of -timeout, which the watch loop may already have waited.
func (c *collector) endBy(now time.Time) time.Time {
	c.mu.Lock()
	from := c.stopped
	c.mu.Unlock()
	if from.IsZero() {
		from = now
	}
	end := from.Add(storeGrace)
	if c.run != nil {
		if d, ok := c.run.Deadline(); ok && from.After(d) && d.Add(storeGrace).Before(end) {
			end = d.Add(storeGrace)
		}
	}
	return end
}

// waitUntil waits for done to be closed or for the time end, whichever
// comes first.
func waitUntil(done <-chan struct{}, end time.Time) {
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// releaseBound is a checkpoint store whose lease releases also end when
// abandon is closed.
type releaseBound struct {
	checkpoint.Store
	abandon <-chan struct{}
}

func (r releaseBound) Release(ctx context.Context, lease checkpoint.Lease) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.abandon:
			cancel()
		case <-ctx.Done():
		}
	}()
	return r.Store.Release(ctx, lease)
}

// errYielded ends a run in which a stream was held by another live
// process: nothing was done for it. Exit status 3.
type errYielded struct{ held []string }

func (e errYielded) Error() string {
	return "nothing done for " + strings.Join(e.held, "; ")
}

// embeddedConfig configures the embedded exchange.
func embeddedConfig() providertest.Config {
	syms := make([]providertest.Symbol, len(embeddedSymbols))
	for i, s := range embeddedSymbols {
		syms[i] = providertest.Symbol{Name: s}
	}
	return providertest.Config{Symbols: syms, Limit: providertest.Limit{Rate: embeddedLimit, Burst: 5}}
}

// all runs every symbol's stream on a scheduler until the collect command
// is over, and returns the first failure. Each symbol is one declared
// stream: its catch-up backfill over [since, until) and, with -follow, its
// steady-state head from until on, every interval. The scheduler runs
// them (the head first, never both of one stream at once) and this loop
// only watches: it ends when every stream is caught up or held by another
// process, when the budget is spent or a stream's next chance to run
// falls after the deadline, on a failure, or when ctx ends.
func (c *collector) all(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := len(c.o.symbols)
	sched, err := schedule.New(schedule.Config{
		// No jitter: the head runs just after each candle closes.
		MaxRunning: 2 * n, MaxPerProvider: 2 * n, Jitter: schedule.NoJitter, Budget: c.reg, Checkpoints: releaseBound{c.be.checkpoints(), c.abandon}, Requeue: pressureWait, PressureWait: pressureWait,
		// A stream that failed with a store error that may pass runs
		// again after 0.5 s, 1 s, 2 s, then every 4 s until the store is back.
		Backoff: storeRetryWait, MaxBackoff: maxStoreWait,
	}, schedule.NewMemoryJobStore(), nil)
	if err != nil {
		return err
	}
	c.changed = make(chan struct{}, 1)
	for _, sym := range c.o.symbols {
		back, head, err := klines.Sources(&klines.Source{Client: c.client, Base: c.base, Symbol: sym, Interval: c.o.interval,
			Page: c.o.page, From: c.o.since}, c.o.until)
		if err != nil {
			return err
		}
		sp := c.progress[sym]
		st := schedule.Stream[klines.Candle]{
			Name: "ohlcv/" + sym + "/" + c.o.interval, Provider: c.key, Backfill: watched{back, sp, false},
			Run: c.run, OnRun: c.onRun(sym), RunFor: time.Minute,
		}
		if err := c.be.sink(&st, sym, c.o.interval); err != nil {
			return err
		}
		c.earlier(ctx, st.Name, sym)
		if c.o.follow {
			st.Incremental, st.Every, st.At = watched{head, sp, true}, c.o.step, c.nextClose(time.Now())
		}
		if err := schedule.AddStream(ctx, sched, st); err != nil {
			return err
		}
	}
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	defer func() {
		cancel()
		// A run's calls to the store end with ctx, but for the release of
		// its lease, which has a timeout of its own (10 s): on a store that
		// does not answer (a frozen database) it is cut at endBy, so the
		// run still ends and reports. Its lease ends with it (expired, or
		// with the process's session).
		c.stopAt(time.Now())
		stop := time.AfterFunc(time.Until(c.endBy(time.Now())), func() { close(c.abandon) })
		defer stop.Stop()
		<-done
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // interrupted: every checkpoint is the last commit
		case <-c.changed:
		case <-tick.C:
		}
		c.askAgain(ctx, sched)
		if over, err := c.over(ctx, sched); over || err != nil {
			return err
		}
	}
}

// shortWait is the first wait before a catch-up that found the provider's
// last candles unpublished asks again; it doubles with each try, up to a
// minute.
const shortWait = 2 * time.Second

// askAgain runs again the catch-ups that found the provider's last candles
// unpublished, once their wait is over (see onRun).
func (c *collector) askAgain(ctx context.Context, sched *schedule.Scheduler) {
	c.mu.Lock()
	var due []*symbolState
	now := time.Now()
	for _, ss := range c.states {
		if ss.short && !ss.again.IsZero() && !now.Before(ss.again) {
			due = append(due, ss)
		}
	}
	c.mu.Unlock()
	for _, ss := range due {
		if _, err := sched.RunNow(ctx, ss.job); err == nil {
			c.mu.Lock()
			ss.again = time.Time{}
			c.mu.Unlock()
		}
	}
}

// onRun returns the hook that tallies each run of sym's stream and
// decides what it means for the command: a failure ends it (a store error
// that may pass is waited out instead), a long push-back is
// reported, a yield or a spent budget is noted.
func (c *collector) onRun(sym string) func(schedule.Job, slice.Report, error) {
	return func(job schedule.Job, rep slice.Report, err error) {
		mode := checkpoint.CatchUp
		if job.Kind != schedule.KindBackfill {
			mode = checkpoint.SteadyState
		}
		st := c.stats(sym, mode)
		c.record(st, rep, err)
		defer c.poke()
		c.mu.Lock()
		defer c.mu.Unlock()
		ss := c.states[sym]
		if ss == nil {
			ss = &symbolState{}
			c.states[sym] = ss
		}
		ss.yielded = rep.Yielded
		c.progress[sym].held.Store(rep.Yielded)
		switch {
		case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, schedule.ErrInterrupted)):
			return // the command is ending: the checkpoint is the last commit
		case err != nil && c.be.transient(err):
			// The store went away (PostgreSQL restarting, a dropped
			// connection): the scheduler runs the stream again from the
			// checkpoint, which is the last commit, once it is back.
			// (It gave up after 15.5 s, and a failover took longer.)
			ss.blips++
			fmt.Fprintf(c.stderr, "ohlcv: %s %s %s: store unavailable (%s); running it again shortly (try %d; until the store is back or -timeout ends the command)\n",
				sym, c.o.interval, mode, oneLine(err), ss.blips)
			return
		case err != nil:
			if c.failure == nil {
				c.failure = streamError(sym, c.o.interval, mode, err)
			}
			st.failed = true
			return
		}
		ss.blips = 0
		now := time.Now()
		if rep.Reason == forage.ReasonUnavailable && c.provider.Snapshot().OK == 0 && noAnswer(rep.Stop) {
			// Not one request answered, by anything that is the API: a
			// wrong -base-url, a host that is down, or one that answers
			// with something else (an HTML page). The command fails and
			// says so: it ended "deferred" with status 0 (a cron job
			// stayed green for good) or, with no -timeout, retried for
			// ever. (An API that answers 5xx is an outage: the run waits
			// it out, deferred at -timeout.)
			why := string(rep.Reason)
			if n := len(rep.Gaps); n > 0 {
				why = rep.Gaps[n-1].Reason
			}
			if c.failure == nil {
				c.failure = fmt.Errorf("%s %s %s: the provider at %s has not answered one request as the API would (%s); is -base-url right?",
					sym, c.o.interval, mode, hostOf(c.base), why)
			}
			st.failed = true
			return
		}
		if rep.Reason.SourcePressure() && rep.Until.After(now) {
			c.progress[sym].waiting(rep.Until, string(rep.Reason))
		}
		if paused := rep.Reason == forage.ReasonPaused; paused != ss.paused {
			// Said once, when it starts and when it ends: the scheduler
			// asks again every second while it lasts.
			ss.paused = paused
			if paused {
				fmt.Fprintf(c.stderr, "ohlcv: %s %s %s: %s; waiting for a resume (or -timeout)\n", sym, c.o.interval, mode, operatorPause(c.provider.Snapshot()))
			} else {
				fmt.Fprintf(c.stderr, "ohlcv: %s %s %s: the provider was resumed\n", sym, c.o.interval, mode)
			}
		}
		switch {
		case rep.Reason.Exhausted():
			if _, spent := c.run.ExhaustedAt(now); spent {
				ss.spent = true // the gap is recorded; the budget ends every stream
			}
		case rep.Reason.SourcePressure() && rep.Until.Sub(now) >= longWait:
			// Never silent: a provider's pause may be long. The gap's
			// reason names the cause when no answer came (a refused
			// connection, say), which the reason alone does not.
			why := string(rep.Reason)
			if n := len(rep.Gaps); n > 0 {
				why = rep.Gaps[n-1].Reason
			}
			what := "pushed back"
			if rep.Reason == forage.ReasonUnavailable || rep.Reason == forage.ReasonCircuitOpen {
				what = "is failing"
			}
			fmt.Fprintf(c.stderr, "ohlcv: %s %s %s: the provider %s (%s); waiting until %s (%s)\n",
				sym, c.o.interval, mode, what, why, rep.Until.UTC().Format(time.RFC3339), rep.Until.Sub(now).Round(time.Second))
		case rep.Reason == forage.ReasonBehind && mode == checkpoint.CatchUp:
			// The provider has not published the last candles before
			// until yet (its clock runs behind this one): the scheduler
			// runs the catch-up again at rep.Until. Never done with them
			// missing, and never silent.
			ss.short, ss.job = true, job.ID
			ss.again, ss.tries = time.Time{}, ss.tries+1
			if ss.tries == 1 || ss.tries%10 == 0 {
				after := "the start"
				if last, derr := klines.DecodeCursor(rep.Cursor); len(rep.Cursor) > 0 && derr == nil {
					after = last.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(c.stderr, "ohlcv: %s %s %s: the provider has not published the candles after %s yet; asking again at %s\n",
					sym, c.o.interval, mode, after, rep.Until.UTC().Format(time.RFC3339))
			}
		case rep.Reason == "" && !rep.Yielded && mode == checkpoint.CatchUp:
			if last, derr := klines.DecodeCursor(rep.Cursor); len(rep.Cursor) > 0 && derr == nil && last.Before(c.o.until.Add(-c.o.step)) {
				// Caught up for now, short of until: the provider has not
				// published the last candles yet (its clock runs behind
				// this one, and they are still forming there). Never done
				// with them missing: ask again shortly, until they come or
				// the run ends, deferred.
				ss.short, ss.job = true, job.ID
				wait := min(shortWait<<min(ss.tries, 5), time.Minute)
				ss.again, ss.tries = now.Add(wait), ss.tries+1
				fmt.Fprintf(c.stderr, "ohlcv: %s %s %s: the provider has not published the candles after %s yet; asking again in %s\n",
					sym, c.o.interval, mode, last.UTC().Format(time.RFC3339), wait)
				return
			}
			ss.caughtUp, ss.short, ss.tries = true, false, 0
			c.progress[sym].caughtUp.Store(true)
		}
	}
}

// poke wakes the watch loop.
func (c *collector) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// over reports whether the collect command is over: a failure (returned),
// the budget spent, every stream caught up (without -follow) or held by
// another process, or no stream able to run again before the deadline.
func (c *collector) over(ctx context.Context, sched *schedule.Scheduler) (bool, error) {
	c.mu.Lock()
	failure, finished, spent := c.failure, true, false
	var again time.Time // the soonest catch-up to ask again (see askAgain)
	for _, sym := range c.o.symbols {
		ss := c.states[sym]
		if ss != nil && ss.short && (again.IsZero() || ss.again.Before(again)) {
			again = ss.again
		}
		switch {
		case ss == nil:
			finished = false
		case ss.spent:
			spent = true
		case !ss.yielded && (!ss.caughtUp || c.o.follow):
			finished = false
		}
	}
	c.mu.Unlock()
	switch {
	case failure != nil:
		return true, failure
	case spent || finished:
		return true, nil
	}
	d, ok := c.run.Deadline()
	if !ok || !again.IsZero() && again.Before(d) {
		return false, nil
	}
	// The budget ends before any stream's next chance to run: stop now
	// rather than wait for the deadline. Past the deadline, no stream
	// runs again: a run in progress ends on it at its next attempt, and
	// one not running is over (a job due but not claimed waited for good).
	jobs, err := sched.Store().List(ctx, schedule.Query{})
	if err != nil {
		return false, nil // the memory store fails only when ctx ended
	}
	past := !time.Now().Before(d)
	if past && time.Since(d) >= storeGrace {
		return true, nil // a run still in progress waits on a store that does not answer
	}
	for _, j := range jobs {
		if j.State == schedule.StateRunning || j.State != schedule.StatePaused && j.State != schedule.StateSuccess && j.NextRun.Before(d) && !past {
			return false, nil
		}
	}
	return true, nil
}

// noAnswer reports whether a stop after attempts came with no answer of
// the API: no HTTP status at all (a refused connection, a name that does not resolve), or a
// success status whose body was not the API's.
func noAnswer(stop *budget.Error) bool {
	return stop != nil && (stop.Status == 0 || stop.Status >= 200 && stop.Status < 300)
}

// hostOf returns the scheme and host of a base URL: nothing of its user,
// path or query, where a credential may be.
func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "-base-url"
	}
	return u.Scheme + "://" + u.Host
}

// streamError names the stream a run failed on. A permanent provider error
// is reduced to the provider's own message (e.g. "Invalid symbol.").
func streamError(sym, interval string, mode checkpoint.Mode, err error) error {
	var be *budget.Error
	if errors.As(err, &be) && be.Reason == forage.ReasonPermanent && be.Err != nil {
		err = be.Err
	}
	return fmt.Errorf("%s %s %s: %w", sym, interval, mode, err)
}

// nextClose returns when the candle forming at now will have closed, plus
// a moment for the provider to settle it.
func (c *collector) nextClose(now time.Time) time.Time {
	settle := min(c.o.step/10, 2*time.Second)
	return klines.Floor(now, c.o.step).Add(c.o.step + settle)
}

// earlier says, on stderr, when -since asks for candles before those a
// stream already collected: a stream's catch-up begins where its first
// run began and goes on from its checkpoint, so a later run's earlier
// -since collects nothing before that (it was ignored without a word).
// A symbol listed after -since has nothing there either; the line says
// both.
func (c *collector) earlier(ctx context.Context, stream, sym string) {
	if !c.o.sinceSet {
		return // a warning about a -since the user never gave reads as a bug
	}
	cp, err := c.be.checkpoints().Load(ctx, checkpoint.Key{Stream: stream, Mode: checkpoint.CatchUp})
	if err != nil || len(cp.Cursor) == 0 {
		return // a first run: it starts at -since
	}
	first, ok, err := c.be.first(ctx, sym, c.o.interval)
	if err != nil || !ok || !first.After(c.o.since) {
		return
	}
	fmt.Fprintf(c.stderr, "ohlcv: %s %s: -since %s is before the first candle stored (%s): a stream's catch-up goes on from where its first run began, so no earlier candle is collected into this store (nor is there one if the symbol was listed later); collect [%s, %s) into another store\n",
		sym, c.o.interval, c.o.since.UTC().Format(time.RFC3339), first.Format(time.RFC3339), c.o.since.UTC().Format(time.RFC3339), first.Format(time.RFC3339))
}

// syncWriter serializes the writes to w: the progress lines and the
// streams' notes on stderr come from several goroutines, and a writer that
// is not an *os.File (a test's buffer) interleaves or races otherwise.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// swapWriter writes to a writer that may be replaced while others write
// (stderr, then the lines above the progress bars); nil drops the writes.
type swapWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes p to the current writer.
func (s *swapWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}

// set makes w the writer.
func (s *swapWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}
