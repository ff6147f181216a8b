package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
	"pgregory.net/rapid"
)

// step is one scripted run of a job in the property tests.
type step struct {
	outcome  int // see scriptedResult
	duration time.Duration
}

// scriptedResult turns a drawn outcome into what the runner returns.
func scriptedResult(o int, now time.Time) (schedule.Result, error) {
	switch o {
	case 1:
		return schedule.Result{}, &budget.Error{Reason: forage.ReasonRequestCap}
	case 2:
		return schedule.Result{}, &budget.Error{Reason: forage.ReasonThrottled, Until: now.Add(45 * time.Second)}
	case 3:
		return schedule.Result{}, errors.New("boom")
	case 4:
		return schedule.Result{Done: true}, nil
	}
	return schedule.Result{}, nil
}

var (
	drawKind     = rapid.SampledFrom([]schedule.Kind{schedule.KindGapFill, schedule.KindIncremental, schedule.KindRefresh, schedule.KindBackfill, schedule.KindBackfill})
	drawInterval = rapid.SampledFrom([]time.Duration{10 * time.Second, 30 * time.Second, time.Minute})
	drawStep     = rapid.Custom(func(t *rapid.T) step {
		return step{
			outcome:  rapid.IntRange(0, 4).Draw(t, "outcome"),
			duration: rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second, 20 * time.Second, 2 * time.Minute}).Draw(t, "duration"),
		}
	})
)

// TestPropertyRunLimits runs random job sets with random outcomes and run
// times through Run, in a synctest bubble, and checks at every start: no
// more than MaxRunning jobs run, no more than MaxPerProvider of one
// provider; a backfill never starts while a head job of its provider runs;
// no job of a provider starts after a run of it met source pressure and
// before the pause it named ended; no job runs twice at once. Run returns
// when its context ends, with no goroutine left (the bubble checks).
func TestPropertyRunLimits(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			maxRun := rapid.IntRange(1, 4).Draw(rt, "MaxRunning")
			perProv := rapid.IntRange(1, maxRun).Draw(rt, "MaxPerProvider")
			nProv := rapid.IntRange(1, 4).Draw(rt, "providers")
			nJobs := rapid.IntRange(1, 12).Draw(rt, "jobs")
			scripts := map[string][]step{}
			var specs []schedule.Spec
			for i := range nJobs {
				spec := schedule.Spec{
					Provider: fmt.Sprint("p", rapid.IntRange(0, nProv-1).Draw(rt, "provider")),
					Kind:     drawKind.Draw(rt, "kind"),
					Stream:   fmt.Sprint("s", i),
					Interval: drawInterval.Draw(rt, "interval"),
				}
				specs = append(specs, spec)
				scripts[spec.Stream] = rapid.SliceOfN(drawStep, 1, 6).Draw(rt, "script")
			}

			var mu sync.Mutex
			var violations []string
			running, perP, headRunning := 0, map[string]int{}, map[string]int{}
			busy := map[string]bool{}
			type pause struct{ from, until time.Time }
			pauses := map[string][]pause{}
			runs := map[string]int{}
			runner := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
				now := time.Now()
				mu.Lock()
				running++
				perP[j.Provider]++
				switch {
				case running > maxRun:
					violations = append(violations, fmt.Sprintf("%v: %d jobs running, MaxRunning %d", now, running, maxRun))
				case perP[j.Provider] > perProv:
					violations = append(violations, fmt.Sprintf("%v: %d jobs of %s running, MaxPerProvider %d", now, perP[j.Provider], j.Provider, perProv))
				case j.Kind == schedule.KindBackfill && headRunning[j.Provider] > 0:
					violations = append(violations, fmt.Sprintf("%v: backfill %s started while %d head jobs of %s run", now, j.Stream, headRunning[j.Provider], j.Provider))
				case busy[j.Stream]:
					violations = append(violations, fmt.Sprintf("%v: %s started twice", now, j.Stream))
				}
				for _, p := range pauses[j.Provider] {
					if now.After(p.from) && now.Before(p.until) {
						violations = append(violations, fmt.Sprintf("%v: %s started during %s's pause [%v, %v)", now, j.Stream, j.Provider, p.from, p.until))
					}
				}
				busy[j.Stream] = true
				if j.Kind != schedule.KindBackfill {
					headRunning[j.Provider]++
				}
				script := scripts[j.Stream]
				st := script[runs[j.Stream]%len(script)]
				runs[j.Stream]++
				mu.Unlock()

				err := sleepCtx(ctx, st.duration)
				res, runErr := scriptedResult(st.outcome, time.Now())

				mu.Lock()
				defer mu.Unlock()
				running--
				perP[j.Provider]--
				busy[j.Stream] = false
				if j.Kind != schedule.KindBackfill {
					headRunning[j.Provider]--
				}
				if err != nil {
					return schedule.Result{}, err
				}
				var be *budget.Error
				if errors.As(runErr, &be) && be.Reason.SourcePressure() {
					pauses[j.Provider] = append(pauses[j.Provider], pause{time.Now(), be.Until})
				}
				return res, runErr
			})
			store := schedule.NewMemoryJobStore()
			s, err := schedule.New(schedule.Config{MaxRunning: maxRun, MaxPerProvider: perProv, Backoff: time.Second}, store, runner)
			if err != nil {
				rt.Fatal(err)
			}
			for _, spec := range specs {
				if _, err := s.Upsert(context.Background(), spec); err != nil {
					rt.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			time.Sleep(3 * time.Minute)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				rt.Fatalf("Run returned %v, want context.Canceled", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(violations) > 0 {
				rt.Fatalf("%d violations, first: %s", len(violations), violations[0])
			}
			if running != 0 {
				rt.Fatalf("%d runs still in progress after Run returned", running)
			}
			jobs, _ := store.List(context.Background(), schedule.Query{})
			for _, j := range jobs {
				if j.Lease.Owner != "" || j.State == schedule.StateRunning {
					rt.Fatalf("job %s left %s with lease %+v after Run returned", j.Stream, j.State, j.Lease)
				}
			}
		})
	})
}

