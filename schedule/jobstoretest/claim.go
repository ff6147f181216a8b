package jobstoretest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/schedule"
)

var claimTests = []test{
	{"OnlyDueJobs", testClaimDue},
	{"SkipsPausedDoneAndLeased", testClaimSkipsInactive},
	{"PriorityThenNextRunThenID", testClaimOrder},
	{"AgingLetsOldWorkOvertake", testClaimAging},
	{"Limit", testClaimLimit},
	{"PerProviderCountsLiveLeases", testClaimPerProvider},
	{"SkipProviders", testClaimSkip},
	{"HeadFirstTailWhenIdle", testClaimHeadFirst},
	{"TailHook", testClaimTailHook},
	{"OneJobPerStream", testClaimOneJobPerStream},
	{"BusyHeadHidesNoBackfill", testClaimBusyHead},
	{"RescuesExpiredLeases", testClaimRescue},
	{"RenewAndReleaseByUpdate", testClaimRenewRelease},
	{"ConcurrentClaimsNeverShareAJob", testClaimRace},
}

func testClaimDue(t *testing.T, e *env) {
	soon := e.insert(job("p", schedule.KindIncremental, "soon", at(10)))
	later := e.insert(job("p", schedule.KindIncremental, "later", at(20)))
	if got := e.claim(at(9), "o", 10, schedule.ClaimFilter{}); len(got) != 0 {
		t.Fatalf("Claim at 9s took %v; nothing is due", got)
	}
	diff(t, "Claim at 10s (NextRun == now is due)", []int64{soon.ID}, e.claim(at(10), "o", 10, schedule.ClaimFilter{}))
	diff(t, "Claim at 30s", []int64{later.ID}, e.claim(at(30), "o", 10, schedule.ClaimFilter{}))
	j := e.get(soon.ID)
	want := soon
	want.State, want.Lease, want.Updated, want.Version = schedule.StateRunning, schedule.JobLease{Owner: "o", Until: at(70)}, at(10), 2
	diff(t, "claimed job", want, j)
}

func testClaimSkipsInactive(t *testing.T, e *env) {
	paused := e.insert(job("p", schedule.KindIncremental, "paused", at(0)))
	paused.State = schedule.StatePaused
	e.update(paused)
	done := e.insert(job("p", schedule.KindBackfill, "done", at(0)))
	done.State = schedule.StateSuccess
	e.update(done)
	leased := e.insert(job("p", schedule.KindIncremental, "leased", at(0)))
	leased.State, leased.Lease = schedule.StateRunning, schedule.JobLease{Owner: "other", Until: at(100)}
	e.update(leased)
	for _, s := range []schedule.State{schedule.StateIdle, schedule.StateQueued, schedule.StateWaitingRateLimit, schedule.StateFailed} {
		j := job("q", schedule.KindIncremental, string(s), at(0))
		j.State = s
		e.insert(j)
	}
	got := e.claim(at(10), "o", 10, schedule.ClaimFilter{})
	if len(got) != 4 {
		t.Fatalf("Claim took %d jobs, want the 4 active unleased ones (idle, queued, waiting_rate_limit, failed)", len(got))
	}
	for _, id := range []int64{paused.ID, done.ID, leased.ID} {
		if slices.Contains(got, id) {
			t.Fatalf("Claim took job %d, which is paused, done or leased", id)
		}
	}
}

func testClaimOrder(t *testing.T, e *env) {
	// Inserted in scrambled order; all due.
	inc2 := e.insert(job("a", schedule.KindIncremental, "inc-late", at(5)))
	back := e.insert(job("b", schedule.KindBackfill, "back", at(0)))
	gap := e.insert(job("c", schedule.KindGapFill, "gap", at(8)))
	inc1 := e.insert(job("b", schedule.KindIncremental, "inc-early", at(1)))
	ref := e.insert(job("a", schedule.KindRefresh, "ref", at(0)))
	tie := e.insert(job("c", schedule.KindIncremental, "inc-late-tie", at(5)))
	want := []int64{gap.ID, inc1.ID, inc2.ID, tie.ID, ref.ID, back.ID}
	// Back is provider b's; b's incremental is due, so head-first holds it
	// back until inc1 is released. Release each as it is taken, one by one.
	var got []int64
	for range want {
		ids := e.claim(at(10), "o", 1, schedule.ClaimFilter{})
		if len(ids) != 1 {
			t.Fatalf("step %d: Claim took %v, want one job", len(got), ids)
		}
		got = append(got, ids[0])
		e.release(ids[0], at(1000))
	}
	diff(t, "claim order (priority, next run, ID)", want, got)
}

