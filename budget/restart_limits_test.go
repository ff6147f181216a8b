package budget_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// mortal is one process's view of a record store that outlives it: once
// the process is killed, nothing it still had under way reaches the store
// (a background save after the kill would make the record more current
// than a real kill leaves it).
type mortal struct {
	budget.RecordStore
	dead atomic.Bool
}

func (m *mortal) SaveRecord(ctx context.Context, r forage.ProviderRecord) error {
	if m.dead.Load() {
		return errors.New("killed")
	}
	return m.RecordStore.SaveRecord(ctx, r)
}

// sendLogW is the provider's count of what reached it: when, and how many
// units.
type sendLogW struct {
	mu   sync.Mutex
	at   []time.Time
	w    []int
	sent int
}

func (s *sendLogW) add(w int) {
	s.mu.Lock()
	s.at, s.w = append(s.at, time.Now()), append(s.w, w)
	s.sent++
	s.mu.Unlock()
}

// most returns the most units any window of length per held.
func (s *sendLogW) most(per time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := 0
	for i := range s.at {
		n := 0
		for j := i; j < len(s.at) && s.at[j].Sub(s.at[i]) < per; j++ {
			n += s.w[j]
		}
		best = max(best, n)
	}
	return best
}

// hammer sends through p with workers goroutines, each call of weight w,
// until ctx ends; a quota stop waits for its Until.
func hammer(ctx context.Context, p budget.Provider, log *sendLogW, workers, w int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := p.Do(ctx, nil, func(context.Context) forage.Outcome {
					log.add(w)
					return forage.Outcome{Status: 200}
				}, budget.CallOption{Weight: w})
				var e *budget.Error
				if err == nil || !errors.As(err, &e) {
					continue
				}
				wait := time.Until(e.Until) // a stop for the quota, or for a deadline before the slot
				if e.Until.IsZero() {
					wait = time.Millisecond
				}
				select {
				case <-time.After(wait):
				case <-ctx.Done():
				}
			}
		})
	}
	wg.Wait()
}

// TestARestartNeverSpendsAWindowTwice: processes that share a record store
// and are killed at random moments (nothing saved at exit), each restarted
// at once, never send more than a known limit allows in any of its
// windows, weights included. A restart forgot what the process before it
// had booked: killed and restarted every two seconds, collectors told 3
// per hour sent 10 requests in 20 seconds, and 100 per minute held 110 in
// one minute.
func TestARestartNeverSpendsAWindowTwice(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			per := rapid.SampledFrom([]time.Duration{time.Second, time.Minute, time.Hour}).Draw(rt, "per")
			count := rapid.IntRange(1, 200).Draw(rt, "count")
			burst := 0
			if count > 1 && rapid.Bool().Draw(rt, "setBurst") {
				burst = rapid.IntRange(1, count-1).Draw(rt, "burst")
			}
			weighted := rapid.Bool().Draw(rt, "weighted")
			limit := budget.Limit{Name: "l", Count: count, Per: per, Burst: burst, Weighted: weighted}
			w := 1
			if weighted {
				w = rapid.IntRange(1, max(1, count/2)).Draw(rt, "weight")
			}
			store := checkpoint.NewMemoryStore(checkpoint.Config{})
			lives := rapid.SliceOfN(rapid.Int64Range(int64(10*time.Millisecond), int64(2*per)), 2, 8).Draw(rt, "lives")
			workers := rapid.IntRange(1, 4).Draw(rt, "workers")
			var log sendLogW
			for i, life := range lives {
				view := &mortal{RecordStore: store}
				cfg := fast()
				cfg.Limits = []budget.Limit{limit}
				cfg.Records = view
				p, err := budget.NewLocal("api", cfg)
				if err != nil {
					rt.Fatalf("process %d: NewLocal: %v", i, err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(life))
				hammer(ctx, p, &log, workers, w)
				cancel()
				view.dead.Store(true) // killed: whatever it had under way is lost
			}
			if got := log.most(per); got > count {
				rt.Fatalf("%d processes, killed after %v: a window of %v held %d units, limit %d", len(lives), lives, per, got, count)
			}
		})
	})
}

