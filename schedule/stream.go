package schedule

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/argerr"
	"github.com/forage-go/forage/slice"
)

// Stream declares one stream the scheduler runs itself (see [AddStream]):
// where its history and its new data come from, where they go, and how
// often to look for new data. The scheduler turns it into jobs (a
// backfill, an incremental job), maps each job's kind to the stream's
// checkpoint mode, runs it through a [slice] runner under the job's lease,
// and reads the run's report itself: a planned stop, source pressure, a
// yield and the end of the history each move the job as the package doc's
// outcome table says, with no code of the host in between.
type Stream[R any] struct {
	// Name names the stream, e.g. "binance/BTCUSDT/1m": its jobs' Stream,
	// its checkpoint key and its lease. Required; a name is declared for
	// one provider.
	Name string
	// Provider is the key of the provider every request of the stream
	// passes, in [Config.Budget]. Required. A Source whose client sends
	// through a [budget.Transport] of the same Registry names the key the
	// Transport gives its requests (the URL's host, [budget.HostKey], or
	// what Transport.Key returns): under another name ("github" for
	// api.github.com) each request is paced by both providers, and a Warn
	// says so.
	Provider string
	// Backfill plans and fetches the stream's history in catch-up mode
	// ([checkpoint.CatchUp]): from the earliest data wanted up to where
	// Incremental begins. Its job runs while the provider has room for
	// tail work, turn after turn (RunFor), until the source is caught up:
	// then the job is done ([StateSuccess]). Nil means no backfill.
	Backfill slice.Source[R]
	// Incremental plans and fetches new data from the head in steady-state
	// mode ([checkpoint.SteadyState]), every Every: head work, which runs
	// before any backfill of its provider. Nil means no incremental job.
	// At least one of Backfill and Incremental is required.
	//
	// The two keep separate bookmarks: a history split at a moment (time
	// windows, such as candles) has both. A feed read by a token ("events
	// after this one") has one cursor: declare it as Incremental alone; its
	// first run starts from the empty cursor (the whole feed), each later
	// one from the last commit, every Every (set [slice.Page.Last] on the
	// page the provider says is the last for now).
	Incremental slice.Source[R]
	// Every is the incremental job's cadence. Required (> 0) with
	// Incremental.
	Every time.Duration
	// At is when a new incremental job first runs; each later cycle is due
	// Every after the one before was due (jittered by [Config.Jitter],
	// unless that is [NoJitter]). A time aligned to the data's own cadence,
	// such as a candle's close plus a moment for the provider to settle
	// it, has every run start just after new data lands, until a wait
	// moves the cycle: a provider's pause or spent quota (the cycle runs
	// when it ends), a failure's backoff, or jitter, from which the cycles
	// after it follow. Zero means at once. Ignored for a job that exists:
	// declaring again never moves it.
	At time.Time
	// Sink makes pages durable; the run then commits the cursor with the
	// checkpoint store ([Config.Checkpoints]). Exactly one of Sink and
	// TxSink is required.
	Sink slice.Sink[R]
	// TxSink, instead of Sink, makes each page durable and commits the
	// cursor in one transaction (exactly once; see [slice.TxSink]).
	TxSink slice.TxSink[R]
	// RunFor is the longest one run of the stream lasts: at the first
	// slice boundary past it the run hands its slot back, its cursor
	// committed (and a gap record marking where it stopped, which the next
	// run resolves), and the job is due again at once. A backfill thereby
	// never holds the stream for long: its incremental job, which may not
	// run at the same time, waits at most about RunFor. Zero means Every,
	// or one minute without Incremental.
	RunFor time.Duration
	// Run, if set, is the host's envelope every run of the stream counts
	// against, e.g. a command's request cap and deadline, shared by all its
	// streams: each run is one turn of it ([budget.Envelope.Parent]). Once
	// it is spent, the run under way stops with its reason, leaving a gap
	// record, and the stream runs no more in this process: its job is
	// looked at again after Config.PressureWait (another process, with an
	// envelope of its own, may run it), and [Scheduler.Backfilled] returns
	// an error that names the reason and wraps it ([budget.ReasonOf] gives
	// [forage.ReasonRequestCap]): the host ends the scheduler then.
	// Nil means none.
	Run *budget.Run
	// OnRun, if set, is called after each run of the stream with the job,
	// the run's report and error, from the run's goroutine, before the
	// scheduler applies the outcome: for a host's progress, tallies and
	// logs. It must not block for long. A run whose turn ran out (RunFor)
	// reports [forage.ReasonDeadline]: the turn's own deadline, a hand-off
	// to the next turn, not the host's.
	OnRun func(job Job, rep slice.Report, err error)
	// Priority orders the stream's jobs among due jobs, lower first, in
	// [0, 1000]. Zero means each kind's [Kind.DefaultPriority].
	Priority int
	// Options tunes every run of the stream: the fields of
	// [slice.Config] the scheduler does not set (Prefetch, MaxBatch,
	// Series, LeaseTTL, GapBatch, Logger, Now). The ones it sets must be
	// left zero: Stream, Mode, Owner, Store, Provider, Source, Sink and
	// TxSink.
	Options slice.Config[R]
}