func testClaimAging(t *testing.T, e *env) {
	// Backfill 40 due at 0s, incremental 20 due at 1000s, gap fill 10 due
	// at 1300s; Aging 60s. Ranks: 0+2400=2400, 1000+1200=2200,
	// 1300+600=1900. At 1300s: gap, then inc, then back (other providers, so
	// head-first does not apply).
	back := e.insert(job("a", schedule.KindBackfill, "b", at(0)))
	inc := e.insert(job("b", schedule.KindIncremental, "i", at(1000)))
	gap := e.insert(job("c", schedule.KindGapFill, "g", at(1300)))
	f := schedule.ClaimFilter{Aging: time.Minute}
	diff(t, "order with Aging 1m", []int64{gap.ID, inc.ID, back.ID}, e.claim(at(1300), "o", 10, f))
	// Now the backfill has been due 1300s longer than the incremental:
	// more than its 20-point gap is worth (1200s), so it overtakes.
	e.release(back.ID, at(0))
	e.release(inc.ID, at(1300))
	e.release(gap.ID, at(2000))
	// back 0+2400 = 2400, inc 1300+1200 = 2500, gap 2000+600 = 2600.
	diff(t, "aged backfill first", []int64{back.ID, inc.ID, gap.ID}, e.claim(at(2000), "o", 10, f))
	// Equal rank: Priority breaks the tie (inc 20 at 600s and back 40 at
	// 0s both rank 1200s with Aging 30s).
	for _, id := range []int64{back.ID, inc.ID, gap.ID} {
		e.release(id, at(5000))
	}
	e.release(back.ID, at(0))
	e.release(inc.ID, at(600))
	diff(t, "rank tie broken by priority", []int64{inc.ID, back.ID}, e.claim(at(3000), "o", 10, schedule.ClaimFilter{Aging: 30 * time.Second}))
}

func testClaimLimit(t *testing.T, e *env) {
	var all []int64
	for i := range 5 {
		all = append(all, e.insert(job(fmt.Sprint("p", i), schedule.KindIncremental, "s", at(i))).ID)
	}
	diff(t, "first claim, limit 2", all[:2], e.claim(at(10), "o", 2, schedule.ClaimFilter{}))
	diff(t, "second claim, limit 2", all[2:4], e.claim(at(10), "o", 2, schedule.ClaimFilter{}))
	diff(t, "third claim, limit 2", all[4:], e.claim(at(10), "o", 2, schedule.ClaimFilter{}))
}

func testClaimPerProvider(t *testing.T, e *env) {
	var a []int64
	for i := range 4 {
		a = append(a, e.insert(job("a", schedule.KindIncremental, fmt.Sprint("s", i), at(i))).ID)
	}
	b := e.insert(job("b", schedule.KindIncremental, "s", at(9)))
	f := schedule.ClaimFilter{PerProvider: 2}
	diff(t, "first claim", []int64{a[0], a[1], b.ID}, e.claim(at(10), "o", 10, f))
	if got := e.claim(at(10), "o2", 10, f); len(got) != 0 {
		t.Fatalf("second claim took %v; provider a has 2 live leases (another owner's count too)", got)
	}
	// A paused job under a live lease still counts: its run is ending.
	j := e.get(a[0])
	j.State = schedule.StatePaused
	e.update(j)
	if got := e.claim(at(20), "o", 10, f); len(got) != 0 {
		t.Fatalf("claim took %v; a paused job whose lease is live still holds a slot", got)
	}
	// Releasing one frees one slot.
	e.release(a[1], at(1000))
	diff(t, "after one release", []int64{a[2]}, e.claim(at(20), "o", 10, f))
	// Expired leases do not count: at 81s every lease taken at 10s or 20s
	// is past its minute, and the jobs under them are rescued.
	diff(t, "after the leases expired", []int64{a[2], a[3], b.ID}, e.claim(at(81), "o", 10, f))
}

func testClaimSkip(t *testing.T, e *env) {
	a := e.insert(job("a", schedule.KindIncremental, "s", at(0)))
	b := e.insert(job("b", schedule.KindIncremental, "s", at(0)))
	c := e.insert(job("c", schedule.KindIncremental, "s", at(0)))
	diff(t, "claim skipping a and c", []int64{b.ID}, e.claim(at(1), "o", 10, schedule.ClaimFilter{Skip: []string{"a", "c"}}))
	diff(t, "claim skipping nobody", []int64{a.ID, c.ID}, e.claim(at(1), "o", 10, schedule.ClaimFilter{}))
}

