package budget_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/providertest"
)

// flakyShares is a ShareStore that fails while down is set: the database
// gone.
type flakyShares struct {
	budget.ShareStore
	down  atomic.Bool
	hang  atomic.Bool // answers nothing until ctx ends: a network partition
	calls atomic.Int64
}

var errDown = errors.New("store down")

func (f *flakyShares) UpdateShares(ctx context.Context, key string, fn func([]byte) ([]byte, error)) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	if f.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.ShareStore.UpdateShares(ctx, key, fn)
}

// sharedRun drives n processes (one Local each, every one with its own
// workers) against srv through one share store, for d; stop[i], if
// closed, ends process i's workers early (a process that died).
type proc struct {
	p      budget.Provider
	cancel context.CancelFunc
	done   chan struct{}
}

func startProc(t *testing.T, key string, cfg budget.Config, srv *providertest.Server, workers int) *proc {
	t.Helper()
	p, err := budget.NewLocal(key, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr := &proc{p: p, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		drive(ctx, p, workers, simAttempt(srv.Client().Transport, nil))
	}()
	return pr
}

// startProcs starts n processes, each as startProc.
func startProcs(t *testing.T, n int, cfg budget.Config, srv *providertest.Server, workers int) []*proc {
	t.Helper()
	procs := make([]*proc, 0, n)
	for range n {
		procs = append(procs, startProc(t, "sim", cfg, srv, workers))
	}
	return procs
}

func (pr *proc) stop() { pr.cancel(); <-pr.done }

// stopAll stops every process of procs, one after the other.
func stopAll(procs []*proc) {
	for _, pr := range procs {
		pr.stop()
	}
}

// TestSharedProcessesStayUnderTheLimit runs three processes sharing one
// provider they are not told the limit of, through one share store: they
// find it together, serve most of it, draw few refusals, and their shares
// add up to the whole. When one dies, the others take its share within a
// lease.
func TestSharedProcessesStayUnderTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(providertest.Config{Seed: 3, Limit: providertest.Limit{Rate: 30, Burst: 5},
			Latency: 3 * time.Millisecond, Jitter: 3 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		store := budgettest.NewShareStore()
		cfg := budget.Config{Shares: store}
		procs := startProcs(t, 3, cfg, srv, 3)
		time.Sleep(30 * time.Second)
		st := srv.Stats()
		goodput := float64(st.OK) / (30 * 30)
		refused := float64(st.Throttled) / float64(max(st.Requests, 1))
		t.Logf("3 processes, 30 s: goodput %.1f%%, refused %.2f%% (%d of %d)", 100*goodput, 100*refused, st.Throttled, st.Requests)
		if goodput < 0.6 || refused > 0.025 {
			t.Errorf("goodput %.1f%%, refused %.2f%%; want >= 60%%, <= 2.5%%", 100*goodput, 100*refused)
		}
		sum := 0.0
		for _, pr := range procs {
			sum += pr.p.Snapshot().Share
		}
		if sum > 1+1e-9 || sum < 0.9 {
			t.Errorf("shares add up to %v; want (0.9, 1]", sum)
		}

		procs[0].stop() // dies: its lease ends 3 s after its last renewal
		time.Sleep(5 * time.Second)
		a, b := procs[1].p.Snapshot().Share, procs[2].p.Snapshot().Share
		if a+b < 0.9 || a+b > 1+1e-9 {
			t.Errorf("after one died the other two hold %v + %v; want about the whole", a, b)
		}
		if n := len(procs[1].p.Snapshot().Shares); n != 2 {
			t.Errorf("%d leases after one died; want 2: now %v: %v / %v / dead %v", n, time.Now(), procs[1].p.Snapshot().Shares, procs[2].p.Snapshot().Shares, procs[0].p.Snapshot().Shares)
		}
		procs[1].stop()
		procs[2].stop()
	})
}

