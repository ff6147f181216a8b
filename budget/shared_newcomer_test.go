package budget_test

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/checkpoint"
)

// countingRecords counts the saves of the record store it wraps.
type countingRecords struct {
	budget.RecordStore
	saves atomic.Int64
}

func (c *countingRecords) SaveRecord(ctx context.Context, r forage.ProviderRecord) error {
	c.saves.Add(1)
	return c.RecordStore.SaveRecord(ctx, r)
}

// TestASharedNewcomerWaitsTheRecordsTimeOnly: three processes share a
// known limit (Config.Shares), joining 30 s apart, its record kept in a
// store. A newcomer waits out the time the record holds the limit
// until, not that time over its share: carried as units of the whole
// limit into its share's slower limiter, the third to join a limit of 10
// per 10 s waited 58.5 s for its first request, not 27.4 s, and the
// three sent 131 in 3 minutes, not 142. The limit is never exceeded in
// any window, and the record is saved well under once a second per
// process.
func TestASharedNewcomerWaitsTheRecordsTimeOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lim       budget.Limit
		least     int           // sent in all, at least
		thirdWait time.Duration // the third's first request after it joined, at most
	}{
		{budget.Limit{Count: 10, Per: 10 * time.Second}, 138, 35 * time.Second},
		{budget.Limit{Count: 3, Per: time.Minute}, 3, 3 * time.Minute},
	} {
		lim := tc.lim
		synctest.Test(t, func(t *testing.T) {
			records := &countingRecords{RecordStore: checkpoint.NewMemoryStore(checkpoint.Config{})}
			shares := budgettest.NewShareStore()
			var logs [3]sendLogW
			start := time.Now()
			var wg sync.WaitGroup
			var first [3]time.Duration
			for i := range 3 {
				wg.Go(func() {
					time.Sleep(time.Duration(i) * 30 * time.Second)
					cfg := fast()
					cfg.Limits = []budget.Limit{lim}
					cfg.Shares = shares
					reg, err := budget.NewRegistry(budget.RegistryConfig{Records: records, Defaults: cfg})
					if err != nil {
						t.Error(err)
						return
					}
					ctx, stop := context.WithCancel(context.Background())
					done := make(chan struct{})
					go func() { _ = reg.Run(ctx); close(done) }()
					p, _ := reg.Get("api")
					run, cancel := context.WithDeadline(context.Background(), start.Add(3*time.Minute))
					joined := time.Now()
					hammer(run, p, &logs[i], 2, 1)
					cancel()
					logs[i].mu.Lock()
					if len(logs[i].at) > 0 {
						first[i] = logs[i].at[0].Sub(joined)
					}
					logs[i].mu.Unlock()
					stop()
					<-done
				})
			}
			wg.Wait()
			var all sendLogW
			for i := range logs {
				all.at = append(all.at, logs[i].at...)
				all.w = append(all.w, logs[i].w...)
				all.sent += logs[i].sent
			}
			order := make([]int, len(all.at)) // most reads the log in time order
			for i := range order {
				order[i] = i
			}
			sort.SliceStable(order, func(a, b int) bool { return all.at[order[a]].Before(all.at[order[b]]) })
			at, w := make([]time.Time, len(order)), make([]int, len(order))
			for i, j := range order {
				at[i], w[i] = all.at[j], all.w[j]
			}
			all.at, all.w = at, w
			if most := all.most(lim.Per); most > int(lim.Count) || all.sent < tc.least || first[2] > tc.thirdWait || records.saves.Load() > 180 {
				t.Errorf("limit %v per %v: sent %d (%d %d %d), %d in a window, first request after joining %v, %d saves in 180 s; want at least %d, at most %d in a window, the third's first within %v, at most one save a second",
					lim.Count, lim.Per, all.sent, logs[0].sent, logs[1].sent, logs[2].sent, most, first, records.saves.Load(), tc.least, lim.Count, tc.thirdWait)
			}
		})
	}
}