// stream is a declared stream, as the scheduler keeps it: its provider,
// the length of one run, and one run function per checkpoint mode it has.
type stream struct {
	provider string
	runFor   time.Duration
	parent   *budget.Run                                // Stream.Run
	onRun    func(job Job, rep slice.Report, err error) // Stream.OnRun
	// run runs the stream once in mode (a Drain when drain is set) with
	// the lease owner owner, within env. Nil for a mode not declared.
	run map[checkpoint.Mode]func(ctx context.Context, owner string, env *budget.Run, drain bool) (slice.Report, error)
	// lost is the provider's permanent answer (a 401, an unknown symbol)
	// that ended the last run, in this process, of the job that says the
	// stream is done (see doneKind), when that run committed nothing; nil
	// otherwise. lostRuns counts such runs in a row. [Scheduler.Backfilled]
	// stops waiting for a stream turned away lostForGood times.
	lost     atomic.Pointer[budget.Error]
	lostRuns atomic.Int32
}

// lostForGood is how many runs in a row a permanent answer must end, with
// nothing committed, for [Scheduler.Backfilled] to stop waiting for the
// stream: the scheduler's first retry comes 5 s after the first, and a
// token that expired once, refreshed by then, does not end the wait.
const lostForGood = 2

// doneKind is the kind of the job whose success says the stream collected
// up to now once (see [Scheduler.Backfilled]): its backfill, or the
// incremental job of a stream that has none.
func (st *stream) doneKind() Kind {
	if st.run[checkpoint.CatchUp] != nil {
		return KindBackfill
	}
	return KindIncremental
}

// noteLost keeps whether a run of job that ended with rep and err was
// turned away for good (see lost).
func (st *stream) noteLost(job Job, rep slice.Report, err error) {
	if job.Kind != st.doneKind() {
		return
	}
	var be *budget.Error
	if err != nil && rep.Slices == 0 && errors.As(err, &be) && be.Reason == forage.ReasonPermanent {
		st.lost.Store(be)
		st.lostRuns.Add(1)
		return
	}
	st.lostRuns.Store(0)
	st.lost.Store(nil)
}

// defaultRunFor is a declared stream's RunFor without Every.
const defaultRunFor = time.Minute