// TestSharedKnownLimitNeverExceeded splits a known limit among four
// processes: the provider, which enforces exactly that limit in fixed
// windows, never refuses one request, and they use most of it.
func TestSharedKnownLimitNeverExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(providertest.Config{Seed: 5, Limit: providertest.Limit{Count: 100, Window: 10 * time.Second},
			Latency: 3 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		store := budgettest.NewShareStore()
		cfg := budget.Config{Shares: store, Limits: []budget.Limit{{Count: 100, Per: 10 * time.Second}}}
		procs := startProcs(t, 4, cfg, srv, 2)
		time.Sleep(60 * time.Second)
		stopAll(procs)
		st := srv.Stats()
		t.Logf("4 processes, known limit 100/10s, 60 s: %d served, %d refused", st.OK, st.Throttled)
		if st.Throttled != 0 {
			t.Errorf("%d refused; want none: the known limit is split, never exceeded", st.Throttled)
		}
		if st.OK < 400 {
			t.Errorf("%d served in 60 s of a 100/10s limit; want at least 400", st.OK)
		}
	})
}

// twoOnAFlakyStore starts two processes of two workers sharing a provider
// with limit through a store that can fail or hang.
func twoOnAFlakyStore(t *testing.T, limit providertest.Limit) (*providertest.Server, *flakyShares, *proc, *proc) {
	t.Helper()
	srv, err := providertest.New(providertest.Config{Seed: 9, Limit: limit,
		Latency: 3 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
	if err != nil {
		t.Fatal(err)
	}
	store := &flakyShares{ShareStore: budgettest.NewShareStore()}
	cfg := budget.Config{Shares: store}
	return srv, store, startProc(t, "sim", cfg, srv, 2), startProc(t, "sim", cfg, srv, 2)
}

// TestSharesSurviveAStoreOutage takes the store away: each process keeps
// its share until its lease ends, then paces at half of it (never more than
// its last share), and takes its full share again once the store is back.
// (It starts 15 s in: the first process learns the provider alone for up
// to 10 s.)
func TestSharesSurviveAStoreOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, store, a, b := twoOnAFlakyStore(t, providertest.Limit{Rate: 20, Burst: 1})
		time.Sleep(15 * time.Second)
		before := a.p.Snapshot().Share
		store.down.Store(true)
		time.Sleep(5 * time.Second)
		during := a.p.Snapshot().Share
		if during > before/2+1e-9 {
			t.Errorf("share %v during the outage; want at most half of %v", during, before)
		}
		store.down.Store(false)
		time.Sleep(3 * time.Second)
		after := a.p.Snapshot().Share
		if math.Abs(after-before) > 0.2 {
			t.Errorf("share %v after the outage; want about %v again", after, before)
		}
		a.stop()
		b.stop()
	})
}

// TestSharedKnownLimitSurvivesAnOutage: three processes split a known
// limit, which the provider enforces exactly, and the store goes away for
// 4 s mid-run. Each lease ends in the outage and its holder drops to its
// safe share; when the store comes back, the first process to renew is not
// granted what the others still pace at (it was, and a window counted one
// request over: 1 run in 4), and the safe share holds for the known limits
// as for the pacer (they stayed at the last share). No request is refused.
func TestSharedKnownLimitSurvivesAnOutage(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, err := providertest.New(providertest.Config{Seed: seed, Limit: providertest.Limit{Count: 60, Window: 2 * time.Second},
					Latency: 3 * time.Millisecond, Jitter: 2 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
				if err != nil {
					t.Fatal(err)
				}
				store := &flakyShares{ShareStore: budgettest.NewShareStore()}
				cfg := budget.Config{Shares: store, MaxInFlight: 2,
					Limits: []budget.Limit{{Count: 60, Per: 2 * time.Second, Burst: 3}}}
				procs := startProcs(t, 3, cfg, srv, 2)
				time.Sleep(3 * time.Second)
				store.down.Store(true)
				time.Sleep(4 * time.Second)
				store.down.Store(false)
				time.Sleep(5 * time.Second)
				stopAll(procs)
				st := srv.Stats()
				t.Logf("%d served, %d refused", st.OK, st.Throttled)
				if st.Throttled != 0 {
					t.Errorf("%d of %d refused; want none: the known limit is never exceeded", st.Throttled, st.Requests)
				}
				if st.OK < 150 {
					t.Errorf("%d served in 12 s of a 60/2s limit; want at least 150", st.OK)
				}
			})
		})
	}
}