// TestACronHostSpendsASlowLimitWhole: a host started every 5 minutes for
// 30 seconds, shut down cleanly each time, against a known limit of 3 per
// hour kept in a file store: it sends the 9 requests the limit allows in 3
// hours (3 per hour), never 4 in an hour. Each start held its first request
// for one interval of the learned rate, 20 minutes, counted from the start:
// 36 starts sent 1 request in all. A limit of 3 per hour paced at 2 per
// hour besides.
func TestACronHostSpendsASlowLimitWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		var log sendLogW
		limit := budget.Limit{Count: 3, Per: time.Hour}
		for range 36 {
			store, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := fast()
			cfg.Limits = []budget.Limit{limit}
			cronStart(t, store, cfg, &log)
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5*time.Minute - 30*time.Second)
		}
		if log.sent < 9 || log.most(time.Hour) > 3 {
			t.Fatalf("36 runs in 3 hours sent %d, at most %d in an hour; want 9, at most 3", log.sent, log.most(time.Hour))
		}
	})
}

// TestAWeightAboveTheBurstIsSent: a weighted limit carries a call heavier
// than its burst, up to half its count (10 per second, burst 1: weight 2
// and 5; 1200 a minute, burst 120: weight 200 and 600), and refuses a
// heavier one as permanent, naming Burst, with no attempt made. A weight of
// 2 against 10 per second failed as permanent.
func TestAWeightAboveTheBurstIsSent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			limit budget.Limit
			w     int
			ok    bool
		}{
			{budget.Limit{Count: 10, Per: time.Second, Weighted: true}, 2, true},
			{budget.Limit{Count: 10, Per: time.Second, Weighted: true}, 5, true},
			{budget.Limit{Count: 10, Per: time.Second, Weighted: true}, 6, false},
			{budget.Limit{Count: 1200, Per: time.Minute, Weighted: true}, 200, true},
			{budget.Limit{Count: 1200, Per: time.Minute, Weighted: true}, 600, true},
			{budget.Limit{Count: 1200, Per: time.Minute, Weighted: true}, 601, false},
			{budget.Limit{Count: 1200, Per: time.Minute, Weighted: true, Burst: 900}, 900, true},
		} {
			cfg := fast()
			cfg.Limits = []budget.Limit{c.limit}
			p := newLocal(t, cfg)
			sent := 0
			err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
				sent++
				return forage.Outcome{Status: 200}
			}, budget.CallOption{Weight: c.w})
			switch {
			case c.ok && (err != nil || sent != 1):
				t.Errorf("%d/%v, weight %d: Do = %v, sent %d; want sent", c.limit.Count, c.limit.Per, c.w, err, sent)
			case !c.ok && (!errors.Is(err, budget.ErrInvalidConfig) || reasonOf(t, err) != forage.ReasonPermanent || sent != 0):
				t.Errorf("%d/%v, weight %d: Do = %v, sent %d; want a permanent ErrInvalidConfig, nothing sent", c.limit.Count, c.limit.Per, c.w, err, sent)
			}
		}
	})
}

// TestASlowLimitIsSpentWhole: one process against a known limit of 3 per
// hour sends 3 in every hour, not 2 (paced at (Count − Burst)/Per, a third
// of the quota went unused), and never 4; so do 2 a day and 1 a month, a
// limit the provider once refused to build (its rate was under the
// controller's floor).
func TestASlowLimitIsSpentWhole(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit budget.Limit
		run   time.Duration
		want  int
	}{
		{budget.Limit{Count: 3, Per: time.Hour}, 3*time.Hour - time.Minute, 9},
		{budget.Limit{Count: 2, Per: 24 * time.Hour}, 72*time.Hour - time.Hour, 6},
		{budget.Limit{Count: 1, Per: 30 * 24 * time.Hour}, 60*24*time.Hour - 24*time.Hour, 2},
	} {
		synctest.Test(t, func(t *testing.T) {
			cfg := fast()
			cfg.Limits = []budget.Limit{c.limit}
			cfg.MaxWait = c.limit.Per
			p := newLocal(t, cfg)
			var log sendLogW
			ctx, cancel := context.WithTimeout(context.Background(), c.run)
			defer cancel()
			hammer(ctx, p, &log, 1, 1)
			if log.sent != c.want || log.most(c.limit.Per) > c.limit.Count {
				t.Errorf("%d per %v over %v: sent %d, at most %d in a window; want %d, at most %d",
					c.limit.Count, c.limit.Per, c.run, log.sent, log.most(c.limit.Per), c.want, c.limit.Count)
			}
		})
	}
}