// TestPropertyClaimAtLimits drives ClaimAt and FinishAt by hand at
// explicit times (no Run, no bubble) and checks after every claim the same
// limits, head-first rule and cool-downs as TestPropertyRunLimits, plus:
// no job is due and unclaimed while a slot its provider could use is free
// and the provider is not cooling (work conservation).
func TestPropertyClaimAtLimits(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		maxRun := rapid.IntRange(1, 4).Draw(rt, "MaxRunning")
		perProv := rapid.IntRange(1, maxRun).Draw(rt, "MaxPerProvider")
		nProv := rapid.IntRange(1, 3).Draw(rt, "providers")
		// LeaseTTL 90 s: RenewAt comes at least every 50 s here, and must come
		// every LeaseTTL/3 (a lease that ended is lost, not renewed).
		s, store := newSched(rt, schedule.Config{MaxRunning: maxRun, MaxPerProvider: perProv, LeaseTTL: 90 * time.Second}, nil)
		ctx := context.Background()
		for i := range rapid.IntRange(1, 10).Draw(rt, "jobs") {
			upsert(rt, s, t0, schedule.Spec{
				Provider: fmt.Sprint("p", rapid.IntRange(0, nProv-1).Draw(rt, "provider")),
				Kind:     drawKind.Draw(rt, "kind"), Stream: fmt.Sprint("s", i), Interval: drawInterval.Draw(rt, "interval"),
			})
		}
		now := t0
		var running []schedule.Job
		cooling := map[string]time.Time{}
		for i := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			now = now.Add(rapid.SampledFrom([]time.Duration{0, time.Second, 10 * time.Second, 50 * time.Second}).Draw(rt, "advance"))
			if err := s.RenewAt(ctx, now); err != nil {
				rt.Fatalf("step %d: RenewAt: %v", i, err)
			}
			// Finish some running jobs.
			for k := 0; k < len(running); {
				if !rapid.Bool().Draw(rt, "finish") {
					k++
					continue
				}
				j := running[k]
				running = append(running[:k], running[k+1:]...)
				res, err := scriptedResult(rapid.IntRange(0, 4).Draw(rt, "outcome"), now)
				if _, ferr := s.FinishAt(ctx, now, j, res, err); ferr != nil {
					rt.Fatalf("step %d: FinishAt(%s): %v", i, j.Stream, ferr)
				}
				var be *budget.Error
				if errors.As(err, &be) && be.Reason.SourcePressure() {
					cooling[j.Provider] = be.Until
				}
			}
			claimed := claim(rt, s, now)
			running = append(running, claimed...)
			perP, heads := map[string]int{}, map[string]int{}
			for _, j := range running {
				perP[j.Provider]++
				if j.Kind != schedule.KindBackfill {
					heads[j.Provider]++
				}
			}
			if len(running) > maxRun {
				rt.Fatalf("step %d: %d running, MaxRunning %d", i, len(running), maxRun)
			}
			for _, j := range claimed {
				if perP[j.Provider] > perProv {
					rt.Fatalf("step %d: %d of %s running, MaxPerProvider %d", i, perP[j.Provider], j.Provider, perProv)
				}
				if j.Kind == schedule.KindBackfill && heads[j.Provider] > 0 {
					rt.Fatalf("step %d: backfill %s claimed with %d head jobs of %s running", i, j.Stream, heads[j.Provider], j.Provider)
				}
				if now.Before(cooling[j.Provider]) {
					rt.Fatalf("step %d: %s claimed at t0+%v, its provider cools until t0+%v", i, j.Stream, now.Sub(t0), cooling[j.Provider].Sub(t0))
				}
			}
			// Work conservation: anything left due must have a reason.
			all, _ := store.List(ctx, schedule.Query{})
			for _, j := range all {
				if !due(&j, now) || len(running) == maxRun || perP[j.Provider] >= perProv || now.Before(cooling[j.Provider]) {
					continue
				}
				if j.Kind == schedule.KindBackfill && heads[j.Provider] > 0 {
					continue
				}
				if j.Kind == schedule.KindBackfill && headDue(all, j.Provider, now) {
					continue
				}
				rt.Fatalf("step %d: %s is due at t0+%v, a slot is free and nothing holds it back, but it was not claimed", i, j.Stream, now.Sub(t0))
			}
		}
	})
}

