package budget_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
)

// TestPausedLearnerKeepsItsLease: a process whose calls a pause held back
// keeps its lease through the renewal due when the pause ends, which may
// come before its calls do (its worker, woken at the same instant or a
// little later, had not called yet). It gave the lease back, idle as it
// looked, and the learner of a provider (see Config.Shares) lost its place
// for good at the next renewal of another process: the processes then
// shared a provider that allows no burst by rate instead of taking turns
// (TestSharedBurstOneTakesTurns failed 1 run in 25 so).
func TestPausedLearnerKeepsItsLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := budget.Config{Shares: budgettest.NewShareStore(), MaxAttempts: 1}
		a, err := budget.NewLocal("sim", cfg)
		if err != nil {
			t.Fatal(err)
		}
		learner := a.Snapshot().Shares[0].Holder
		b, err := budget.NewLocal("sim", cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		wg.Go(func() { drive(ctx, b, 1, status(200, 0)) }) // b's calls wait for a share while a learns alone
		_ = a.Do(ctx, nil, status(429, time.Second))
		pu := a.Snapshot().PausedUntil
		if !pu.After(time.Now()) {
			t.Fatalf("a refused call left a paused until %v; want a pause", pu)
		}
		// a renews when the pause ends, before its worker comes back (a
		// little later); b renews meanwhile.
		time.Sleep(time.Until(pu) + 100*time.Millisecond)
		if sh := a.Snapshot(); sh.Share != 1 || len(sh.Shares) != 2 {
			t.Errorf("%v after the pause ended, before a's calls came back: a holds %v, leases %+v; want the whole, both leases",
				time.Since(pu), sh.Share, sh.Shares)
		}
		time.Sleep(100 * time.Millisecond)
		wg.Go(func() { drive(ctx, a, 1, status(200, 0)) })
		time.Sleep(2 * time.Second) // every holder renewed since
		for i, s := range b.Snapshot().Shares {
			if want := s.Holder == learner; (s.Share == 1) != want {
				t.Errorf("lease %d after the pause: %s holds %v; want the learner %s to hold the whole", i, s.Holder, s.Share, learner)
			}
		}
	})
}
