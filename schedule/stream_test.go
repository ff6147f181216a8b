package schedule_test

import (
	"context"
	"errors"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// timed is a Source of one-record pages, one per second of its time line,
// from from up to until() (the head: now, or a fixed boundary). The cursor
// is the next second to fetch, in Unix seconds. Fetch takes lat, and tracks
// how many fetches of its stream (shared by the stream's two sources) are
// in flight at once.
type timed struct {
	from  time.Time
	until func() time.Time
	page  int // seconds per page
	lat   time.Duration
	load  *load
}

// load tracks the fetches in flight of one stream, both modes together.
type load struct {
	mu       sync.Mutex
	now, max int
}

func (l *load) enter() {
	l.mu.Lock()
	l.now++
	l.max = max(l.max, l.now)
	l.mu.Unlock()
}

func (l *load) leave() {
	l.mu.Lock()
	l.now--
	l.mu.Unlock()
}

func (s *timed) pos(cursor []byte) int64 {
	if len(cursor) == 0 {
		return s.from.Unix()
	}
	n, _ := strconv.ParseInt(string(cursor), 10, 64)
	return n
}

func (s *timed) Next(_ context.Context, cursor []byte, _ checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, s.pos(cursor) < s.until().Unix(), nil
}

func (s *timed) Fetch(ctx context.Context, sl slice.Slice) (slice.Page[int64], forage.Outcome) {
	s.load.enter()
	defer s.load.leave()
	select {
	case <-time.After(s.lat):
	case <-ctx.Done():
		return slice.Page[int64]{}, forage.Outcome{Err: ctx.Err()}
	}
	p := s.pos(sl.After)
	end := min(p+int64(s.page), s.until().Unix())
	var recs []int64
	for x := p; x < end; x++ {
		recs = append(recs, x)
	}
	return slice.Page[int64]{Records: recs, Next: []byte(strconv.FormatInt(end, 10))}, forage.Outcome{Status: 200}
}

// kept is a Sink that counts every record it is given.
type kept struct {
	mu   sync.Mutex
	seen map[int64]int
}

func (k *kept) Write(_ context.Context, p slice.Page[int64]) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen == nil {
		k.seen = map[int64]int{}
	}
	for _, r := range p.Records {
		k.seen[r]++
	}
	return nil
}

// holes returns the seconds in [from, to) the sink never got.
func (k *kept) holes(from, to int64) []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []int64
	for x := from; x < to; x++ {
		if k.seen[x] == 0 {
			out = append(out, x)
		}
	}
	return out
}

