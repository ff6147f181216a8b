package pgstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/schedule"
	"github.com/jackc/pgx/v5/pgxpool"
)

// jobEpoch is where the job tests' explicit times start.
var jobEpoch = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// The claim-crash run of TestJobClaimSurvivesKill.
const crashTTL = 30 * time.Second

// TestJobClaimSurvivesKill: a child process claims a job and is killed
// (SIGKILL), four times over. Twice it dies mid-job, after its claim
// committed. Once its lease records its session: the parent's claim
// rescues the job at once, at the claim's own now, half a minute before
// the lease would expire. Once it records none (Config.NoLeaseSession):
// until the lease expires no claim takes the job, and at the moment it
// expires (explicit now: the lease's end) the parent's claim rescues it.
// Either way the rescue names the child in TakenFrom, and the dead
// worker's late writes, a release and a renewal from the version it held,
// then lose with ErrConflict. Twice it dies
// inside Claim (in the Tail hook, holding its transaction and the
// provider's lock): once the server has rolled the transaction back the
// job is exactly as before, unleased, and the parent claims it at the
// same now.
func TestJobClaimSurvivesKill(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	js := s.Jobs()
	ctx := t.Context()
	for round, mode := range []string{"job", "claim", "job-nosession", "claim"} {
		now := jobEpoch.Add(time.Duration(round) * time.Hour)
		provider := fmt.Sprint("p", round)
		kind := schedule.KindIncremental
		if mode == "claim" {
			kind = schedule.KindBackfill // so that Tail is asked
		}
		j, err := js.Upsert(ctx, schedule.Job{Provider: provider, Kind: kind, Stream: "s", Priority: 20,
			State: schedule.StateIdle, NextRun: now, Created: now, Updated: now})
		if err != nil {
			t.Fatal(err)
		}
		cmd, out := startChild(t, "claim", s.Schema(), provider, mode, strconv.FormatInt(now.UnixNano(), 10))
		sc := bufio.NewScanner(out)
		var line string
		for sc.Scan() {
			if line = sc.Text(); strings.HasPrefix(line, "claimed ") || line == "in claim" {
				break
			}
		}
		held, _ := js.Get(ctx, j.ID) // as the child holds it (mode job)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, out) //nolint:errcheck // drain until the pipe closes
		if err := cmd.Wait(); err == nil {
			t.Fatalf("round %d (%s): the child ended on its own: %v", round, mode, sc.Err())
		}
		switch mode {
		case "job", "job-nosession":
			if want := fmt.Sprintf("claimed %d", j.ID); !strings.HasPrefix(line, want) || held.Lease.Owner == "" ||
				held.State != schedule.StateRunning || !held.Lease.Until.Equal(now.Add(crashTTL)) {
				t.Fatalf("round %d: the child said %q and the job is %+v; want it claimed by the child until %v", round, line, held, now.Add(crashTTL))
			}
			rescueAfterKill(t, js, held, now, mode == "job")
		case "claim":
			if line != "in claim" {
				t.Fatalf("round %d: the child said %q, want \"in claim\"", round, line)
			}
			claimAfterKilledClaim(t, s, j, now)
		}
	}
}

