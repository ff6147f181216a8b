package schedule_test

import (
	"context"
	"testing"
	"time"

	"github.com/forage-go/forage/schedule"
)

// A scheduler that stalls past its lease and wakes to renew it: the lease
// had ended, and another scheduler had meanwhile been given the stream (its
// gap fill). The renewal revived the ended lease, and two jobs of one
// stream ran at once. A lease that ended is lost.
func TestARenewalAfterTheLeaseEndedIsALoss(t *testing.T) {
	ctx := context.Background()
	store := schedule.NewMemoryJobStore()
	cfg := schedule.Config{LeaseTTL: time.Minute, Poll: time.Second, MaxRunning: 1}
	a, _ := schedule.New(cfg, store, idle)
	b, _ := schedule.New(cfg, store, idle)
	upsert(t, a, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s", Interval: time.Hour})
	upsert(t, a, t0, schedule.Spec{Provider: "p", Kind: schedule.KindGapFill, Stream: "s", NextRun: t0.Add(90 * time.Second)})
	if got := claim(t, a, t0); len(got) != 1 {
		t.Fatal(got)
	}
	if got := claim(t, b, t0.Add(2*time.Minute)); len(got) != 1 || got[0].Kind != schedule.KindGapFill {
		t.Fatalf("the second scheduler claimed %+v, want the stream's gap fill", got)
	}
	now := t0.Add(2*time.Minute + 5*time.Second)
	if err := a.RenewAt(ctx, now); err != nil {
		t.Fatal(err)
	}
	jobs, _ := store.List(ctx, schedule.Query{Stream: "s"})
	n := 0
	for _, j := range jobs {
		if j.Lease.Owner != "" && j.Lease.Until.After(now) {
			n++
		}
	}
	if n > 1 {
		t.Fatalf("%d jobs of stream s under live leases after the stalled scheduler's late RenewAt; want 1", n)
	}
}

// Two schedulers given one Config.Owner (a host's name, as the docs
// allow) handed out the same lease owners ("collector/1"): a stalled
// one's late finish passed the owner check of the job the other had
// rescued, and marked it done while it still ran.
func TestSchedulersGivenOneOwnerHoldDistinctLeases(t *testing.T) {
	ctx := context.Background()
	store := schedule.NewMemoryJobStore()
	cfg := schedule.Config{LeaseTTL: time.Minute, Poll: time.Second, Owner: "collector"}
	a, _ := schedule.New(cfg, store, idle)
	b, _ := schedule.New(cfg, store, idle)
	upsert(t, a, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
	ga := claim(t, a, t0)
	gb := claim(t, b, t0.Add(2*time.Minute))
	if len(ga) != 1 || len(gb) != 1 {
		t.Fatalf("claims: %v, %v", ga, gb)
	}
	if _, err := a.FinishAt(ctx, t0.Add(2*time.Minute+time.Second), ga[0], schedule.Result{Done: true}, nil); err != nil {
		t.Fatal(err)
	}
	cur, _ := store.Get(ctx, ga[0].ID)
	if cur.State != schedule.StateRunning || cur.Lease.Owner != gb[0].Lease.Owner {
		t.Fatalf("the stale finish left the job %s under %q (the rescuer holds %q); want running under the rescuer", cur.State, cur.Lease.Owner, gb[0].Lease.Owner)
	}
}