// streamSched is a scheduler over a fresh memory job store and checkpoint
// store, with a registry for its providers.
func streamSched(t *testing.T, cfg schedule.Config, reg budget.RegistryConfig) (*schedule.Scheduler, schedule.JobStore) {
	t.Helper()
	r, err := budget.NewRegistry(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Budget, cfg.Checkpoints = r, checkpoint.NewMemoryStore(checkpoint.Config{})
	store := schedule.NewMemoryJobStore()
	s, err := schedule.New(cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, store
}

// TestStreamsRunHeadFirstBackfillWhenIdle: three declared streams over one
// provider, each with two hours of history and a live head, run by the
// scheduler alone (no Worker, no glue). Every second of history and of the
// head reaches the sink, the backfills end done, the incremental jobs keep
// their cadence, and a backfill and an incremental job of one stream never
// run at once: no run ever yields, and no two fetches of one stream are in
// flight together.
func TestStreamsRunHeadFirstBackfillWhenIdle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, store := streamSched(t, schedule.Config{MaxRunning: 6, MaxPerProvider: 6}, budget.RegistryConfig{})
		begin := time.Now()
		boundary := begin
		listed := begin.Add(-2 * time.Hour)
		names := []string{"a", "b", "c"}
		loads, sinks := map[string]*load{}, map[string]*kept{}
		for _, name := range names {
			l, k := &load{}, &kept{}
			loads[name], sinks[name] = l, k
			err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{
				Name: name, Provider: "p", Sink: k, Every: 5 * time.Second,
				Backfill:    &timed{from: listed, until: func() time.Time { return boundary }, page: 60, lat: 100 * time.Millisecond, load: l},
				Incremental: &timed{from: boundary, until: time.Now, page: 60, lat: 100 * time.Millisecond, load: l},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		stop := start(t, s)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		stop()

		end := time.Now().Add(-10 * time.Second) // the head's last seconds may be in the next cycle
		for _, name := range names {
			if h := sinks[name].holes(listed.Unix(), end.Unix()); len(h) != 0 {
				t.Errorf("stream %s: %d seconds never written, first %v", name, len(h), time.Unix(h[0], 0).Sub(listed))
			}
			if m := loads[name].max; m != 1 {
				t.Errorf("stream %s: %d fetches in flight at once; want 1 (one job per stream)", name, m)
			}
		}
		jobs, _ := store.List(t.Context(), schedule.Query{})
		for _, j := range jobs {
			switch {
			case j.Kind == schedule.KindBackfill && j.State != schedule.StateSuccess:
				t.Errorf("backfill of %s: %s after %d runs (last error %q); want success", j.Stream, j.State, j.Stats.Runs, j.Stats.LastError)
			case j.Kind == schedule.KindIncremental && (j.Stats.Runs < 20 || j.Stats.Failures != 0):
				t.Errorf("incremental of %s: %d runs, %d failures in 2 minutes every 5s; want >= 20 and none", j.Stream, j.Stats.Runs, j.Stats.Failures)
			}
		}
		snap, _ := s.SnapshotPage(t.Context(), time.Now(), "", math.MaxInt)
		if d := snap.Decisions; d.Yielded != 0 || d.Failed != 0 {
			t.Errorf("decisions %+v; want no yield and no failure", d)
		}
	})
}

// TestDeclaredStreamYieldIsNotSuccess: when another owner holds a declared
// stream's lease, its run does nothing, and the job is neither a success
// nor a failure: it waits (queued, the holder named in LastError) and runs
// once the lease is free. Before the scheduler read reports itself, a
// host's glue counted such a yield as a finished backfill.
func TestDeclaredStreamYieldIsNotSuccess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r, _ := budget.NewRegistry(budget.RegistryConfig{})
		cps := checkpoint.NewMemoryStore(checkpoint.Config{})
		store := schedule.NewMemoryJobStore()
		s, err := schedule.New(schedule.Config{Budget: r, Checkpoints: cps, PressureWait: 10 * time.Second}, store, nil)
		if err != nil {
			t.Fatal(err)
		}
		held, err := cps.Acquire(t.Context(), "s", "another-process", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		src := &pages{n: 3}
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int]{Name: "s", Provider: "p", Backfill: src, Sink: discard}); err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		jobs, _ := store.List(t.Context(), schedule.Query{})
		j := jobs[0]
		if from, _ := src.requests(); j.State != schedule.StateQueued || !strings.Contains(j.Stats.LastError, "another-process") ||
			j.Stats.Successes != 0 || j.Stats.Failures != 0 || len(from) != 0 {
			t.Fatalf("while held: %s, last error %q, %d successes, %d failures, %d requests; want queued naming the holder, no success, no failure, no request",
				j.State, j.Stats.LastError, j.Stats.Successes, j.Stats.Failures, len(from))
		}
		if err := cps.Release(t.Context(), held); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		j, _ = store.Get(t.Context(), j.ID)
		if from, _ := src.requests(); j.State != schedule.StateSuccess || !slices.Equal(from, []string{"", "1", "2"}) {
			t.Fatalf("after the release: %s, requests after %q; want success, every page once", j.State, from)
		}
		if snap, _ := s.SnapshotPage(t.Context(), time.Now(), "", math.MaxInt); snap.Decisions.Yielded == 0 {
			t.Errorf("Decisions.Yielded = 0; want the yield counted")
		}
	})
}