// rescueAfterKill checks a job whose holder was killed mid-job: it is
// rescued at once if its lease records the holder's session (atOnce),
// else held until the lease ends and rescued then; the dead holder's late
// writes lose.
func rescueAfterKill(t *testing.T, js schedule.JobStore, held schedule.Job, now time.Time, atOnce bool) {
	t.Helper()
	ctx := t.Context()
	at := now
	var got []schedule.Job
	if atOnce {
		got = claimWithin(t, js, at, "rescuer")
	} else {
		if got, err := js.Claim(ctx, now.Add(crashTTL-time.Microsecond), "rescuer", time.Minute, 10, schedule.ClaimFilter{}); err != nil || len(got) != 0 {
			t.Fatalf("claim 1µs before the dead child's lease ends: %v, %v; want nothing", ids(got), err)
		}
		at = now.Add(crashTTL)
		var err error
		if got, err = js.Claim(ctx, at, "rescuer", time.Minute, 10, schedule.ClaimFilter{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 || got[0].ID != held.ID || got[0].Version != held.Version+1 || got[0].Lease.Owner != "rescuer" ||
		got[0].Lease.TakenFrom != held.Lease.Owner {
		t.Fatalf("claim at %v after the child was killed: %+v; want job %d rescued at version %d, taken from %s",
			at.Sub(now), got, held.ID, held.Version+1, held.Lease.Owner)
	}
	late := held
	late.State, late.Lease, late.Stats.Runs, late.Updated = schedule.StateIdle, schedule.JobLease{}, 1, at
	if _, err := js.Update(ctx, late); !errors.Is(err, schedule.ErrConflict) {
		t.Fatalf("the dead child's late release: %v, want ErrConflict", err)
	}
	late = held
	late.Lease.Until = at.Add(crashTTL)
	if _, err := js.Update(ctx, late); !errors.Is(err, schedule.ErrConflict) {
		t.Fatalf("the dead child's late renewal: %v, want ErrConflict", err)
	}
	j, err := js.Get(ctx, held.ID)
	if err != nil || j.Lease.Owner != "rescuer" || j.Version != held.Version+1 {
		t.Fatalf("after the late writes: %+v, %v; want the rescuer's lease at version %d", j, err, held.Version+1)
	}
	finish(t, js, j, at.Add(24*time.Hour))
}

// claimAfterKilledClaim checks a job whose claimer was killed inside its
// claim: once the server has ended the claim's transaction (the parent
// waits for the provider's lock), nothing of the claim remains.
func claimAfterKilledClaim(t *testing.T, s *pgstore.Store, j schedule.Job, now time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Blocks until the killed claim's transaction is rolled back.
	if _, err := tx.Exec(ctx, `SELECT FROM "`+s.Schema()+`".job_providers WHERE provider = $1 FOR UPDATE`, j.Provider); err != nil {
		t.Fatalf("wait for the killed claim's lock: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	js := s.Jobs()
	if got, err := js.Get(ctx, j.ID); err != nil || got.Version != j.Version || got.Lease.Owner != "" {
		t.Fatalf("job after its claimer died inside Claim: %+v, %v; want it untouched at version %d", got, err, j.Version)
	}
	got, err := js.Claim(ctx, now, "parent", time.Minute, 10, schedule.ClaimFilter{})
	if err != nil || len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("claim at the same now after the claimer died: %v, %v; want job %d", ids(got), err, j.ID)
	}
	finish(t, js, got[0], now.Add(24*time.Hour))
}

// finish releases a claimed job, due again at next.
func finish(t testing.TB, js schedule.JobStore, j schedule.Job, next time.Time) {
	t.Helper()
	j.State, j.Lease, j.NextRun, j.Stats.Runs = schedule.StateIdle, schedule.JobLease{}, next, j.Stats.Runs+1
	if _, err := js.Update(context.Background(), j); err != nil {
		t.Fatalf("release job %d: %v", j.ID, err)
	}
}

// ids lists the IDs of jobs, for messages.
func ids(jobs []schedule.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// claimChild claims at the time args[1] (Unix nanoseconds) with a lease of
// crashTTL, and then waits to be killed. In mode "job" (args[0]), and
// "job-nosession" (a store with Config.NoLeaseSession), it prints
// "claimed ID VERSION" once the claim has committed; in mode "claim" it
// prints "in claim" from the Tail hook, inside the claim's transaction.
func claimChild(t *testing.T, s *pgstore.Store, _ string, args []string) {
	mode := args[0]
	if mode == "job-nosession" {
		var err error
		if s, err = pgstore.New(s.Pool(), pgstore.Config{Schema: s.Schema(), NoLeaseSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	f := schedule.ClaimFilter{}
	if mode == "claim" {
		f.Tail = func(string) bool {
			fmt.Println("in claim")
			select {} // until killed, holding the claim's transaction
		}
	}
	got, err := s.Jobs().Claim(context.Background(), time.Unix(0, ns), fmt.Sprint("child-", os.Getpid()), crashTTL, 1, f)
	if err != nil || len(got) != 1 {
		t.Fatalf("child claim: %v, %v", ids(got), err)
	}
	fmt.Println("claimed", got[0].ID, got[0].Version)
	select {} // mid-job, until killed
}

// TestJobClaimTwoPools: two pools (two schedulers' worth of connections),
// four goroutines on each, claim and finish jobs at once, in four rounds
// with different jobs, limits, per-provider caps and aging. At no moment
// is a job leased to two claimers: each claimer records the jobs it holds
// and releases each with a compare-and-swap from the version its claim
// returned, which another claim in between would have made fail. No
// provider ever holds more jobs than its cap (the claimers' own count of
// what they hold, never more than the leases in the database).
func TestJobClaimTwoPools(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	var stores [2]schedule.JobStore
	for i := range stores {
		cfg, err := pgxpool.ParseConfig(testDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		ps, err := pgstore.New(pool, pgstore.Config{Schema: s.Schema()})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = ps.Jobs()
	}
	for round, cfg := range []*poolRound{
		{jobs: 120, provs: 8, limit: 1, f: schedule.ClaimFilter{PerProvider: 2, Aging: time.Minute}},
		{jobs: 60, provs: 2, limit: 3, f: schedule.ClaimFilter{PerProvider: 1}},
		{jobs: 100, provs: 5, limit: 4, f: schedule.ClaimFilter{Aging: time.Minute}},
		{jobs: 40, provs: 1, limit: 2, f: schedule.ClaimFilter{PerProvider: 3}},
	} {
		if _, err := s.Pool().Exec(t.Context(), `TRUNCATE "`+s.Schema()+`".jobs`); err != nil {
			t.Fatal(err)
		}
		cfg.now = jobEpoch.Add(time.Duration(round) * time.Hour)
		cfg.run(t, round, stores, s.Jobs())
	}
}

// poolRound is one round of TestJobClaimTwoPools.
type poolRound struct {
	now                      time.Time
	jobs, provs, limit       int
	f                        schedule.ClaimFilter
	claims                   int // claims that took jobs, in all
	mu                       sync.Mutex
	holder                   map[int64]string
	perProv                  map[string]int
	maxPerProv, doubleLeases int
}

// claimsPerRound is how many non-empty claims each round makes in all.
const claimsPerRound = 240

func (r *poolRound) run(t *testing.T, round int, stores [2]schedule.JobStore, js schedule.JobStore) {
	ctx := t.Context()
	for i := range r.jobs {
		k := []schedule.Kind{schedule.KindIncremental, schedule.KindRefresh, schedule.KindBackfill, schedule.KindGapFill}[i%4]
		_, err := js.Upsert(ctx, schedule.Job{Provider: fmt.Sprint("p", i%r.provs), Kind: k, Stream: fmt.Sprint("s", i),
			Priority: k.DefaultPriority(), State: schedule.StateIdle, NextRun: r.now.Add(-time.Duration(i%60) * time.Second),
			Created: r.now, Updated: r.now})
		if err != nil {
			t.Fatal(err)
		}
	}
	r.holder, r.perProv = map[int64]string{}, map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() { r.worker(t, stores[w%2], fmt.Sprintf("r%d/w%d", round, w)) })
	}
	wg.Wait()
	if r.doubleLeases > 0 || r.f.PerProvider > 0 && r.maxPerProv > r.f.PerProvider {
		t.Fatalf("round %d: %d jobs leased twice at once; at most %d of one provider held (cap %d)",
			round, r.doubleLeases, r.maxPerProv, r.f.PerProvider)
	}
}

// worker claims and finishes jobs until the round has made its claims.
// It holds each claim's jobs until its next claim has returned, so that
// claims overlap with jobs held (without sleeping).
func (r *poolRound) worker(t *testing.T, js schedule.JobStore, owner string) {
	ctx := t.Context()
	var held []schedule.Job
	defer func() { r.release(t, js, owner, held) }()
	for {
		r.mu.Lock()
		done := r.claims >= claimsPerRound
		r.mu.Unlock()
		if done || ctx.Err() != nil {
			return
		}
		jobs, err := js.Claim(ctx, r.now, owner, time.Hour, r.limit, r.f)
		if err != nil {
			t.Errorf("%s: Claim: %v", owner, err)
			return
		}
		r.mu.Lock()
		if len(jobs) > 0 {
			r.claims++
		}
		for _, j := range jobs {
			if prev, ok := r.holder[j.ID]; ok {
				t.Errorf("job %d leased to %s while %s holds it", j.ID, owner, prev)
				r.doubleLeases++
			}
			r.holder[j.ID] = owner
			r.perProv[j.Provider]++
			r.maxPerProv = max(r.maxPerProv, r.perProv[j.Provider])
		}
		r.mu.Unlock()
		r.release(t, js, owner, held)
		held = jobs
	}
}

// release finishes jobs: each is forgotten, then released with a
// compare-and-swap from the version its claim returned.
func (r *poolRound) release(t *testing.T, js schedule.JobStore, owner string, jobs []schedule.Job) {
	for _, j := range jobs {
		r.mu.Lock() // forget it before the release makes it claimable
		delete(r.holder, j.ID)
		r.perProv[j.Provider]--
		r.mu.Unlock()
		j.State, j.Lease, j.Stats.Runs = schedule.StateIdle, schedule.JobLease{}, j.Stats.Runs+1
		if _, err := js.Update(context.Background(), j); err != nil {
			t.Errorf("%s: release job %d from the version its claim returned: %v", owner, j.ID, err)
		}
	}
}