// TestTheTransportSendsWeights: a request whose context carries a weight
// (WithCall) costs that much of a weighted limit through a Transport; one
// without costs 1. Every request through an http.Client cost 1: a host that
// declared a weight limit of 40 a second and called endpoints of weight 10
// sent 10 times what it declared.
func TestTheTransportSendsWeights(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	defer srv.Close()
	cfg := fast()
	cfg.Limits = []budget.Limit{{Count: 40, Per: time.Second, Weighted: true, Burst: 20}}
	cfg.MaxWait = 10 * time.Millisecond
	reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
	client := &http.Client{Transport: budget.NewTransport(reg, nil)}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	heavy := budget.WithCall(context.Background(), nil, budget.CallOption{Weight: 10})
	var errs []error
	for range 3 {
		errs = append(errs, get(heavy))
	}
	// The burst of 20 carries two calls of 10; the third waits past MaxWait.
	if errs[0] != nil || errs[1] != nil || !slices.ContainsFunc(errs[2:], func(err error) bool {
		var e *budget.Error
		return errors.As(err, &e) && e.Reason == forage.ReasonQuota
	}) || served.Load() != 2 {
		t.Fatalf("three requests of weight 10 against a burst of 20: %v, served %d; want two served and a quota stop", errs, served.Load())
	}
}

// TestAHangingRecordStoreHoldsNoCall: with a record store that hangs,
// calls against a known limit wait for it a second at most, every 30 s at
// most, and otherwise go at the limit's pace without it (the accounted
// times go with the next background save that gets through), a background
// save under way included. Each booking the record did not cover waited
// for the store, up to 10 s, and then for the background save's lock.
func TestAHangingRecordStoreHoldsNoCall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeRecords{block: make(chan struct{})}
		defer close(store.block)
		cfg := fast()
		cfg.Limits = []budget.Limit{{Count: 10, Per: time.Second}}
		cfg.Records = store
		p := newLocal(t, cfg)
		start := time.Now()
		longest := time.Duration(0)
		for i := range 400 {
			at := time.Now()
			if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			longest = max(longest, time.Since(at))
		}
		// 400 calls at 9/s: about 44 s, past the background saves (every
		// 5 s, each hanging 10 s) and the end of the quiet spell (30 s);
		// the store's second at the start and at the quiet spell's end.
		if took := time.Since(start); took > 47*time.Second || longest > 1200*time.Millisecond {
			t.Fatalf("400 calls at 10/s with a hanging record store took %v, the longest %v; want about 45 s, none over 1.2 s", took, longest)
		}
	})
}

// TestAHeavyCallGoesOnceTheLimitIsIdle: a call of weight 50 against 100 an
// hour (burst 10), after the provider was idle a day, goes at once; the
// next one is refused with an Until it is sent at. Each try was refused
// with an Until as far off as the last (its wait for the limit to be idle
// was counted from now), and the call never went.
func TestAHeavyCallGoesOnceTheLimitIsIdle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.MaxWait = time.Minute
		cfg.Limits = []budget.Limit{{Count: 100, Per: time.Hour, Weighted: true}}
		p := newLocal(t, cfg)
		time.Sleep(24 * time.Hour)
		sent := 0
		call := func() error {
			return p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
				sent++
				return forage.Outcome{Status: 200}
			}, budget.CallOption{Weight: 50})
		}
		if err := call(); err != nil || sent != 1 {
			t.Fatalf("after a day idle: Do = %v, sent %d; want sent at once", err, sent)
		}
		e := quotaStop(t, call())
		time.Sleep(time.Until(e.Until))
		if err := call(); err != nil || sent != 2 {
			t.Fatalf("at the Until of the stop: Do = %v, sent %d; want sent", err, sent)
		}
	})
}