// TestJobNeitherStreamNorWorkerFails: a scheduler without a Worker runs
// its declared streams; a job of any other stream fails, saying why.
func TestJobNeitherStreamNorWorkerFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, store := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "undeclared"})
		stop := start(t, s)
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		jobs, _ := store.List(t.Context(), schedule.Query{})
		if j := jobs[0]; j.State != schedule.StateFailed || !strings.Contains(j.Stats.LastError, "not a declared stream") {
			t.Fatalf("job %s, last error %q; want failed, saying it is not a declared stream", j.State, j.Stats.LastError)
		}
	})
}

// TestAddStreamValidates: AddStream names the field at fault, and checks
// the slice configuration at once rather than at the first run.
func TestAddStreamValidates(t *testing.T) {
	t.Parallel()
	r, _ := budget.NewRegistry(budget.RegistryConfig{})
	cps := checkpoint.NewMemoryStore(checkpoint.Config{})
	src := &pages{n: 1}
	ok := schedule.Stream[int]{Name: "s", Provider: "p", Backfill: src, Sink: discard}
	for _, tc := range []struct {
		name  string
		cfg   schedule.Config
		st    func(*schedule.Stream[int])
		field string
	}{
		{"no budget", schedule.Config{Checkpoints: cps}, nil, "Config.Budget"},
		{"no checkpoints", schedule.Config{Budget: r}, nil, "Config.Checkpoints"},
		{"no source", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Backfill = nil }, "Stream.Backfill"},
		{"no every", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Incremental = src }, "Stream.Every"},
		{"no name", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Name = "" }, "Stream.Name"}, // it named Spec.Stream, a field the host never set
		// These three named Spec.Provider, Spec.Stream and Spec.Priority: fields of a Spec the host never wrote.
		{"bad provider", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Provider = "a\nb" }, "Stream.Provider"},
		{"no provider", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Provider = "" }, "Stream.Provider"},
		{"bad name", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Name = "a\nb" }, "Stream.Name"},
		{"bad priority", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Priority = 5000 }, "Stream.Priority"},
		{"no sink", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Sink = nil }, "Config.Sink"},
		{"options set", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Options.Stream = "x" }, "Stream.Options.Stream"},
		{"options owner set", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Options.Owner = "me" }, "Stream.Options.Owner"}, // "(got a field set)": which one?
		{"bad options", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Options.MaxBatch = -1 }, "Config.MaxBatch"},
		// A series no store accepts: each run advanced one slice, then failed at the coverage.
		{"bad series", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.Options.Series = "x\x00" }, "Config.Series"},
		{"negative run", schedule.Config{Budget: r, Checkpoints: cps}, func(s *schedule.Stream[int]) { s.RunFor = -1 }, "Stream.RunFor"},
	} {
		s, err := schedule.New(tc.cfg, schedule.NewMemoryJobStore(), nil)
		if err != nil {
			t.Fatal(err)
		}
		st := ok
		if tc.st != nil {
			tc.st(&st)
		}
		err = schedule.AddStream(t.Context(), s, st)
		want := schedule.ErrInvalid // the Stream argument, and the job's Spec it makes
		switch tc.field {
		case "Config.Budget", "Config.Checkpoints":
			want = schedule.ErrInvalidConfig // the scheduler's Config
		case "Config.Sink", "Config.MaxBatch", "Config.Series":
			want = slice.ErrInvalidConfig // Stream.Options and Sink: the runner's config
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), tc.field+" ") || strings.Contains(err.Error(), "Spec.") {
			t.Errorf("%s: AddStream = %v; want an error wrapping %v naming %s", tc.name, err, want, tc.field)
		}
	}
	// Declared for one provider, a name stays that provider's.
	s, _ := schedule.New(schedule.Config{Budget: r, Checkpoints: cps}, schedule.NewMemoryJobStore(), nil)
	if err := schedule.AddStream(t.Context(), s, ok); err != nil {
		t.Fatal(err)
	}
	if err := schedule.AddStream(t.Context(), s, ok); err != nil {
		t.Fatalf("declaring a stream again = %v; want nil (idempotent)", err)
	}
	// Declared again without a source it had, the stream loses that job.
	both := ok
	both.Incremental, both.Every = src, time.Minute
	if err := schedule.AddStream(t.Context(), s, both); err != nil {
		t.Fatal(err)
	}
	if err := schedule.AddStream(t.Context(), s, ok); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := s.Store().List(t.Context(), schedule.Query{}); len(jobs) != 1 || jobs[0].Kind != schedule.KindBackfill {
		t.Errorf("after dropping the Incremental source: jobs %v; want the backfill alone", jobs)
	}
	other := ok
	other.Provider = "q"
	if err := schedule.AddStream(t.Context(), s, other); err == nil || !strings.Contains(err.Error(), `"p"`) {
		t.Errorf("the stream for another provider = %v; want an error naming its provider", err)
	}
}

