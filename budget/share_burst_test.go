package budget_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"pgregory.net/rapid"
)

// shareSmallBurst starts n processes of two workers each (see startSharer)
// sharing a provider whose one known limit is l through one store, and
// stops them after d. Their work comes as demand says: "steady" (always),
// "spells" (every process idle for the second third of d, and back all at
// once, as a scheduler's jobs do), "moving" (one at a time idle, for 2 s
// of every 3, so the shares move by demand) or "kill" (all but the first
// killed halfway: their leases end with their time). It returns the log of
// every attempt.
func shareSmallBurst(tb tb, n int, l budget.Limit, d time.Duration, demand string) *sendLog {
	tb.Helper()
	return shareSmallBurstCfg(tb, n, budget.Config{Limits: []budget.Limit{l}}, d, demand)
}

// shareSmallBurstCfg is shareSmallBurst with the processes' Config.
func shareSmallBurstCfg(tb tb, n int, cfg budget.Config, d time.Duration, demand string) *sendLog {
	tb.Helper()
	store := budgettest.NewShareStore()
	log := &sendLog{}
	procs := make([]*shareProc, n)
	for i := range procs {
		procs[i] = startSharer(tb, cfg, store, log)
	}
	setIdle := func(idle bool) {
		for _, p := range procs {
			p.idle.Store(idle)
		}
	}
	switch demand {
	case "spells":
		time.Sleep(d / 3)
		setIdle(true)
		time.Sleep(d / 3)
		setIdle(false)
		time.Sleep(d - 2*(d/3))
	case "kill":
		time.Sleep(d / 2)
		for _, p := range procs[1:] {
			p.store.dead.Store(true)
			p.cancel()
		}
		time.Sleep(d - d/2)
	case "moving":
		for end, i := time.Now().Add(d), 0; time.Now().Before(end); i++ {
			procs[i%n].idle.Store(true)
			time.Sleep(2 * time.Second)
			procs[i%n].idle.Store(false)
			time.Sleep(time.Second)
		}
	default:
		time.Sleep(d)
	}
	for _, p := range procs {
		p.cancel()
		<-p.done
	}
	return log
}

// TestASharedKnownLimitHoldsWithMoreProcessesThanBurst: a known limit
// whose Burst is smaller than the number of processes sharing it (1 per
// second shared by 3 workers' processes, or 2 per second by 8) is never
// exceeded in any window of its Per. Each process paced its share of the
// rate with at least one unit of burst, so together they could send one
// unit each at once: 3 units in a second against 1 or 2 per second, 7
// against 2 or 4, 31 against 30 (see slotAt). Slotted, they still send
// most of the limit's pace over the minute, learning included: 88-98%
// (98-104% before, over the limit).
func TestASharedKnownLimitHoldsWithMoreProcessesThanBurst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n     int
		count int
		burst int
	}{
		{3, 1, 1}, {3, 2, 1}, {3, 5, 2}, {8, 2, 1}, {8, 4, 2}, {8, 10, 2}, {3, 30, 1},
	} {
		t.Run(fmt.Sprintf("n%d_count%d_burst%d", c.n, c.count, c.burst), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := budget.Limit{Count: c.count, Per: time.Second, Burst: c.burst}
				log := shareSmallBurst(t, c.n, l, 60*time.Second, "steady")
				most, all := log.worst(time.Second)
				pace := budget.LimitRate(l) * 60
				t.Logf("%d processes, %d/s burst %d: %d sent in 60 s (%.0f%% of the limit's pace, %.0f), at most %d in a second",
					c.n, c.count, c.burst, all, 100*float64(all)/pace, pace, most)
				if most > c.count {
					t.Errorf("%d processes, %d/s burst %d: %d units in a second; want at most %d", c.n, c.count, c.burst, most, c.count)
				}
				if float64(all) < 0.8*pace {
					t.Errorf("%d processes, %d/s burst %d: %d sent in 60 s; want at least %.0f (80%% of the limit's pace)", c.n, c.count, c.burst, all, 0.8*pace)
				}
			})
		})
	}
}

// TestPropertyASharedKnownLimitHoldsWithAnyBurst: however many processes
// share a known limit, whatever its count, window and burst (Burst under
// the number of processes too), and however their work comes (see
// shareSmallBurst), no window of the limit's Per holds more than its Count.
func TestPropertyASharedKnownLimitHoldsWithAnyBurst(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 9).Draw(rt, "processes")
		count := rapid.IntRange(1, 40).Draw(rt, "count")
		per := rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, 10 * time.Second}).Draw(rt, "per")
		burst := rapid.IntRange(1, max(1, min(count-1, n+1))).Draw(rt, "burst")
		demand := rapid.SampledFrom([]string{"steady", "spells", "moving", "kill"}).Draw(rt, "demand")
		rapid.SyncTest(rt, func(rt *rapid.T) {
			l := budget.Limit{Count: count, Per: per, Burst: burst}
			log := shareSmallBurst(rt, n, l, 30*time.Second, demand)
			if most := log.most(per); most > count {
				rt.Fatalf("%d processes, %d per %v, burst %d, %s: %d units in a window; want at most %d", n, count, per, burst, demand, most, count)
			}
		})
	})
}
