package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/schedule"
)

// jobHolder returns a store on a pool of its own (another process's
// stores, with a session of their own), on s's schema. It closes when t
// ends, if the test has not closed it.
func jobHolder(t *testing.T, s *pgstore.Store, cfg pgstore.Config) *pgstore.Store {
	t.Helper()
	cfg.Schema = s.Schema()
	h, err := pgstore.New(otherPool(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// addJob adds a due job of provider on stream.
func addJob(t *testing.T, js schedule.JobStore, provider, stream string, kind schedule.Kind, due time.Time) schedule.Job {
	t.Helper()
	j, err := js.Upsert(t.Context(), schedule.Job{Provider: provider, Kind: kind, Stream: stream, Priority: 20,
		State: schedule.StateIdle, NextRun: due, Created: due, Updated: due})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// claimed claims at now for owner and returns the jobs, failing the test on
// an error.
func claimed(t *testing.T, js schedule.JobStore, now time.Time, owner string, f schedule.ClaimFilter) []schedule.Job {
	t.Helper()
	got, err := js.Claim(t.Context(), now, owner, time.Hour, 10, f)
	if err != nil {
		t.Fatalf("%s's claim: %v", owner, err)
	}
	return got
}

// leaseSession reads the session key job id's lease records (0 for none).
func leaseSession(t *testing.T, s *pgstore.Store, id int64) int64 {
	t.Helper()
	var key *int64
	if err := s.Pool().QueryRow(t.Context(), `SELECT lease_session FROM "`+s.Schema()+`".jobs WHERE id = $1`, id).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if key == nil {
		return 0
	}
	return *key
}

// waitSessionEnded waits until the session of key has ended (its advisory
// lock can be taken), failing the test after takeoverWithin. The server
// ends a session asynchronously, once its backend reads the closed socket.
func waitSessionEnded(t *testing.T, s *pgstore.Store, key int64) {
	t.Helper()
	start := time.Now()
	for {
		var free bool
		if err := s.Pool().QueryRow(t.Context(), `SELECT pg_try_advisory_xact_lock($1::bigint)`, key).Scan(&free); err != nil {
			t.Fatal(err)
		}
		if free {
			return
		}
		if time.Since(start) > takeoverWithin {
			t.Fatalf("the session of key %d still holds its lock %v after it was closed", key, takeoverWithin)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// jobIDs is the sorted IDs of jobs, for comparisons and messages.
func jobIDs(jobs ...schedule.Job) []int64 {
	out := ids(jobs)
	slices.Sort(out)
	return out
}

// TestADeadHoldersJobsFreeItsProviderAtOnce: a holder's claim fills
// provider p's per-provider cap (2) and leases r's job on stream x, which
// an operator, in another process, then pauses; a live holder fills q's
// cap. While both live, a third store's claim gets nothing: p and q are
// full, and r's other job on x is held back by the stream's live lease.
// Once the first holder's store closes (its session ends, as a killed
// process's does), the third store's claim, at the same now, an hour
// before the leases expire, takes p's two jobs over (TakenFrom naming the
// dead holder) and r's other job on x, but none of q's: the live holder's
// leases still count. (Regression: the dead holder's leases held p's slots
// and stream x in every process until they expired, LeaseTTL later.)
func TestADeadHoldersJobsFreeItsProviderAtOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	js := s.Jobs()
	now := jobEpoch
	var p, q [3]schedule.Job
	for i := range 3 {
		due := now.Add(-time.Duration(3-i) * time.Minute) // s0 first
		p[i] = addJob(t, js, "p", fmt.Sprint("s", i), schedule.KindIncremental, due)
		q[i] = addJob(t, js, "q", fmt.Sprint("s", i), schedule.KindIncremental, due)
	}
	rInc := addJob(t, js, "r", "x", schedule.KindIncremental, now.Add(-2*time.Minute))
	rRef := addJob(t, js, "r", "x", schedule.KindRefresh, now.Add(-time.Minute))

	dead, live := jobHolder(t, s, pgstore.Config{}), jobHolder(t, s, pgstore.Config{})
	got := claimed(t, dead.Jobs(), now, "dead", schedule.ClaimFilter{PerProvider: 2, Skip: []string{"q"}})
	if want := jobIDs(p[0], p[1], rInc); !slices.Equal(jobIDs(got...), want) {
		t.Fatalf("the first holder's claim took %v, want %v", jobIDs(got...), want)
	}
	got = claimed(t, live.Jobs(), now, "live", schedule.ClaimFilter{PerProvider: 2, Skip: []string{"p", "r"}})
	if want := jobIDs(q[0], q[1]); !slices.Equal(jobIDs(got...), want) {
		t.Fatalf("the live holder's claim took %v, want %v", jobIDs(got...), want)
	}
	key := leaseSession(t, s, p[0].ID)
	if key == 0 || leaseSession(t, s, q[0].ID) == 0 || leaseSession(t, s, q[0].ID) == key {
		t.Fatalf("lease sessions %d (first holder), %d (live holder): want two different keys",
			key, leaseSession(t, s, q[0].ID))
	}
	// The operator's pause of the running rInc, from the third store's
	// process, leaves the lease (and its session) as it was.
	j, err := js.Get(t.Context(), rInc.ID)
	if err != nil {
		t.Fatal(err)
	}
	j.State, j.Updated = schedule.StatePaused, now
	if _, err := js.Update(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	if k := leaseSession(t, s, rInc.ID); k != key {
		t.Fatalf("an operator's Update of a leased job moved its session from %d to %d", key, k)
	}
	f := schedule.ClaimFilter{PerProvider: 2}
	if got := claimed(t, js, now, "rescuer", f); len(got) != 0 {
		t.Fatalf("claim while both holders live took %v, want nothing", jobIDs(got...))
	}

	dead.Close() // the last store on its pool: its session ends
	waitSessionEnded(t, s, key)
	got = claimed(t, js, now, "rescuer", f)
	if want := jobIDs(p[0], p[1], rRef); !slices.Equal(jobIDs(got...), want) {
		t.Fatalf("claim after the first holder died took %v, want %v (its two jobs of p and r's other job on x, none of q's)",
			jobIDs(got...), want)
	}
	for _, j := range got {
		want := "dead"
		if j.ID == rRef.ID {
			want = ""
		}
		if j.Lease.TakenFrom != want || j.Lease.Owner != "rescuer" || j.State != schedule.StateRunning {
			t.Errorf("job %d claimed with lease %+v, state %s; want it running, taken from %q", j.ID, j.Lease, j.State, want)
		}
	}
	// The rescuer lives: its leases and the live holder's fill p and q.
	if got := claimed(t, live.Jobs(), now, "third", f); len(got) != 0 {
		t.Fatalf("claim after the takeover took %v, want nothing (p and q full of live leases)", jobIDs(got...))
	}
}

// TestAJobRenewalRecordsTheHoldersNewSession: the holder's session
// connection breaks (terminated by the server) while the holder lives on,
// so its job's lease records a session that has ended: it reads as ended.
// The holder's next renewal (from the job it claimed) records its new
// session, after which the lease excludes others again until it expires.
func TestAJobRenewalRecordsTheHoldersNewSession(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	now := jobEpoch
	addJob(t, s.Jobs(), "p", "s", schedule.KindIncremental, now)
	h := jobHolder(t, s, pgstore.Config{})
	got := claimed(t, h.Jobs(), now, "holder", schedule.ClaimFilter{})
	if len(got) != 1 {
		t.Fatalf("holder's claim took %v, want one job", jobIDs(got...))
	}
	j := got[0]
	old := leaseSession(t, s, j.ID)
	if old == 0 {
		t.Fatal("the claim recorded no session")
	}
	var n int
	err := s.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $1`, old).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminate the holder's session: %d backends, %v; want 1", n, err)
	}
	waitSessionEnded(t, s, old)
	// Meanwhile the lease reads as ended at the claim (its last write), as
	// claims treat it: the holder's scheduler, renewing from what it reads,
	// would find it lost.
	if g, err := h.Jobs().Get(ctx, j.ID); err != nil || g.Lease.Owner != "holder" || !g.Lease.Until.Equal(now) {
		t.Fatalf("Get while the lease's session has ended: lease %+v, %v; want the holder's, ended at %v", g.Lease, err, now)
	}

	j.Lease.Until, j.Updated = now.Add(2*time.Hour), now.Add(time.Minute)
	if j, err = h.Jobs().Update(ctx, j); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if k := leaseSession(t, s, j.ID); k == 0 || k == old {
		t.Fatalf("the renewal recorded session %d, want the holder's new one (not %d, nor none)", k, old)
	}
	at := now.Add(time.Minute)
	if got := claimed(t, s.Jobs(), at, "other", schedule.ClaimFilter{}); len(got) != 0 {
		t.Fatalf("claim after the renewal took %v, want nothing (the holder lives)", jobIDs(got...))
	}
	got = claimed(t, s.Jobs(), j.Lease.Until, "other", schedule.ClaimFilter{})
	if len(got) != 1 || got[0].Lease.TakenFrom != "holder" {
		t.Fatalf("claim when the renewed lease ends: %+v, want the job taken from the holder", got)
	}
}

// TestNoLeaseSessionJobsWaitForExpiry: with Config.NoLeaseSession a job's
// lease records no session, so it holds its job and its provider's slot
// until it expires, even after its holder's store is gone.
func TestNoLeaseSessionJobsWaitForExpiry(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	now := jobEpoch
	addJob(t, s.Jobs(), "p", "s", schedule.KindIncremental, now)
	h := jobHolder(t, s, pgstore.Config{NoLeaseSession: true})
	got := claimed(t, h.Jobs(), now, "holder", schedule.ClaimFilter{})
	if len(got) != 1 {
		t.Fatalf("claim without a session took %v, want one job", jobIDs(got...))
	}
	if k := leaseSession(t, s, got[0].ID); k != 0 {
		t.Fatalf("claim without a session recorded session %d, want none", k)
	}
	h.Close()
	if got := claimed(t, s.Jobs(), now, "other", schedule.ClaimFilter{}); len(got) != 0 {
		t.Fatalf("claim after the sessionless holder closed took %v, want nothing until its lease expires", jobIDs(got...))
	}
	got = claimed(t, s.Jobs(), now.Add(time.Hour), "other", schedule.ClaimFilter{})
	if len(got) != 1 || got[0].Lease.TakenFrom != "holder" {
		t.Fatalf("claim when the lease expires: %+v, want the job taken from the holder", got)
	}
}

// claimWithin claims at now until a claim takes something, failing the
// test after takeoverWithin; the server ends a killed process's session
// asynchronously, hence a retry.
func claimWithin(t *testing.T, js schedule.JobStore, now time.Time, owner string) []schedule.Job {
	t.Helper()
	start := time.Now()
	for {
		got, err := js.Claim(context.WithoutCancel(t.Context()), now, owner, time.Minute, 10, schedule.ClaimFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			return got
		}
		if time.Since(start) > takeoverWithin {
			t.Fatalf("no claim took the dead holder's job within %v", takeoverWithin)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