// TestSlowPacedTurnsDoNotSpin: a stream whose provider paces slower than a
// turn lasts (one request every 5 s, turns of 1 s) would end every turn at
// once, "deadline", the next slot being past the turn's end; run again at
// once, it did so hundreds of times a second, each run a round of lease,
// checkpoint and job store writes. Such a turn is run again when the slot
// comes: a few runs per slot, and the history still arrives.
func TestSlowPacedTurnsDoNotSpin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		slow := budget.Config{Adaptive: aimd.Config{Initial: 0.2, Max: 0.2, Min: 0.2}}
		s, store := streamSched(t, schedule.Config{}, budget.RegistryConfig{Defaults: slow})
		begin := time.Now()
		k := &kept{}
		ctx, cancel := context.WithCancel(t.Context())
		var runs atomic.Int64
		err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{
			Name: "slow", Provider: "p", Sink: k, RunFor: time.Second,
			Backfill: &timed{from: begin.Add(-time.Hour), until: func() time.Time { return begin }, page: 60, load: &load{}},
			OnRun: func(schedule.Job, slice.Report, error) {
				if runs.Add(1) > 1000 {
					cancel() // a spin: time stands still under synctest while it lasts
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		select {
		case <-time.After(time.Minute):
		case <-ctx.Done():
		}
		cancel()
		<-done
		jobs, _ := store.List(t.Context(), schedule.Query{})
		if len(jobs) != 1 {
			t.Fatalf("%d jobs; want the one backfill", len(jobs))
		}
		n, got := jobs[0].Stats.Runs, len(k.seen)
		t.Logf("a minute at one request per 5 s: %d runs, %d seconds of history", n, got)
		if n > 60 {
			t.Errorf("%d runs in a minute at one request per 5 s; want a few per request, not a spin", n)
		}
		if got < 10*60 {
			t.Errorf("%d seconds of history in a minute (12 pages of 60 s are due); want at least 600", got)
		}
	})
}

// hanger is a Source whose every fetch waits until its context ends: a
// provider that never answers.
type hanger struct{ calls atomic.Int32 }

func (h *hanger) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (h *hanger) Fetch(ctx context.Context, _ slice.Slice) (slice.Page[int], forage.Outcome) {
	h.calls.Add(1)
	<-ctx.Done()
	return slice.Page[int]{}, forage.Outcome{Err: ctx.Err()}
}

// TestAnIdleTurnIsNotASuccess: a stream whose every fetch times out
// collects nothing, turn after turn. Each turn is a failure naming why,
// backed off, never a success. Before, each counted as one (29 successes
// in 30 minutes, LastSuccess fresh, no error, nothing written; found by a
// review).
func TestAnIdleTurnIsNotASuccess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, store := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		src := &hanger{}
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int]{Name: "s", Provider: "p", Backfill: src, Sink: discard}); err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		defer stop()
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		jobs, err := store.List(t.Context(), schedule.Query{})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("List = %d jobs, %v", len(jobs), err)
		}
		st := jobs[0].Stats
		if st.Successes != 0 || st.Failures == 0 || !strings.Contains(st.LastError, "nothing collected") {
			t.Fatalf("after 30 minutes of fetches that time out: %d runs, %d successes, %d failures, last error %q; want failures naming it, no success",
				st.Runs, st.Successes, st.Failures, st.LastError)
		}
	})
}