// AddStream declares st to s and upserts its jobs: a backfill if
// st.Backfill is set, an incremental job every st.Every if
// st.Incremental is set. From then on s runs those jobs itself (and any
// gap fill or refresh job upserted on the stream: a gap fill drains the
// stream's gap records, a refresh runs it in steady-state mode), so no
// [Worker] is needed for them. It needs [Config.Budget], which hands out
// the stream's provider, and [Config.Checkpoints].
//
// AddStream is idempotent: declaring a stream again (at every start of
// the host) replaces its sources and sinks and updates its jobs'
// definition, keeping their schedule and state, so a restart resumes
// where the last run committed; a backfill that had finished is queued to
// run once more (its Backfill may now reach further: a later boundary; a
// run over a range already collected commits nothing; a run of the old
// declaration under way does not mark it done), as is the
// incremental job of a stream with no Backfill that had reached the head
// (a cursor feed, whose head has moved on), so [Scheduler.Backfilled]
// does not take the earlier success for this one's; a kind declared no
// more (Backfill or Incremental now nil) has its job deleted. The error
// names the invalid field.
func AddStream[R any](ctx context.Context, s *Scheduler, st Stream[R]) error {
	if s == nil {
		return invalid("AddStream's scheduler", "must not be nil: use schedule.New", "nil")
	}
	if err := st.validate(s); err != nil {
		return err
	}
	provider, err := s.cfg.Budget.Get(st.Provider)
	if err != nil {
		return invalid("Stream.Provider", "must be a valid provider key: "+err.Error(), fmt.Sprintf("%q", st.Provider))
	}
	str := &stream{provider: st.Provider, runFor: st.RunFor, parent: st.Run, onRun: st.OnRun,
		run: map[checkpoint.Mode]func(context.Context, string, *budget.Run, bool) (slice.Report, error){}}
	if str.runFor == 0 {
		str.runFor = defaultRunFor
		if st.Incremental != nil {
			str.runFor = st.Every
		}
	}
	for mode, src := range map[checkpoint.Mode]slice.Source[R]{checkpoint.CatchUp: st.Backfill, checkpoint.SteadyState: st.Incremental} {
		if src == nil {
			continue
		}
		cfg := st.Options
		cfg.Stream, cfg.Mode, cfg.Store, cfg.Provider = st.Name, mode, s.cfg.Checkpoints, provider
		cfg.Source, cfg.Sink, cfg.TxSink, cfg.Owner = src, st.Sink, st.TxSink, s.cfg.Owner
		if _, err := slice.New(cfg); err != nil { // every mistake now, not at the first run
			return fmt.Errorf("schedule: Stream %q: %w", st.Name, err)
		}
		str.run[mode] = func(ctx context.Context, owner string, env *budget.Run, drain bool) (slice.Report, error) {
			c := cfg
			c.Owner = owner // the job's lease owner: one name for both leases
			r, err := slice.New(c)
			if err != nil {
				return slice.Report{}, err
			}
			if drain {
				return r.Drain(ctx, env)
			}
			return r.Run(ctx, env)
		}
	}
	s.mu.Lock()
	if old := s.streams[st.Name]; old != nil && old.provider != st.Provider {
		s.mu.Unlock()
		return invalid("Stream.Provider", fmt.Sprintf("must be %q: stream %q is declared for that provider", old.provider, st.Name), fmt.Sprintf("%q", st.Provider))
	}
	s.streams[st.Name] = str
	s.mu.Unlock()
	specs := []Spec{{Provider: st.Provider, Kind: KindBackfill, Stream: st.Name, Priority: st.Priority},
		{Provider: st.Provider, Kind: KindIncremental, Stream: st.Name, Priority: st.Priority, Interval: st.Every, NextRun: st.At}}
	for i, src := range []slice.Source[R]{st.Backfill, st.Incremental} {
		if src != nil {
			j, err := s.Upsert(ctx, specs[i])
			if err != nil {
				return err
			}
			if j.Kind == KindBackfill && j.State == StateSuccess || j.Kind == str.doneKind() && j.Kind == KindIncremental && j.State == StateIdle && !j.Stats.LastSuccess.IsZero() {
				// Done in an earlier process: this declaration's Backfill
				// may reach further (a later boundary), a cursor feed's
				// head has moved on since, and Backfilled would take the
				// old success for this process's (a host that collects
				// up to now and stops collected nothing new after its
				// first start). One run finds what is left from the
				// checkpoint, or nothing.
				if _, err := s.RunNow(ctx, j.ID); err != nil && !errors.Is(err, ErrRunning) {
					return err
				}
			}
			continue
		}
		// The declaration is the truth: a kind it no longer has (a
		// source dropped since the last start) loses its job.
		old, err := s.store.List(ctx, Query{Provider: st.Provider, Stream: st.Name, Kind: specs[i].Kind})
		if err != nil {
			return err
		}
		for _, j := range old {
			if err := s.Delete(ctx, j.ID); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// validate checks st as AddStream accepts it on s.
func (st *Stream[R]) validate(s *Scheduler) error {
	o := &st.Options
	switch {
	case s.cfg.Budget == nil:
		return invalidConfig.Must("Config.Budget", "be set to run streams: it hands out each stream's provider", "nil")
	case s.cfg.Checkpoints == nil:
		return invalidConfig.Must("Config.Checkpoints", "be set to run streams: it keeps their checkpoints, leases and gap records", "nil")
	case st.Name == "":
		return invalid("Stream.Name", "must not be empty: it names the stream's jobs and checkpoints", `""`) // Spec.Stream, a field the host never set, was named
	case st.Backfill == nil && st.Incremental == nil:
		return invalid("Stream.Backfill", "must be set, or Stream.Incremental: a stream needs a source", "nil")
	case st.Incremental != nil && st.Every <= 0:
		return invalid("Stream.Every", "must be > 0 with Stream.Incremental", st.Every)
	case st.Every < 0:
		return invalid("Stream.Every", "must be >= 0", st.Every)
	case st.RunFor < 0:
		return invalid("Stream.RunFor", "must be >= 0", st.RunFor)
	}
	// The field set is named: "(got a field set)" left the host to guess
	// which of eight.
	for _, f := range []struct {
		name string
		set  bool
	}{{"Stream", o.Stream != ""}, {"Mode", o.Mode != 0}, {"Owner", o.Owner != ""}, {"Store", o.Store != nil},
		{"Provider", o.Provider != nil}, {"Source", o.Source != nil}, {"Sink", o.Sink != nil}, {"TxSink", o.TxSink != nil}} {
		if f.set {
			return invalid("Stream.Options."+f.name, "must be left zero: the scheduler sets it", "a value")
		}
	}
	spec := Spec{Provider: st.Provider, Kind: KindBackfill, Stream: st.Name, Priority: st.Priority}
	if err := spec.Validate(); err != nil {
		// Named as the host wrote them: the Spec is the scheduler's, and
		// "Spec.Provider must not be empty" named a field of a struct the
		// host never wrote.
		var e *argerr.Error
		if errors.As(err, &e) {
			if f, ok := streamField[e.Field]; ok {
				return invalid(f, e.Rule, e.Got)
			}
		}
		return err
	}
	return nil
}

// streamField names the Stream field each Spec field AddStream checks is
// made from.
var streamField = map[string]string{"Spec.Provider": "Stream.Provider", "Spec.Stream": "Stream.Name", "Spec.Priority": "Stream.Priority"}

// streamOf returns the declared stream that runs job, or nil when job is
// not one (its stream is not declared, or for another provider).
func (s *Scheduler) streamOf(job *Job) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[job.Stream]; st != nil && st.provider == job.Provider {
		return st
	}
	return nil
}

// errTurnOver ends a stream run that used up its RunFor: progress, and
// the job is due again at once.
var errTurnOver = errors.New("schedule: the stream's turn is over")

// turnOver is errTurnOver with when the stream may run again (zero for at
// once) and whether the turn collected nothing: no slice made durable, no
// more gaps resolved than recorded (a stream run that stops resolves the
// gap it resumed from and records one where it stopped). An idle turn is not a success: one the provider's next
// slot explains waits for it, any other is a failure (a turn whose every
// fetch timed out was counted a success, turn after turn, with nothing
// collected).
type turnOver struct {
	next time.Time
	idle bool
	last *budget.Error // the provider's last answer when the turn ended (see slice.Report.Stop); nil if none
}

func (turnOver) Error() string        { return errTurnOver.Error() }
func (turnOver) Is(target error) bool { return target == errTurnOver }

// work runs job, a job of the declared stream st, once: in the checkpoint
// mode of its kind, for at most RunFor from now, and turns the run's
// report into what the scheduler's outcome table reads.
func (st *stream) work(ctx context.Context, job Job, now time.Time) (Result, error) {
	if why, spent := st.parent.ExhaustedAt(now); spent {
		// The host's envelope is spent (Stream.Run): nothing to run, and
		// nothing to lease or write (each such run leased the stream and
		// wrote and resolved a gap record, 941 of them in 14 s for 126
		// streams).
		return Result{}, &envelopeSpent{&budget.Error{Provider: job.Provider, Reason: why}}
	}
	env, err := budget.NewRun(budget.Envelope{Deadline: now.Add(st.runFor), Parent: st.parent})
	if err != nil {
		return Result{}, err
	}
	var modes []checkpoint.Mode
	drain := false
	switch job.Kind {
	case KindBackfill:
		modes = []checkpoint.Mode{checkpoint.CatchUp}
	case KindIncremental, KindRefresh:
		modes = []checkpoint.Mode{checkpoint.SteadyState}
	case KindGapFill:
		modes, drain = []checkpoint.Mode{checkpoint.CatchUp, checkpoint.SteadyState}, true
	}
	ran := false
	for _, mode := range modes {
		run := st.run[mode]
		if run == nil {
			continue
		}
		ran = true
		rep, err := run(ctx, job.Lease.Owner, env, drain)
		st.noteLost(job, rep, err)
		if st.onRun != nil {
			st.onRun(job, rep, err)
		}
		_, hostSpent := st.parent.ExhaustedAt(time.Now())
		switch {
		case err != nil && rep.Slices > 0:
			return Result{}, progressed{err}
		case err != nil:
			return Result{}, err
		case rep.Yielded:
			return Result{}, &checkpoint.LeaseHeldError{Lease: checkpoint.Lease{Stream: job.Stream, Owner: rep.HeldBy, Expires: rep.HeldUntil}}
		case rep.Reason == forage.ReasonBehind:
			// The provider has not published what the stream is due yet:
			// not done (a backfill short of its boundary), no failure, no
			// pressure. Due again at Until, as a turn that waits for the
			// provider's next slot is (a second on at least: never again at
			// once, which an idle turn would be, failed).
			next := maxTime(rep.Until, time.Now().Add(time.Second))
			return Result{}, turnOver{next: next, idle: rep.Slices == 0 && rep.Records == 0 && rep.Resolved <= len(rep.Gaps), last: rep.Stop}
		case rep.Reason == forage.ReasonDeadline && !hostSpent:
			// The turn, not the host's envelope. A turn that ended because
			// the provider's next slot comes after it (a pace slower than
			// a turn) runs again when the slot comes, not at once.
			return Result{}, turnOver{next: rep.Until, idle: rep.Slices == 0 && rep.Records == 0 && rep.Resolved <= len(rep.Gaps), last: rep.Stop}
		case rep.Reason != "":
			stop := &budget.Error{Provider: job.Provider, Reason: rep.Reason, Until: rep.Until}
			if rep.Stop != nil { // with what the provider last said
				stop.Status, stop.Err = rep.Stop.Status, rep.Stop.Err
			}
			if hostSpent && rep.Reason.Exhausted() {
				return Result{}, &envelopeSpent{stop}
			}
			return Result{}, stop
		}
	}
	if !ran {
		return Result{}, fmt.Errorf("schedule: stream %q has no %s source for a %s job", job.Stream, modes[0], job.Kind)
	}
	return Result{Done: true}, nil
}

// envelopeSpent is the stop of a stream whose envelope, the host's
// Stream.Run, is spent: the stream cannot run again in this process (a
// Run's budget never comes back). Its job waits PressureWait, not Requeue,
// before it is looked at again (another process, with an envelope of its
// own, may run it), and [Scheduler.Backfilled] stops waiting for it.
type envelopeSpent struct{ err *budget.Error }

func (e *envelopeSpent) Error() string {
	return fmt.Sprintf("schedule: the stream's Run is spent (%s): it runs no more in this process", e.err.Reason)
}
func (e *envelopeSpent) Unwrap() error { return e.err }

// progressed is the error of a stream run that failed after committing
// slices: its job's failure streak starts again at one, so a feed whose
// runs each commit pages and then meet a failure (a 401 now and then) is
// not backed off as if every run had failed (5 s, 10 s, … up to an hour).
type progressed struct{ err error }

func (p progressed) Error() string { return p.err.Error() }
func (p progressed) Unwrap() error { return p.err }

// backfilledPoll is how often [Scheduler.Backfilled] looks at the jobs.
const backfilledPoll = 250 * time.Millisecond

// Backfilled waits until every stream declared with [AddStream] has
// collected up to now once, and returns nil then: a stream with a
// Backfill when its backfill has reached the start of its history
// ([StateSuccess]); a stream with an Incremental alone (a cursor feed)
// when its incremental job is idle after a run that reached the head (one
// that ended with nothing left to fetch, not one whose turn ran out); its
// next run comes at its Every. A stream done in an earlier process (a job
// store that outlives it, such as pgstore's) runs once again when
// [AddStream] declares it, so that success is not taken for this
// process's: Backfilled waits for that run. It runs
// nothing itself: call it while [Scheduler.Run] runs (in this process or
// another sharing the job store). When ctx ends first, or has a deadline
// that no stream not done can meet (each waits, not running, until after
// it: a provider's long pause, a spent quota, an incremental job's next
// run, or its provider paused or cooling down in this scheduler), its
// error says which streams are not done and where each stands (its job's
// state, when it runs next, what holds it, its last error), and wraps ctx's
// error (or [context.DeadlineExceeded], returned early). When every
// stream not done had its last two runs in this process turned away for
// good (a permanent answer such as a 401 or an unknown symbol, with nothing
// committed), Backfilled returns at once an error that says so and wraps
// the first one's *[budget.Error]: no stream would be done without the
// host's help (the scheduler still retries them, with backoff). So it
// does, wrapping the reason, when the streams not done are those whose
// envelope ([Stream].Run) is spent, or turned away. With no stream
// declared it returns nil at once.
//
// A host that collects up to now and stops runs the scheduler, waits for
// Backfilled, and cancels it; a host that also follows the head keeps it
// running.
func (s *Scheduler) Backfilled(ctx context.Context) error {
	tick := time.NewTicker(backfilledPoll)
	defer tick.Stop()
	deadline, bounded := ctx.Deadline()
	var known []unfinishedJob // the last listing that succeeded, of knownTotal streams
	knownTotal := 0
	for {
		left, total, err := s.unfinished(ctx, deadline)
		if err == nil && len(left) == 0 {
			return nil
		}
		if err == nil {
			known, knownTotal = left, total
		} else if ctx.Err() != nil && known != nil {
			// The deadline came during the listing: what the last one
			// showed still names the streams not done (the error named
			// none, only the listing's own deadline).
			left, total, err = known, knownTotal, nil
		}
		if err == nil && !slices.ContainsFunc(left, func(u unfinishedJob) bool { return u.lost == nil && u.spent == nil }) {
			// Each description already quotes the job's last error, the
			// provider's answer: the error wraps it without saying it again.
			if i := slices.IndexFunc(left, func(u unfinishedJob) bool { return u.spent != nil }); i >= 0 {
				// The host's envelope is spent: no stream not done can run
				// again in this process (each was re-run, doing nothing,
				// every Requeue, and this waited for ctx with no word of
				// the request cap).
				return &quoted{msg: fmt.Sprintf("schedule: %d of %d streams not done, their Run spent (%s) or turned away for good: %s", len(left), total, left[i].spent.Reason, describe(left)), err: left[i].spent}
			}
			return &quoted{msg: fmt.Sprintf("schedule: %d of %d streams turned away for good, not done: %s", len(left), total, describe(left)), err: left[0].lost}
		}
		if err == nil && bounded && !slices.ContainsFunc(left, func(u unfinishedJob) bool { return u.may }) {
			return fmt.Errorf("schedule: %d of %d streams cannot be done by the deadline: %s: %w", len(left), total, describe(left), context.DeadlineExceeded)
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("schedule: streams not known to be done: %w (listing the jobs: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("schedule: %d of %d streams not done: %s: %w", len(left), total, describe(left), ctx.Err())
		case <-tick.C:
		}
	}
}

// RunUntilBackfilled runs s until every stream declared with [AddStream]
// has collected up to now once, as [Scheduler.Backfilled] says, then stops
// it and returns nil: the whole of a command that collects and exits.
// Otherwise it returns Backfilled's error (streams turned away for good,
// an envelope spent, or ctx's end, naming where each stream not done
// stands), or Run's, if Run ended first. It returns once Run has
// returned: every run written, no goroutine left.
func (s *Scheduler) RunUntilBackfilled(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx) }()
	waited := make(chan error, 1)
	go func() { waited <- s.Backfilled(runCtx) }()
	select {
	case err := <-waited:
		cancel()
		rerr := <-ran
		if err == nil && rerr != nil && !errors.Is(rerr, context.Canceled) {
			return rerr
		}
		return err
	case rerr := <-ran:
		cancel()
		err := <-waited
		if rerr == nil || errors.Is(rerr, context.Canceled) && ctx.Err() != nil {
			return err // ctx ended: Backfilled names what was not done
		}
		return rerr
	}
}

// quoted is an error whose message already quotes err's: it reads msg and
// unwraps to err.
type quoted struct {
	msg string
	err error
}

func (q *quoted) Error() string { return q.msg }
func (q *quoted) Unwrap() error { return q.err }

// unfinishedJob is a declared stream's backfill that is not done: where it
// stands, for people, and whether it may run again before the deadline
// Backfilled was given.
type unfinishedJob struct {
	desc  string
	may   bool
	lost  *budget.Error // see stream.lost
	spent *budget.Error // the stream's Run (Stream.Run) is spent, and why; nil if not
}

// describe joins the descriptions of left, the first maxDescribed of them
// (thousands of streams would make an error of megabytes).
func describe(left []unfinishedJob) string {
	ds := make([]string, 0, min(len(left), maxDescribed)+1)
	for _, u := range left[:min(len(left), maxDescribed)] {
		ds = append(ds, u.desc)
	}
	if n := len(left) - maxDescribed; n > 0 {
		ds = append(ds, fmt.Sprintf("and %d more", n))
	}
	return strings.Join(ds, "; ")
}

// maxDescribed is how many backfills not done an error of Backfilled
// describes.
const maxDescribed = 10

// unfinished returns the declared streams not done (see Backfilled), in
// stream order, and says how many streams are declared. A stream's job may
// run before deadline (zero: none) unless it waits, not running, until
// after it (its provider's cool-down included), or it or its provider is
// paused.
func (s *Scheduler) unfinished(ctx context.Context, deadline time.Time) (left []unfinishedJob, total int, err error) {
	type want struct {
		provider string
		kind     Kind
		st       *stream
	}
	s.mu.Lock()
	wants := map[string]want{} // stream -> its job that says it is done
	for name, st := range s.streams {
		if st.run[checkpoint.CatchUp] != nil || st.run[checkpoint.SteadyState] != nil {
			wants[name] = want{provider: st.provider, kind: st.doneKind(), st: st}
		}
	}
	paused, cooling := maps.Clone(s.paused), maps.Clone(s.cooling)
	s.mu.Unlock()
	jobs, err := s.store.List(ctx, Query{})
	if err != nil {
		return nil, len(wants), err
	}
	seen := map[string]bool{}
	now := time.Now()
	for _, j := range jobs {
		w, ok := wants[j.Stream]
		if !ok || w.provider != j.Provider || w.kind != j.Kind {
			continue
		}
		seen[j.Stream] = true
		if w.kind == KindBackfill && j.State == StateSuccess || w.kind == KindIncremental && j.State == StateIdle && !j.Stats.LastSuccess.IsZero() {
			continue // a periodic job is idle after a run that reached the head
		}
		u := unfinishedJob{desc: fmt.Sprintf("%s %s", j.Stream, j.State), may: true}
		if w.kind == KindIncremental {
			u.desc = fmt.Sprintf("%s %s, not at the head", j.Stream, j.State)
		}
		if j.State != StateRunning && !j.NextRun.IsZero() {
			if j.NextRun.After(now) {
				u.desc += " until " + j.NextRun.UTC().Format(time.RFC3339)
			} else {
				// Due, and not started: "until" a time past read as a
				// wake-up that never came. An open breaker holds a
				// provider's backfills (see Config.Spare).
				u.desc += " due since " + j.NextRun.UTC().Format(time.RFC3339)
				if s.breakerOpen(j.Provider) {
					u.desc += ", held while the provider's breaker is open"
				}
			}
		}
		// What holds the job's provider here, an operator's pause or a
		// cool-down past its NextRun, holds the job: said, and counted
		// when the job may start (such a stream was "due since" a time
		// past, with no word of why, and Backfilled waited out its
		// deadline for it).
		startAt, providerPaused := j.NextRun, paused[j.Provider]
		if j.State != StateRunning && j.State != StatePaused {
			if c := cooling[j.Provider]; providerPaused {
				u.desc += ", held while its provider is paused (Scheduler.SetProviderPaused)"
			} else if c.After(now) && c.After(j.NextRun) {
				u.desc += ", held while its provider cools down until " + c.UTC().Format(time.RFC3339)
				startAt = c
			}
		}
		if j.Stats.LastError != "" {
			u.desc += " (" + j.Stats.LastError + ")"
		}
		if !deadline.IsZero() && j.State != StateRunning && (j.State == StatePaused || providerPaused || !startAt.Before(deadline)) {
			u.may = false
		}
		if w.st.lostRuns.Load() >= lostForGood {
			u.lost = w.st.lost.Load()
		}
		if why, spent := w.st.parent.ExhaustedAt(now); spent && j.State != StateRunning {
			u.spent, u.may = &budget.Error{Provider: j.Provider, Reason: why}, false
			u.desc += fmt.Sprintf(" (its Run is spent: %s)", why)
		}
		left = append(left, u)
	}
	for name, w := range wants {
		if !seen[name] {
			left = append(left, unfinishedJob{desc: fmt.Sprintf("%s: no %s job", name, w.kind), may: true})
		}
	}
	slices.SortFunc(left, func(a, b unfinishedJob) int { return strings.Compare(a.desc, b.desc) })
	return left, len(wants), nil
}