// TestShareRenewalsPerSecond counts the store's round trips: about one a
// second per process, however fast the provider is.
func TestShareRenewalsPerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(providertest.Config{Seed: 1, Limit: providertest.Limit{Rate: 200, Burst: 1},
			Latency: 2 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		store := &flakyShares{ShareStore: budgettest.NewShareStore()}
		procs := startProcs(t, 2, budget.Config{Shares: store}, srv, 8)
		time.Sleep(20 * time.Second)
		var wg sync.WaitGroup
		for _, pr := range procs {
			wg.Go(pr.stop)
		}
		wg.Wait()
		perProc := float64(store.calls.Load()) / 2 / 20
		t.Logf("%.2f renewals per process per second, %d requests", perProc, srv.Stats().Requests)
		if perProc > 5 {
			t.Errorf("%.2f store round trips per process per second; want <= 5", perProc)
		}
	})
}

// TestSharedFixedWindowIsSpentWhole: four processes share a provider with a
// fixed window they are not told (200 per 10 s, 429 with Retry-After until
// the window ends). Each sees a quarter of the successes; the rate each
// learns from a spent window is the provider's, not its quarter (a process
// read its own quarter as the whole and paced the four at a quarter of the
// window: 42% of it with 8 OS processes).
func TestSharedFixedWindowIsSpentWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(providertest.Config{Seed: 4, Limit: providertest.Limit{Count: 200, Window: 10 * time.Second},
			Latency: 3 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		store := budgettest.NewShareStore()
		procs := startProcs(t, 4, budget.Config{Shares: store}, srv, 2)
		time.Sleep(60 * time.Second)
		stopAll(procs)
		st := srv.Stats()
		goodput := float64(st.OK) / (200 * 6)
		t.Logf("4 processes, fixed window 200/10s, 60 s: goodput %.1f%%, %d refused of %d", 100*goodput, st.Throttled, st.Requests)
		if goodput < 0.8 {
			t.Errorf("goodput %.1f%% of a fixed window shared by four; want >= 80%%", 100*goodput)
		}
	})
}

// unwatched hides a store's WatchShares: the processes hear of each other
// at their renewals only.
type unwatched struct{ budget.ShareStore }

// eightSharing starts eight processes, one worker each, that share a
// provider served as cfg says (its symbol set here) through a memory
// store, watched (budget.ShareWatcher) or not.
func eightSharing(t *testing.T, cfg providertest.Config, watch bool) (*providertest.Server, []*proc) {
	t.Helper()
	cfg.Symbols = []providertest.Symbol{{Name: "BTCUSDT"}}
	srv, err := providertest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var store budget.ShareStore = budgettest.NewShareStore()
	if !watch {
		store = unwatched{store}
	}
	procs := startProcs(t, 8, budget.Config{Shares: store}, srv, 1)
	return srv, procs
}

// TestSharedPauseReachesEveryProcessAtOnce: eight processes share a fixed
// window they are not told (200 per 10 s, 429 with Retry-After until it
// ends). Through a store that delivers each saved document to the others
// (budget.ShareWatcher), the pause the first refusal brings reaches them
// within milliseconds, not at their next renewal, and after a long pause
// they resume apart, not in step: a spent window costs about one refusal,
// not one per process. Over sixteen runs, the windows after the first (the
// climb's) draw at most 110 refusals in all: 37-90 in 12 tries, against
// 160-242 without the watch.
func TestSharedPauseReachesEveryProcessAtOnce(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprint("watched=", watch), func(t *testing.T) {
			var later, ok int64
			for seed := range uint64(16) {
				synctest.Test(t, func(t *testing.T) {
					srv, procs := eightSharing(t, providertest.Config{Seed: seed, Limit: providertest.Limit{Count: 200, Window: 10 * time.Second},
						Latency: 3 * time.Millisecond, Jitter: 2 * time.Millisecond}, watch)
					time.Sleep(10 * time.Second) // the first window: the climb
					first := srv.Stats().Throttled
					time.Sleep(50 * time.Second)
					stopAll(procs)
					st := srv.Stats()
					later += int64(st.Throttled - first)
					ok += int64(st.OK)
				})
			}
			goodput := float64(ok) / (16 * 200 * 6)
			t.Logf("watched %v: 8 processes, fixed window 200/10s, 16 runs of 60 s: goodput %.1f%%, %d refused in the 5 windows after the first",
				watch, 100*goodput, later)
			if watch && (later > 110 || goodput < 0.9) {
				t.Errorf("goodput %.1f%%, %d refused in the windows after the first; want >= 90%% and at most 110", 100*goodput, later)
			}
		})
	}
}