// TestAResumeReachesTheSchedulerWithinSeconds: an operator pauses a
// stream's provider, then resumes it; the stream runs again within a few
// seconds of the resume. Before, the pause cooled the provider for
// PressureWait (a minute), and the first run came 40 s after the resume
// (found by a review).
func TestAResumeReachesTheSchedulerWithinSeconds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		store := schedule.NewMemoryJobStore()
		s, err := schedule.New(schedule.Config{Budget: reg, Checkpoints: checkpoint.NewMemoryStore(checkpoint.Config{})}, store, nil)
		if err != nil {
			t.Fatal(err)
		}
		src := &timed{from: time.Now(), until: time.Now, page: 60, load: &load{}}
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "s", Provider: "p", Incremental: src, Sink: &kept{}, Every: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		defer stop()
		time.Sleep(10 * time.Second)
		if err := reg.SetStatus(t.Context(), "p", budget.StatusPaused, "maintenance"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Second)
		synctest.Wait()
		jobs, err := store.List(t.Context(), schedule.Query{})
		if err != nil || len(jobs) != 1 || jobs[0].State != schedule.StateWaitingRateLimit {
			t.Fatalf("paused: jobs %+v, %v; want the one waiting", jobs, err)
		}
		if err := reg.SetStatus(t.Context(), "p", budget.StatusActive, ""); err != nil {
			t.Fatal(err)
		}
		resumed, j := time.Now(), jobs[0]
		for j.Stats.Runs == jobs[0].Stats.Runs || j.State == schedule.StateWaitingRateLimit {
			if time.Since(resumed) > 10*time.Second {
				t.Fatalf("no run %v after the resume: %+v", time.Since(resumed), j)
			}
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if j, err = store.Get(t.Context(), j.ID); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// down is a Source whose every fetch is answered 503 with the provider's
// words: a provider down for maintenance.
type down struct{}

func (down) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (down) Fetch(context.Context, slice.Slice) (slice.Page[int], forage.Outcome) {
	return slice.Page[int]{}, forage.Outcome{Status: 503, Err: errors.New("HTTP 503: down for maintenance")}
}

// TestAStopSaysWhatTheProviderSaid: a stream stopped by a provider that
// answers 503 keeps, in its job's last error, what the stop said of the
// provider's answers (here the breaker's open state, naming the 503s it
// counted). Before, the stop was rebuilt from its reason alone: the last
// error read "budget: p: circuit_open until …", with nothing of the 503s.
func TestAStopSaysWhatTheProviderSaid(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, store := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int]{Name: "s", Provider: "p", Backfill: down{}, Sink: discard}); err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		defer stop()
		var last string
		for range 60 { // the first stop, before the breaker opens
			time.Sleep(time.Second)
			synctest.Wait()
			jobs, err := store.List(t.Context(), schedule.Query{})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("List = %d jobs, %v", len(jobs), err)
			}
			if last = jobs[0].Stats.LastError; last != "" {
				break
			}
		}
		if !strings.Contains(last, "503") {
			t.Fatalf("last error %q; want it to say what the provider answered (503)", last)
		}
	})
}

