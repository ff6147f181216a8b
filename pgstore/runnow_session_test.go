package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/schedule"
)

// operator returns a scheduler on js that never runs anything: the one
// behind an admin page, which only reads and changes jobs.
func operator(t *testing.T, js schedule.JobStore) *schedule.Scheduler {
	t.Helper()
	idle := schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) {
		return schedule.Result{}, nil
	})
	sched, err := schedule.New(schedule.Config{}, js, idle)
	if err != nil {
		t.Fatal(err)
	}
	return sched
}

// running returns how many jobs of each provider sched's snapshot counts
// as running (under a live lease).
func running(t *testing.T, sched *schedule.Scheduler) map[string]int {
	t.Helper()
	snap, err := sched.SnapshotPage(t.Context(), time.Now(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range snap.Providers {
		out[p.Provider] = p.Running
	}
	return out
}

// TestRunNowOnADeadHoldersJob: a job runs under a lease of another
// process's store (an hour long). While that process lives, an operator's
// RunNow, from a third process, answers ErrRunning. Once the holder's
// session has ended (its store closed, as a killed process's does), RunNow
// queues the job at once (and a snapshot no longer counts it as
// running even before), and the next claim anywhere takes it over
// (TakenFrom naming the dead holder), as a claim takes over a dead
// holder's lease. A holder without a session (Config.NoLeaseSession) keeps
// its job running until its lease expires, dead or not. RunNow leaves the
// dead lease tied to the dead session, not to the operator's. (Regression:
// RunNow answered ErrRunning until the dead holder's lease expired,
// LeaseTTL later, while the claim had taken the job over at once.)
func TestRunNowOnADeadHoldersJob(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	now := time.Now()
	j := addJob(t, s.Jobs(), "p", "s", schedule.KindIncremental, now.Add(-time.Minute))
	k := addJob(t, s.Jobs(), "q", "s", schedule.KindIncremental, now.Add(-time.Minute))
	dead := jobHolder(t, s, pgstore.Config{})
	if got := claimed(t, dead.Jobs(), now, "dead", schedule.ClaimFilter{Skip: []string{"q"}}); len(got) != 1 {
		t.Fatalf("the holder's claim took %v, want job %d", jobIDs(got...), j.ID)
	}
	sessionless := jobHolder(t, s, pgstore.Config{NoLeaseSession: true})
	if got := claimed(t, sessionless.Jobs(), now, "sessionless", schedule.ClaimFilter{}); len(got) != 1 {
		t.Fatalf("the sessionless holder's claim took %v, want job %d", jobIDs(got...), k.ID)
	}
	op := operator(t, s.Jobs())
	if r := running(t, op); r["p"] != 1 || r["q"] != 1 {
		t.Fatalf("snapshot while both holders live: running %v, want p 1, q 1", r)
	}
	for _, id := range []int64{j.ID, k.ID} {
		if _, err := op.RunNow(ctx, id); !errors.Is(err, schedule.ErrRunning) {
			t.Fatalf("RunNow of job %d while its holder lives: %v, want ErrRunning", id, err)
		}
	}

	key := leaseSession(t, s, j.ID)
	dead.Close() // the last store on its pool: its session ends
	sessionless.Close()
	waitSessionEnded(t, s, key)
	if _, err := op.RunNow(ctx, k.ID); !errors.Is(err, schedule.ErrRunning) {
		t.Fatalf("RunNow of the sessionless holder's job: %v, want ErrRunning until its lease expires", err)
	}
	if r := running(t, op); r["p"] != 0 || r["q"] != 1 {
		t.Fatalf("snapshot after the holder died: running %v, want p 0 (its lease ended), q 1", r)
	}
	at := time.Now()
	got, err := op.RunNow(ctx, j.ID)
	if err != nil {
		t.Fatalf("RunNow after the holder died: %v, want the job queued", err)
	}
	if got.State != schedule.StateQueued || got.NextRun.Before(at.Add(-time.Millisecond)) || got.Lease.Until.After(at) {
		t.Fatalf("RunNow after the holder died stored state %s, next run %v, lease %+v; want queued, due now (%v), the lease ended",
			got.State, got.NextRun, got.Lease, at)
	}
	if k := leaseSession(t, s, j.ID); k != key {
		t.Fatalf("RunNow tied the dead holder's lease to session %d, want it left on the dead one (%d)", k, key)
	}
	taken := claimed(t, s.Jobs(), time.Now(), "rescuer", schedule.ClaimFilter{Skip: []string{"q"}})
	if len(taken) != 1 || taken[0].ID != j.ID || taken[0].Lease.TakenFrom != "dead" {
		t.Fatalf("claim after RunNow: %+v, want job %d taken over from the dead holder", taken, j.ID)
	}
	if _, err := op.RunNow(ctx, j.ID); !errors.Is(err, schedule.ErrRunning) {
		t.Fatalf("RunNow of the rescuer's run: %v, want ErrRunning (the rescuer lives)", err)
	}
}