func testClaimHeadFirst(t *testing.T, e *env) {
	back := e.insert(job("a", schedule.KindBackfill, "s", at(0)))
	inc := e.insert(job("a", schedule.KindIncremental, "t", at(50)))
	otherBack := e.insert(job("b", schedule.KindBackfill, "s", at(0)))
	// 10s: a's incremental is not due yet: a is idle, its backfill runs.
	diff(t, "head not due yet", []int64{back.ID, otherBack.ID}, e.claim(at(10), "o", 10, schedule.ClaimFilter{}))
	e.release(back.ID, at(10))
	e.release(otherBack.ID, at(10))
	// 60s: the incremental is due. Even with room, the backfill waits: the
	// incremental is taken, and once leased it keeps the backfill back.
	diff(t, "head due", []int64{inc.ID, otherBack.ID}, e.claim(at(60), "o", 10, schedule.ClaimFilter{}))
	if got := e.claim(at(61), "o", 10, schedule.ClaimFilter{}); len(got) != 0 {
		t.Fatalf("claim took %v while a's incremental runs; want the backfill held back", got)
	}
	// A paused head job does not hold the tail back, even while leased.
	j := e.get(inc.ID)
	j.State = schedule.StatePaused
	e.update(j)
	diff(t, "head paused", []int64{back.ID}, e.claim(at(62), "o", 10, schedule.ClaimFilter{}))
	e.release(back.ID, at(62))
	// A head job that is due but whose provider is at its cap holds the
	// tail back too: nothing of a's runs until a slot frees.
	j = e.get(inc.ID)
	j.State, j.Lease, j.NextRun = schedule.StateIdle, schedule.JobLease{}, at(62)
	e.update(j)
	gap := e.insert(job("a", schedule.KindGapFill, "s", at(62)))
	diff(t, "two heads, cap 1", []int64{gap.ID}, e.claim(at(63), "o", 10, schedule.ClaimFilter{PerProvider: 1}))
	e.release(gap.ID, at(10000))
	diff(t, "head before tail", []int64{inc.ID}, e.claim(at(64), "o", 10, schedule.ClaimFilter{PerProvider: 1}))
	e.release(inc.ID, at(10000))
	diff(t, "tail once the head is done", []int64{back.ID}, e.claim(at(65), "o", 10, schedule.ClaimFilter{PerProvider: 1}))
}

func testClaimOneJobPerStream(t *testing.T, e *env) {
	// Jobs of provider a on stream s contend for its checkpoint: never two
	// leased at once, in one claim or across claims. Stream t is free, and
	// so is provider b's stream of the same name.
	inc := e.insert(job("a", schedule.KindIncremental, "s", at(0)))
	gap := e.insert(job("a", schedule.KindGapFill, "s", at(0)))
	back := e.insert(job("a", schedule.KindBackfill, "s", at(0)))
	other := e.insert(job("a", schedule.KindIncremental, "t", at(0)))
	b := e.insert(job("b", schedule.KindIncremental, "s", at(0)))
	diff(t, "one claim", []int64{gap.ID, other.ID, b.ID}, e.claim(at(1), "o", 10, schedule.ClaimFilter{}))
	diff(t, "while the gap fill runs", []int64{}, e.claim(at(2), "o", 10, schedule.ClaimFilter{}))
	e.release(gap.ID, at(10000))
	diff(t, "the gap fill done", []int64{inc.ID}, e.claim(at(3), "o", 10, schedule.ClaimFilter{}))
	e.release(inc.ID, at(10000))
	e.release(other.ID, at(10000))
	diff(t, "the head done", []int64{back.ID}, e.claim(at(4), "o", 10, schedule.ClaimFilter{}))
	// A backfill's stream held: the incremental that comes due waits for
	// it, and, not claimable, holds no other backfill back.
	j := e.get(inc.ID)
	j.NextRun = at(5)
	e.update(j)
	back2 := e.insert(job("a", schedule.KindBackfill, "u", at(0)))
	diff(t, "the stream held by its backfill", []int64{back2.ID}, e.claim(at(6), "o", 10, schedule.ClaimFilter{}))
	// Once the backfill's lease expires, the incremental goes first (with
	// b's, whose lease expired too).
	diff(t, "the backfill's lease expired", []int64{b.ID, inc.ID}, e.claim(at(4+61), "o", 10, schedule.ClaimFilter{}))
}

func testClaimTailHook(t *testing.T, e *env) {
	back := e.insert(job("a", schedule.KindBackfill, "s", at(0)))
	inc := e.insert(job("a", schedule.KindIncremental, "t", at(0)))
	otherBack := e.insert(job("b", schedule.KindBackfill, "s", at(0)))
	var asked []string
	var mu sync.Mutex
	f := schedule.ClaimFilter{Tail: func(p string) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, p)
		return p == "a"
	}}
	// Head jobs never ask; b's backfill is refused; a's is held by its
	// own incremental.
	diff(t, "claim with a Tail hook", []int64{inc.ID}, e.claim(at(1), "o", 10, f))
	e.release(inc.ID, at(1000))
	diff(t, "after the head is done", []int64{back.ID}, e.claim(at(2), "o", 10, f))
	for _, p := range asked {
		if p != "a" && p != "b" {
			t.Fatalf("Tail asked about %q, which has no backfill", p)
		}
	}
	if !slices.Contains(asked, "b") {
		t.Fatalf("Tail never asked about b, whose backfill was due (asked %v)", asked)
	}
	_ = otherBack
}

