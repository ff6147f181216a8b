package budget_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/checkpoint"
)

// TestASharedCronHostSpendsASlowLimitWhole is TestACronHostSpendsASlowLimitWhole
// with the provider shared (Config.Shares, as pgstore and examples/ohlcv
// set it): a host started every 5 minutes for 30 seconds, shut down
// cleanly each time, against a known limit of 3 per hour, its record and
// its shares kept in stores that outlive it, never sends 4 in an hour.
// A shared provider's limits were split by the shares and its record
// accounted for none of their bookings, and the share document keeps no
// trace of them: each start, alone and so holding the whole share, sent
// its first request at once (36 starts: 36 in 3 hours, 12 an hour;
// twelve one after another on PostgreSQL sent 12 in 18 s against 10 an
// hour). The record now accounts for them as for a provider not shared.
func TestASharedCronHostSpendsASlowLimitWhole(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var log sendLogW
		limit := budget.Limit{Count: 3, Per: time.Hour}
		records := checkpoint.NewMemoryStore(checkpoint.Config{})
		shares := budgettest.NewShareStore()
		for range 36 {
			cfg := fast()
			cfg.Limits = []budget.Limit{limit}
			cfg.Shares = shares
			cronStart(t, records, cfg, &log)
			time.Sleep(5*time.Minute - 30*time.Second)
		}
		if most := log.most(time.Hour); most > 3 {
			t.Fatalf("36 runs in 3 hours sent %d, %d in an hour; want at most 3 in any hour", log.sent, most)
		}
	})
}
