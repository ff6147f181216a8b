package budget_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// TestAnOperatorsStatusKeepsWhatTheCollectorsLearned: an admin process
// that calls nothing (no known limits configured, as an admin host has
// none of the collectors' settings) pauses and resumes a provider the
// collectors share through a record store. The record keeps what the
// collectors learned and booked: their rate, and a known limit's bookings
// (Spent), so the next collector to start still owes them. The admin's
// SetStatus saved its own provider's view instead: the rate clamped into
// its own [Min, Max] (10 an hour read back as 0.05/s, 180 an hour) and no
// Spent at all, so a collector started after a pause and a resume sent
// its burst again at once (on PostgreSQL: 2, 0, then 2 more within 5 s
// against 10 an hour, burst 2). Nor does the admin's provider, which sent
// nothing, write its view at exit.
func TestAnOperatorsStatusKeepsWhatTheCollectorsLearned(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		records := checkpoint.NewMemoryStore(checkpoint.Config{})
		limit := budget.Limit{Name: "known", Count: 10, Per: time.Hour, Burst: 2}
		collector := fast()
		collector.Limits = []budget.Limit{limit}
		creg, err := budget.NewRegistry(budget.RegistryConfig{Records: records, Defaults: collector})
		if err != nil {
			t.Fatal(err)
		}
		p, err := creg.Get("api")
		if err != nil {
			t.Fatal(err)
		}
		var log sendLogW
		run, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		hammer(run, p, &log, 1, 1)
		cancel()
		before, ok, err := records.LoadRecord(t.Context(), "api")
		if err != nil || !ok || len(before.Spent) == 0 {
			t.Fatalf("the collector's record: %+v, %v, %v; want its limit's bookings", before, ok, err)
		}

		admin, err := budget.NewRegistry(budget.RegistryConfig{Records: records}) // an admin host: none of the collectors' settings
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{budget.StatusPaused, budget.StatusActive} {
			if err := admin.SetStatus(t.Context(), "api", s, "maintenance"); err != nil {
				t.Fatal(err)
			}
		}
		stop, cancelAdmin := context.WithCancel(context.Background())
		cancelAdmin()
		_ = admin.Run(stop) // the admin process exits: it saves what changed, which is nothing it learned
		after, _, err := records.LoadRecord(t.Context(), "api")
		if err != nil {
			t.Fatal(err)
		}
		if after.Rate != before.Rate || after.Ceiling != before.Ceiling || len(after.Spent) != len(before.Spent) {
			t.Fatalf("after a pause and a resume by an admin process the record holds rate %v, ceiling %v, spent %v; the collectors left rate %v, ceiling %v, spent %v",
				after.Rate, after.Ceiling, after.Spent, before.Rate, before.Ceiling, before.Spent)
		}
	})
}