// TestSharesSurviveAHungStore: a store that answers nothing (a network
// partition: each renewal waits for its timeout) does not hold calls up;
// they go on at the safe share, as when the store fails at once.
func TestSharesSurviveAHungStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, store, a, b := twoOnAFlakyStore(t, providertest.Limit{Rate: 20, Burst: 5})
		time.Sleep(10 * time.Second)
		store.hang.Store(true)
		time.Sleep(5 * time.Second) // the leases end, the shares drop to the safe share
		before := srv.Stats().OK
		time.Sleep(10 * time.Second)
		served := float64(srv.Stats().OK-before) / (10 * 20)
		store.hang.Store(false)
		a.stop()
		b.stop()
		time.Sleep(5 * time.Second) // the renewals under way end
		if served < 0.3 {
			t.Errorf("%.0f%% of the limit served while the store hung; want the safe shares' (about half)", 100*served)
		}
	})
}

// TestSharedProviderLearnedByOne: the first process to call a provider
// nobody has learned yet learns it alone, at the whole rate, while the
// others wait, and then they take their shares of what it learned. Three
// processes sharing a provider with a burst allowance each saw a share of
// the answers, so together they walked down from slow start's overshoot a
// tenth per refusal (6-7 refusals in the first 10 s, 75% of the limit over
// 30 s on four seeds, 0.6% refused); learned by one, as one process finds
// it (the held episodes, the bucket fit), it is served at 84% with half
// the refusals.
func TestSharedProviderLearnedByOne(t *testing.T) {
	var goodput, refused float64
	const seeds = 4
	for seed := range seeds {
		synctest.Test(t, func(t *testing.T) {
			srv, err := providertest.New(providertest.Config{Seed: uint64(1 + seed), Limit: providertest.Limit{Rate: 50, Burst: 10},
				Latency: 4 * time.Millisecond, Jitter: 4 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
			if err != nil {
				t.Fatal(err)
			}
			cfg := budget.Config{Shares: budgettest.NewShareStore()}
			procs := startProcs(t, 3, cfg, srv, 1)
			time.Sleep(30 * time.Second)
			var shares []float64
			for _, pr := range procs {
				shares = append(shares, pr.p.Snapshot().Share)
			}
			st := srv.Stats()
			stopAll(procs)
			g, r := float64(st.OK)/(30*50), float64(st.Throttled)/float64(max(st.Requests, 1))
			goodput, refused = goodput+g/seeds, refused+r/seeds
			t.Logf("seed %d: goodput %.1f%%, refused %.2f%% (%d of %d); shares %v", 1+seed, 100*g, 100*r, st.Throttled, st.Requests, shares)
			for i, sh := range shares {
				if sh < 0.2 || sh > 0.5 {
					t.Errorf("process %d holds %v after learning; want about a third", i, sh)
				}
			}
		})
	}
	t.Logf("3 processes, 30 s, %d seeds: goodput %.1f%%, refused %.2f%%", seeds, 100*goodput, 100*refused)
	// When the learner drew four refusals or more (echoes included), the
	// processes hold under the refused rate for the rest of that minute,
	// as a provider that may ban needs (see TestSharedProcessesAreNeverBanned):
	// 79.7-86.1% over 60 runs, 82-86% before they did.
	if goodput < 0.76 || refused > 0.004 {
		t.Errorf("goodput %.1f%%, refused %.2f%%; want >= 76%%, <= 0.4%%", 100*goodput, 100*refused)
	}
}

// TestSharedBurstOneTakesTurns: processes that share a provider allowing
// no burst at all collide whenever two of them send within one interval,
// whatever their rates add up to; paced at shares with random phases, three
// of them served 15% of the limit with 17% refused. Once they see that
// many refusals they take turns, and serve most of the limit; in turns,
// the provider is served as by one process (a guard of two intervals at
// the plan's rate, and a climb started afresh at each change of hands,
// held turns at 82% of it); none of them is left waiting for a share (a
// process whose renewal found it idle once waited at the gate for good, 1
// run in 400).
func TestSharedBurstOneTakesTurns(t *testing.T) {
	for _, n := range []int{3, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, err := providertest.New(providertest.Config{Seed: 3, Limit: providertest.Limit{Rate: 17, Burst: 1},
					Latency: 4 * time.Millisecond, Jitter: 4 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
				if err != nil {
					t.Fatal(err)
				}
				var logs syncBuffer
				cfg := budget.Config{Shares: budgettest.NewShareStore(),
					Logger: slog.New(slog.NewTextHandler(&logs, nil))}
				procs := startProcs(t, n, cfg, srv, 1)
				time.Sleep(10 * time.Second)
				var before []uint64
				for _, pr := range procs {
					before = append(before, pr.p.Snapshot().OK)
				}
				mid := srv.Stats()
				time.Sleep(20 * time.Second) // more than a cycle of turns: 8 windows of 2 s
				for i, pr := range procs {
					if pr.p.Snapshot().OK == before[i] {
						t.Errorf("process %d had no success in the last 20 s: stuck (share %v)", i, pr.p.Snapshot().Share)
					}
				}
				if until := procs[0].p.Snapshot().TurnsUntil; !until.After(time.Now()) {
					t.Errorf("Snapshot().TurnsUntil = %v; want the end of the turns in force", until)
				}
				if !strings.Contains(logs.String(), "they take turns") {
					t.Errorf("no event says the processes take turns:\n%s", logs.String())
				}
				st := srv.Stats()
				stopAll(procs)
				goodput := float64(st.OK) / (30 * 17)
				refused := float64(st.Throttled) / float64(max(st.Requests, 1))
				late := float64(st.OK-mid.OK) / (20 * 17)
				t.Logf("%d processes, 30 s: goodput %.1f%% (the last 20 s, in turns: %.1f%%), refused %.2f%% (%d of %d)",
					n, 100*goodput, 100*late, 100*refused, st.Throttled, st.Requests)
				if goodput < 0.76 || late < 0.87 || refused > 0.025 {
					t.Errorf("goodput %.1f%% (the last 20 s: %.1f%%), refused %.2f%%; want >= 76%% (87%%), <= 2.5%%", 100*goodput, 100*late, 100*refused)
				}
			})
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of several
// providers' loggers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// slowSaves is a share store whose renewals, while slow is set, return
// 300 ms after they saved: a renewal that read the document just before
// another process announced news.
type slowSaves struct {
	budget.ShareWatcher
	slow  atomic.Bool
	saves atomic.Int64
}

func (s *slowSaves) UpdateShares(ctx context.Context, key string, f func([]byte) ([]byte, error)) error {
	err := s.ShareWatcher.UpdateShares(ctx, key, f)
	s.saves.Add(1)
	if s.slow.Load() {
		time.Sleep(300 * time.Millisecond)
	}
	return err
}

// TestAnnouncedCutDuringARenewal: a cut announced while this process's
// renewal is under way, having read the document before the cut, is taken
// in by a renewal soon after that one ends (within a few hundred
// milliseconds), not at the next renewal due a second later. (The renewal
// the announcement asked for was dropped: one was under way.)
func TestAnnouncedCutDuringARenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &slowSaves{ShareWatcher: budgettest.NewShareStore()}
		p, err := budget.NewLocal("sim", budget.Config{Shares: store})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			drive(ctx, p, 2, func(context.Context) forage.Outcome {
				time.Sleep(5 * time.Millisecond)
				return forage.Outcome{Status: 200}
			})
		}()
		time.Sleep(5 * time.Second) // the climb; renewals every second
		rate := p.Snapshot().Rate
		store.slow.Store(true)
		for n := store.saves.Load(); store.saves.Load() == n; {
			time.Sleep(time.Millisecond) // until a renewal has saved and is slow to return
		}
		store.slow.Store(false)
		// Another process cuts the provider's rate to a quarter, and
		// announces it.
		var doc []byte
		err = store.ShareWatcher.UpdateShares(ctx, "sim", func(old []byte) ([]byte, error) {
			var m map[string]any
			if err := json.Unmarshal(old, &m); err != nil {
				return nil, err
			}
			m["epoch"] = m["epoch"].(float64) + 1
			m["rate"] = rate / 4
			m["ceiling"] = rate / 4
			doc, err = json.Marshal(m)
			return doc, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.AnnounceShares(ctx, "sim", doc); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
		got := p.Snapshot().Rate
		cancel()
		<-done
		if got > rate/2 {
			t.Errorf("700 ms after a cut to %.1f/s was announced the rate is %.1f/s (was %.1f/s); want the cut taken in", rate/4, got, rate)
		}
	})
}

// TestWatchedTurnsStartSooner: eight processes share a 17/s provider that
// allows no burst, each one worker. Through a store that announces news
// (budget.ShareWatcher), the turns the collisions start are planned 0.45 s
// ahead instead of 1.5 s, every holder hearing of the plan at once: over
// four runs of 30 s, at most 3.5% of the requests are refused (about 2.7%;
// 4.7% through a store without the watch, where the plan must wait for
// every holder's next renewal).
func TestWatchedTurnsStartSooner(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprint("watched=", watch), func(t *testing.T) {
			var requests, refused int64
			for seed := range uint64(4) {
				synctest.Test(t, func(t *testing.T) {
					srv, procs := eightSharing(t, providertest.Config{Seed: seed, Limit: providertest.Limit{Rate: 17, Burst: 1},
						Latency: 4 * time.Millisecond, Jitter: 4 * time.Millisecond}, watch)
					time.Sleep(30 * time.Second)
					stopAll(procs)
					st := srv.Stats()
					requests += int64(st.Requests)
					refused += int64(st.Throttled)
				})
			}
			share := float64(refused) / float64(max(requests, 1))
			t.Logf("watched %v: 8 processes, 17/s burst 1, 4 runs of 30 s: %d refused of %d (%.2f%%)", watch, refused, requests, 100*share)
			if watch && share > 0.035 {
				t.Errorf("%.2f%% refused; want at most 3.5%%", 100*share)
			}
		})
	}
}