// TestBackfilledWaitsForEveryBackfill: Backfilled returns nil once every
// declared stream's backfill reached the start of its history, and, when
// its context ends first, an error naming each backfill not done, where it
// stands and why (here a provider down for maintenance), wrapping the
// context's error; as soon as no backfill not done can be by the deadline
// (each waits until after it), it says so at once. Hosts wrote this wait
// themselves, from OnRun.
func TestBackfilledWaitsForEveryBackfill(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		now := time.Now()
		for _, name := range []string{"a", "b"} {
			src := &timed{from: now.Add(-time.Hour), until: func() time.Time { return now }, page: 60, load: &load{}}
			if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: name, Provider: "p", Backfill: src, Sink: &kept{}}); err != nil {
				t.Fatal(err)
			}
		}
		stop := start(t, s)
		defer stop()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := s.Backfilled(ctx); err != nil {
			t.Fatalf("Backfilled = %v, want nil: an hour of history each", err)
		}

		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int]{Name: "c", Provider: "q", Backfill: down{}, Sink: discard}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		began := time.Now()
		err := s.Backfilled(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 of 3 streams") || !strings.Contains(err.Error(), ": c ") || !strings.Contains(err.Error(), "503") {
			t.Fatalf("Backfilled = %v; want the deadline, naming backfill c and what its provider answered", err)
		}
		t.Logf("after %v: %v", time.Since(began), err)
		// The breaker holds c past the deadline: said as soon as it is
		// known, not at the deadline.
		if waited := time.Since(began); waited >= time.Minute {
			t.Errorf("Backfilled returned after %v, at the deadline; want as soon as no backfill can be done by it", waited)
		}
	})
}

// tokens is a cursor feed ("items after a token"): n items in pages of
// page, the token the count so far, the last page flagged Last.
type tokens struct{ n, page int64 }

func (f tokens) Next(_ context.Context, c []byte, _ checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{After: c}, true, nil
}

func (f tokens) Fetch(_ context.Context, s slice.Slice) (slice.Page[int64], forage.Outcome) {
	from, _ := strconv.ParseInt(string(s.After), 10, 64)
	to := min(from+f.page, f.n)
	p := slice.Page[int64]{Next: []byte(strconv.FormatInt(to, 10)), Last: to == f.n}
	for x := from; x < to; x++ {
		p.Records = append(p.Records, x)
	}
	return p, forage.Outcome{Status: 200}
}

// TestBackfilledWaitsForACursorFeed: a cursor feed is declared with an
// Incremental alone (it has one cursor); Backfilled returns once a run of
// it has reached the head, with every item in the sink. Before, it
// returned nil at once, no backfill being declared: a host that syncs up
// to now and exits said "done" with nothing collected.
func TestBackfilledWaitsForACursorFeed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		sink := &kept{}
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "items", Provider: "p", Incremental: tokens{n: 300, page: 50}, Every: time.Minute, Sink: sink}); err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		defer stop()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := s.Backfilled(ctx); err != nil {
			t.Fatalf("Backfilled = %v, want nil", err)
		}
		if h := sink.holes(0, 300); len(h) > 0 {
			t.Fatalf("Backfilled returned with %d of 300 items missing", len(h))
		}
	})
}

// flaky is a cursor feed whose every third page is refused once (a 401 now
// and then), after the pages before it in the run were committed.
type flaky struct {
	mu      sync.Mutex
	refused map[int64]bool
}

func (f *flaky) Next(_ context.Context, c []byte, _ checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{After: c}, true, nil
}

func (f *flaky) Fetch(_ context.Context, s slice.Slice) (slice.Page[int64], forage.Outcome) {
	from, _ := strconv.ParseInt(string(s.After), 10, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	if from%30 == 20 && !f.refused[from] {
		f.refused[from] = true
		return slice.Page[int64]{}, forage.Outcome{Status: 401, Err: errors.New("HTTP 401: token expired")}
	}
	p := slice.Page[int64]{Next: []byte(strconv.FormatInt(from+10, 10))}
	for x := from; x < from+10; x++ {
		p.Records = append(p.Records, x)
	}
	return p, forage.Outcome{Status: 200}
}

// TestAFailureAfterProgressIsNotAStreak: a feed whose runs each commit
// pages and then meet one failure (a 401) is not backed off as if every run
// had failed: its failure streak stays at one. Before, the streak grew at
// every such run (5 s, 10 s, … an hour between runs) though each run moved
// the stream forward.
func TestAFailureAfterProgressIsNotAStreak(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, store := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "items", Provider: "p", Backfill: &flaky{refused: map[int64]bool{}}, Sink: &kept{}}); err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		defer stop()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		jobs, err := store.List(t.Context(), schedule.Query{})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("List = %d jobs, %v", len(jobs), err)
		}
		if st := jobs[0].Stats; st.Failures < 5 || st.Streak > 1 {
			t.Fatalf("stats %+v; want 5 failures or more, each after progress, and a streak of at most 1", st)
		}
	})
}