// headDue reports whether provider has a head job due at now.
func headDue(all []schedule.Job, provider string, now time.Time) bool {
	for _, j := range all {
		if j.Provider == provider && j.Kind != schedule.KindBackfill && due(&j, now) {
			return true
		}
	}
	return false
}

// TestPropertyUpsertDedups: however many times jobs are added, the store
// holds one per (provider, kind, stream), upserting returns that job's ID,
// and the scheduler holds nothing per job in memory (its snapshot counts
// only what the store holds).
func TestPropertyUpsertDedups(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		s, store := newSched(rt, schedule.Config{}, nil)
		ids := map[string]int64{}
		for i := range rapid.IntRange(1, 200).Draw(rt, "upserts") {
			spec := schedule.Spec{
				Provider: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "provider"),
				Kind:     drawKind.Draw(rt, "kind"),
				Stream:   rapid.SampledFrom([]string{"x", "y", "z"}).Draw(rt, "stream"),
				Interval: drawInterval.Draw(rt, "interval"),
				Priority: rapid.IntRange(0, 50).Draw(rt, "priority"),
			}
			j := upsert(rt, s, t0.Add(time.Duration(i)*time.Second), spec)
			key := fmt.Sprint(spec.Provider, spec.Kind, spec.Stream)
			if id, ok := ids[key]; ok && id != j.ID {
				rt.Fatalf("upsert %d of %s: ID %d, earlier %d", i, key, j.ID, id)
			}
			ids[key] = j.ID
		}
		if count(store) != len(ids) {
			rt.Fatalf("store holds %d jobs for %d identities", count(store), len(ids))
		}
		snap, err := s.SnapshotPage(context.Background(), t0.Add(time.Hour), "", math.MaxInt)
		if err != nil {
			rt.Fatal(err)
		}
		if snap.Total != len(ids) || snap.Due != len(ids) {
			rt.Fatalf("snapshot: %d jobs, %d due; want %d and %d (one pending run each)", snap.Total, snap.Due, len(ids), len(ids))
		}
	})
}

// TestAgingPreventsStarvation: with one slot and a fresh high-priority job
// due at every decision, a low-priority job still runs once it has waited
// longer than its priority gap times Aging.
func TestAgingPreventsStarvation(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{MaxRunning: 1, Aging: time.Minute, Random: noJitter}, nil)
	ctx := context.Background()
	low := upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindRefresh, Stream: "low", Priority: 50, Interval: time.Hour})
	now := t0
	for i := range 100 {
		// A new gap fill every 10s, always due at once.
		upsert(t, s, now, schedule.Spec{Provider: "q", Kind: schedule.KindGapFill, Stream: fmt.Sprint("gap", i)})
		jobs := claim(t, s, now)
		if len(jobs) != 1 {
			t.Fatalf("step %d: claimed %v, want one job", i, streams(jobs))
		}
		if jobs[0].ID == low.ID {
			// Rank of low: t0 + 50m; of a gap due now: now + 10m.
			if waited := now.Sub(t0); waited < 40*time.Minute {
				t.Fatalf("the low-priority job ran after %v, before its 40-point gap was worth it", waited)
			}
			return
		}
		if _, err := s.FinishAt(ctx, now, jobs[0], schedule.Result{Done: true}, nil); err != nil {
			t.Fatal(err)
		}
		now = now.Add(30 * time.Second)
	}
	t.Fatal("the low-priority job never ran: starved")
}

// TestNoAgingIsStrictPriority: with Aging set to NoAging, the same stream
// of fresh high-priority work that aging lets a low-priority job through
// (TestAgingPreventsStarvation) keeps it waiting: strict priority.
func TestNoAgingIsStrictPriority(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{MaxRunning: 1, Aging: schedule.NoAging, Random: noJitter}, nil)
	ctx := context.Background()
	low := upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindRefresh, Stream: "low", Priority: 50, Interval: time.Hour})
	now := t0
	for i := range 100 {
		upsert(t, s, now, schedule.Spec{Provider: "q", Kind: schedule.KindGapFill, Stream: fmt.Sprint("gap", i)})
		jobs := claim(t, s, now)
		if len(jobs) != 1 || jobs[0].ID == low.ID {
			t.Fatalf("step %d (t0+%v): claimed %v, want the fresh gap fill, not the low-priority job", i, now.Sub(t0), streams(jobs))
		}
		if _, err := s.FinishAt(ctx, now, jobs[0], schedule.Result{Done: true}, nil); err != nil {
			t.Fatal(err)
		}
		now = now.Add(30 * time.Second)
	}
}