// TestValidationTakesNoLease: validating a Config (NewLocal, NewRegistry)
// makes no renewal of its own: the provider's one renewal at its start is
// the only call to the store. (The validation's probe provider renewed too,
// under the empty key, and retried once in the background.)
func TestValidationTakesNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakyShares{ShareStore: budgettest.NewShareStore()}
		if _, err := budget.NewLocal("api.example.com", budget.Config{Shares: store}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // past the probe's retry (250 ms), before the provider's next renewal (1 s)
		if n := store.calls.Load(); n != 1 {
			t.Errorf("%d calls to the store in the 500 ms after NewLocal; want 1 (the provider's own renewal)", n)
		}
	})
}

// TestSharedProcessesAreNeverBanned: a provider that bans after five
// refusals a minute counts every process's. Eight processes sharing it (4
// workers each, 10-40 ms away) each counted only their own against the
// refusal budget: the learner spent three or four of the first minute's
// five, and the others, which knew of none, climbed past the ceiling and
// drew the fifth (banned in 19 of 32 runs of these; four examples/ohlcv
// processes on PostgreSQL, 20-80 ms away, in 7 of 7). Now the refusals of
// the last minute are the provider's: kept in the shared document,
// restored into every controller, and at the fourth a process's ceiling
// drops under the refused rate and its rate under the refusal cap. After a
// pause the holders resume one interval apart, at the rate the cut set,
// rather than in the same instant (seven refusals at once, one per holder,
// at a provider that allows no burst).
func TestSharedProcessesAreNeverBanned(t *testing.T) {
	var runs, banned int
	var early []string
	for _, limit := range []providertest.Limit{providertest.Limit{Rate: 20, Burst: 5}, providertest.Limit{Rate: 15, Burst: 1}} {
		for seed := range uint64(16) {
			synctest.Test(t, func(t *testing.T) {
				srv, err := providertest.New(providertest.Config{Seed: seed, Limit: limit, Answer: providertest.Answer{BanAfter: 5},
					Latency: 10 * time.Millisecond, Jitter: 30 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
				if err != nil {
					t.Fatal(err)
				}
				procs := startProcs(t, 8, budget.Config{Shares: budgettest.NewShareStore()}, srv, 4)
				time.Sleep(10 * time.Second)
				first := srv.Stats().Bans
				time.Sleep(50 * time.Second)
				stopAll(procs)
				st := srv.Stats()
				runs++
				if st.Bans == 0 {
					return
				}
				banned++
				run := fmt.Sprintf("%v/s burst %d, seed %d: %d refused, %d bans", limit.Rate, limit.Burst, seed, st.Throttled, st.Bans)
				if first == 0 || limit.Burst < 2 {
					t.Errorf("%s, after the first 10 s; want never", run)
				}
				early = append(early, run)
			})
		}
	}
	t.Logf("8 processes sharing a provider that bans, %d runs of 60 s: banned in %d", runs, banned)
	// One process's slow start, before anything is shared, may draw the
	// five by itself with several requests in flight (see aimd's known
	// limits): once in a few hundred runs here.
	if len(early) > 1 {
		t.Errorf("banned in the first 10 s in %d runs: %v; want at most one", len(early), early)
	}
}