func testClaimRescue(t *testing.T, e *env) {
	j := e.insert(job("p", schedule.KindIncremental, "s", at(0)))
	diff(t, "first owner", []int64{j.ID}, e.claim(at(0), "o1", 10, schedule.ClaimFilter{}))
	held := e.get(j.ID)
	if got := e.claim(at(59), "o2", 10, schedule.ClaimFilter{}); len(got) != 0 {
		t.Fatalf("claim at 59s took %v; the lease lives until 60s", got)
	}
	got, err := e.s.Claim(e.ctx, at(60), "o2", time.Minute, 10, schedule.ClaimFilter{})
	if err != nil || len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("rescue at 60s: Claim = %v, %v; want job %d", got, err, j.ID)
	}
	if got[0].Lease.TakenFrom != "o1" || got[0].Lease.Owner != "o2" {
		t.Fatalf("rescue at 60s: lease %+v, want owner o2 taken from o1", got[0].Lease)
	}
	if from := e.get(j.ID).Lease.TakenFrom; from != "" {
		t.Fatalf("Get after the rescue: TakenFrom %q; stores do not keep it", from)
	}
	// The first owner, waking up late, loses its compare-and-swap.
	held.Lease, held.State = schedule.JobLease{}, schedule.StateIdle
	_, err = e.s.Update(e.ctx, held)
	wantErr(t, "Update by the owner whose lease was taken over", err, schedule.ErrConflict)
	if got := e.get(j.ID).Lease.Owner; got != "o2" {
		t.Fatalf("lease owner %q after the rescue, want o2", got)
	}
}

func testClaimRenewRelease(t *testing.T, e *env) {
	j := e.insert(job("p", schedule.KindIncremental, "s", at(0)))
	e.claim(at(0), "o1", 1, schedule.ClaimFilter{})
	// Renew at 40s to 100s.
	r := e.get(j.ID)
	r.Lease.Until = at(100)
	e.update(r)
	if got := e.claim(at(90), "o2", 10, schedule.ClaimFilter{}); len(got) != 0 {
		t.Fatalf("claim at 90s took %v; the renewed lease lives until 100s", got)
	}
	// Release: due again at 200s.
	e.release(j.ID, at(200))
	if got := e.claim(at(199), "o2", 10, schedule.ClaimFilter{}); len(got) != 0 {
		t.Fatalf("claim at 199s took %v; the released job is due at 200s", got)
	}
	diff(t, "claim at 200s", []int64{j.ID}, e.claim(at(200), "o2", 10, schedule.ClaimFilter{}))
}

func testClaimRace(t *testing.T, e *env) {
	const jobs, workers = 60, 6
	for i := range jobs {
		e.insert(job(fmt.Sprint("p", i%7), schedule.KindIncremental, fmt.Sprint("s", i), at(i%5)))
	}
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprint("w", w)
			for {
				js, err := e.s.Claim(e.ctx, at(10), owner, time.Minute, 3, schedule.ClaimFilter{})
				if err != nil {
					t.Errorf("worker %d: Claim: %v", w, err)
					return
				}
				if len(js) == 0 {
					return
				}
				mu.Lock()
				for _, j := range js {
					if prev, dup := seen[j.ID]; dup {
						t.Errorf("job %d leased to %s and %s", j.ID, prev, owner)
					}
					seen[j.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != jobs {
		t.Fatalf("%d jobs leased in all, want %d", len(seen), jobs)
	}
}

func testClaimBusyHead(t *testing.T, e *env) {
	// A due head job of a stream another job runs cannot be claimed: it
	// neither ranks its provider nor holds back the provider's backfill of
	// another stream, which, due first, is claimed first (before c's head
	// job, due 30 s later; every priority 0).
	add := func(provider string, k schedule.Kind, stream string, next time.Time) schedule.Job {
		j := job(provider, k, stream, next)
		j.Priority = 0
		return e.insert(j)
	}
	running := add("a", schedule.KindBackfill, "y", at(0))
	f := schedule.ClaimFilter{Aging: 30 * time.Second}
	diff(t, "the backfill of y", []int64{running.ID}, e.claim(at(120), "o", 1, f))
	back := add("a", schedule.KindBackfill, "x", at(60))
	add("a", schedule.KindIncremental, "y", at(120))
	add("c", schedule.KindIncremental, "z", at(90))
	diff(t, "a's backfill of x first", []int64{back.ID}, e.claim(at(120), "o", 1, f))
}