// TestACrashLoopKeepsASlowLearnedPace: a provider learned at one request in
// 20 s (no known limit), its collector killed and restarted every 3 s for a
// minute, each start calling at once: the provider sees its learned pace
// (4 requests in the minute at most), not a request per start. With the
// restored wait capped at 2 s and nothing recording the pacer's slot, it
// saw 20.
func TestACrashLoopKeepsASlowLearnedPace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		if err := store.SaveRecord(context.Background(), forage.ProviderRecord{Key: "api", Rate: 0.05, Ceiling: 0.06, Confirmed: true, Throttled: 9, Updated: time.Now()}); err != nil {
			t.Fatal(err)
		}
		var log sendLogW
		start := time.Now()
		for time.Since(start) < time.Minute {
			view := &mortal{RecordStore: store}
			p, err := budget.NewLocal("api", budget.Config{Records: view})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_ = p.Do(ctx, nil, func(context.Context) forage.Outcome { log.add(1); return forage.Outcome{Status: 200} })
			<-ctx.Done()
			cancel()
			view.dead.Store(true)
		}
		if log.sent > 4 {
			t.Fatalf("learned at 3 a minute, restarted every 3 s for a minute: %d requests; want 4 at most", log.sent)
		}
	})
}

// TestABurstChangedBetweenRunsKeepsTheWindow: a run against 3 an hour with
// a burst of 1, then one with a burst of 2, a second later: at most 3 in
// any hour. Restored at the new burst's tolerance, the accounted time let 4
// through.
func TestABurstChangedBetweenRunsKeepsTheWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		var log sendLogW
		for _, burst := range []int{1, 2, 2} {
			cfg := fast()
			cfg.Limits = []budget.Limit{{Count: 3, Per: time.Hour, Burst: burst}}
			cfg.Records = store
			p := newLocal(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
			hammer(ctx, p, &log, 1, 1)
			cancel()
		}
		if got := log.most(time.Hour); got > 3 {
			t.Fatalf("runs at bursts 1, 2, 2: %d in an hour, want 3 at most", got)
		}
	})
}

// A Burst the host set is kept: 1 sends one interval apart even when the
// tightest known limit (3 a day) allows a burst of 2 (the default, zero, takes the
// limit's word and sends two at once). A host's 1 was read as the default
// and raised.
func TestABurstTheHostSetIsKept(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		burst int
		want  time.Duration // when the second call is sent
	}{{0, 0}, {1, 8 * time.Hour}} {
		synctest.Test(t, func(t *testing.T) {
			p := newLocal(t, budget.Config{Burst: c.burst, MaxWait: 24 * time.Hour,
				Limits: []budget.Limit{{Count: 3, Per: 24 * time.Hour, Burst: 2}}})
			start := time.Now()
			var sent []time.Duration
			for range 2 {
				err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
					sent = append(sent, time.Since(start))
					return forage.Outcome{Status: 200}
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if sent[1] < c.want || c.want == 0 && sent[1] > time.Second {
				t.Fatalf("Burst %d, a limit of 3 a day with a burst of 2: the second call sent after %v, want %v", c.burst, sent[1], c.want)
			}
		})
	}
}

// cronStart is one start of a cron host: a registry over records with
// cfg as its defaults, provider "api" called by one worker for 30 s, then
// shut down cleanly (its records saved).
func cronStart(t *testing.T, records budget.RecordStore, cfg budget.Config, log *sendLogW) {
	t.Helper()
	reg, err := budget.NewRegistry(budget.RegistryConfig{Records: records, Defaults: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = reg.Run(ctx); close(done) }()
	p, err := reg.Get("api")
	if err != nil {
		t.Fatal(err)
	}
	run, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	hammer(run, p, log, 1, 1)
	cancel()
	stop()
	<-done
}