// TestBackfilledWaitsForACursorFeedsBacklog: a cursor feed with a backlog
// longer than one turn: Backfilled returns once a run reached the head, not
// after the first turn that ran out of time (it returned after 2 s with
// 2,600 of 20,000 items).
func TestBackfilledWaitsForACursorFeedsBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		sink := &kept{}
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "items", Provider: "p", Incremental: tokens{n: 20000, page: 10}, Every: time.Minute, RunFor: 2 * time.Second, Sink: sink}); err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		defer stop()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		began := time.Now()
		if err := s.Backfilled(ctx); err != nil {
			t.Fatalf("Backfilled = %v, want nil", err)
		}
		if h := sink.holes(0, 20000); len(h) > 0 {
			t.Fatalf("Backfilled returned after %v with items missing (%d hole ranges, first %v)", time.Since(began), len(h), h[0])
		}
	})
}

// TestBackfilledAfterARestart: the same job store and checkpoints, the feed
// caught up by the previous process a minute ago, Every an hour: the new
// process's Backfilled returns after one run to the head, made at once (it
// waited for a success since its own declaration, an hour away; see also
// TestACursorFeedDoneBeforeARestartIsCollectedAgainToItsHead).
func TestBackfilledAfterARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := budget.NewRegistry(budget.RegistryConfig{})
		cps := checkpoint.NewMemoryStore(checkpoint.Config{})
		store := schedule.NewMemoryJobStore()
		mk := func() *schedule.Scheduler {
			s, err := schedule.New(schedule.Config{Budget: r, Checkpoints: cps}, store, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		decl := func(s *schedule.Scheduler) {
			if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "items", Provider: "p", Incremental: tokens{n: 300, page: 50}, Every: time.Hour, Sink: &kept{}}); err != nil {
				t.Fatal(err)
			}
		}
		s1 := mk()
		decl(s1)
		stop := start(t, s1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		if err := s1.Backfilled(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		stop()
		time.Sleep(time.Minute)
		s2 := mk()
		decl(s2)
		stop2 := start(t, s2)
		defer stop2()
		ctx2, cancel2 := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel2()
		began := time.Now()
		if err := s2.Backfilled(ctx2); err != nil {
			t.Fatalf("after a restart, Backfilled = %v after %v (the feed was at the head a minute ago)", err, time.Since(began))
		}
	})
}

// refuser is a Source whose provider is down: each fetch takes a while,
// then its connection is refused.
type refuser struct{}

func (refuser) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (refuser) Fetch(ctx context.Context, _ slice.Slice) (slice.Page[int], forage.Outcome) {
	select {
	case <-ctx.Done():
		return slice.Page[int]{}, forage.Outcome{Err: ctx.Err()}
	case <-time.After(700 * time.Millisecond):
	}
	return slice.Page[int]{}, forage.Outcome{Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

// TestAnIdleTurnNamesTheLastAnswer: a turn that collected nothing because
// its provider refused every connection until the turn ended says so in
// the job's LastError. It said only that the turn collected nothing, and
// "connection refused" was nowhere an operator looks.
func TestAnIdleTurnNamesTheLastAnswer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, store := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
		if err := schedule.AddStream(t.Context(), s, schedule.Stream[int]{Name: "s", Provider: "p", Incremental: refuser{}, Sink: discard,
			Every: time.Minute, RunFor: time.Second}); err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		defer stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		jobs, err := store.List(t.Context(), schedule.Query{})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("List = %d jobs, %v", len(jobs), err)
		}
		if st := jobs[0].Stats; st.Failures == 0 || !strings.Contains(st.LastError, "connection refused") {
			t.Fatalf("%d runs, %d failures, last error %q; want a failure naming the refused connection", st.Runs, st.Failures, st.LastError)
		}
	})
}
