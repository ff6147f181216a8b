package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
	"pgregory.net/rapid"
)

// TestOutcomeTable pins the package doc's outcome table row by row: what
// each result does to the job's state, next run and stats, and whether it
// cools the provider (a sibling job of the same provider, due, may or may
// not be claimed; another provider's always is).
func TestOutcomeTable(t *testing.T) {
	t.Parallel()
	const requeue = 3 * time.Second
	finish := t0.Add(10 * time.Second) // every run ends 10s after it was due
	throttle := &budget.Error{Reason: forage.ReasonThrottled, Provider: "p", Status: 429, Until: finish.Add(90 * time.Second)}
	rows := []struct {
		name     string
		kind     schedule.Kind
		res      schedule.Result
		err      error
		state    schedule.State // "" means the job is deleted
		next     time.Time
		coolTill time.Time // zero: no cool-down
		succ     int64
		fail     int64
	}{
		{"incremental success", schedule.KindIncremental, schedule.Result{}, nil, schedule.StateIdle, t0.Add(time.Minute), time.Time{}, 1, 0},
		{"refresh success", schedule.KindRefresh, schedule.Result{}, nil, schedule.StateIdle, t0.Add(6 * time.Hour), time.Time{}, 1, 0},
		{"incremental Done is ignored", schedule.KindIncremental, schedule.Result{Done: true}, nil, schedule.StateIdle, t0.Add(time.Minute), time.Time{}, 1, 0},
		{"backfill unfinished", schedule.KindBackfill, schedule.Result{}, nil, schedule.StateQueued, finish.Add(requeue), time.Time{}, 1, 0},
		{"backfill done", schedule.KindBackfill, schedule.Result{Done: true}, nil, schedule.StateSuccess, t0, time.Time{}, 1, 0},
		{"gap fill unfinished", schedule.KindGapFill, schedule.Result{}, nil, schedule.StateQueued, finish.Add(requeue), time.Time{}, 1, 0},
		{"gap fill done is deleted", schedule.KindGapFill, schedule.Result{Done: true}, nil, "", time.Time{}, time.Time{}, 0, 0},
		{"request cap", schedule.KindBackfill, schedule.Result{}, &budget.Error{Reason: forage.ReasonRequestCap}, schedule.StateQueued, finish.Add(requeue), time.Time{}, 0, 0},
		{"run deadline", schedule.KindIncremental, schedule.Result{}, context.DeadlineExceeded, schedule.StateQueued, finish.Add(requeue), time.Time{}, 0, 0},
		{"throttled until reset", schedule.KindIncremental, schedule.Result{}, throttle, schedule.StateWaitingRateLimit, throttle.Until, throttle.Until, 0, 0},
		// A provider that kept failing fails the job (counted): it showed
		// as waiting on a rate limit, no failure. Its breaker, which sees
		// every call of the provider, is not open: the failures may be
		// this job's alone (a page that answers 500 for good), so the
		// provider is not cooled; an open breaker cools it.
		{"unavailable, end unknown", schedule.KindBackfill, schedule.Result{}, &budget.Error{Reason: forage.ReasonUnavailable}, schedule.StateFailed, finish.Add(time.Minute), time.Time{}, 0, 1},
		{"circuit open", schedule.KindGapFill, schedule.Result{}, &budget.Error{Reason: forage.ReasonCircuitOpen, Until: finish.Add(30 * time.Second)}, schedule.StateFailed, finish.Add(30 * time.Second), finish.Add(30 * time.Second), 0, 1},
		{"permanent", schedule.KindIncremental, schedule.Result{}, &budget.Error{Reason: forage.ReasonPermanent, Status: 400}, schedule.StateFailed, finish.Add(5 * time.Second), time.Time{}, 0, 1},
		{"other error", schedule.KindBackfill, schedule.Result{}, errors.New("sink: disk full"), schedule.StateFailed, finish.Add(5 * time.Second), time.Time{}, 0, 1},
		{"canceled", schedule.KindIncremental, schedule.Result{}, context.Canceled, schedule.StateQueued, t0, time.Time{}, 0, 0},
		{"budget canceled", schedule.KindIncremental, schedule.Result{}, &budget.Error{Reason: forage.ReasonCanceled}, schedule.StateQueued, t0, time.Time{}, 0, 0},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newSched(t, schedule.Config{Random: noJitter, Requeue: requeue, MaxPerProvider: 2}, nil)
			ctx := context.Background()
			iv := time.Minute
			if row.kind == schedule.KindRefresh {
				iv = 6 * time.Hour
			}
			j := upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: row.kind, Stream: "main", Interval: iv})
			upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindGapFill, Stream: "sibling", NextRun: finish})
			upsert(t, s, t0, schedule.Spec{Provider: "q", Kind: schedule.KindGapFill, Stream: "other", NextRun: finish})
			got := claim(t, s, t0)
			if len(got) != 1 || got[0].ID != j.ID {
				t.Fatalf("ClaimAt(t0) = %v, want [main]", streams(got))
			}
			after, err := s.FinishAt(ctx, finish, got[0], row.res, row.err)
			if err != nil {
				t.Fatalf("FinishAt: %v", err)
			}
			stored, err := s.Store().Get(ctx, j.ID)
			if row.state == "" {
				if !errors.Is(err, schedule.ErrNotFound) {
					t.Fatalf("Job after a done gap fill: %v, want ErrNotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Job: %v", err)
			}
			if stored.State != row.state || !stored.NextRun.Equal(row.next) {
				t.Errorf("after %v: state %s, next run t0+%v; want %s, t0+%v", row.err, stored.State, stored.NextRun.Sub(t0), row.state, row.next.Sub(t0))
			}
			st := stored.Stats
			if st.Runs != 1 || st.Successes != row.succ || st.Failures != row.fail || !st.LastRun.Equal(t0) || stored.Lease.Owner != "" {
				t.Errorf("stats %+v, lease %+v; want 1 run, %d successes, %d failures, last run t0, no lease", st, stored.Lease, row.succ, row.fail)
			}
			if wantErr := row.fail > 0 || row.state == schedule.StateWaitingRateLimit; wantErr != (st.LastError != "") {
				t.Errorf("LastError %q after %v", st.LastError, row.err)
			}
			if after.Version != stored.Version {
				t.Errorf("FinishAt returned version %d, stored %d", after.Version, stored.Version)
			}
			// The provider's cool-down: the sibling waits for it, the other
			// provider never does.
			got = claim(t, s, finish)
			want := []string{"sibling", "other"}
			switch {
			case !row.coolTill.IsZero():
				want = []string{"other"}
			case row.state == schedule.StateQueued && !row.next.After(finish): // interrupted: due again at once
				want = append(want, "main")
			}
			if fmt.Sprint(streams(got)) != fmt.Sprint(want) {
				t.Fatalf("ClaimAt(finish) = %v, want %v", streams(got), want)
			}
			if !row.coolTill.IsZero() {
				for _, j := range claim(t, s, row.coolTill.Add(-time.Millisecond)) {
					if j.Provider == "p" {
						t.Fatalf("ClaimAt just before the cool-down ends took %s of the cooling provider", j.Stream)
					}
				}
				got := streams(claim(t, s, row.coolTill))
				if len(got) == 0 || got[0] != "sibling" {
					t.Fatalf("ClaimAt at the cool-down's end = %v, want the sibling first", got)
				}
			}
		})
	}
}

// TestBackoffDoublesUpToCap: consecutive failures wait Backoff, 2×, 4×, …
// up to MaxBackoff; a success resets the streak.
func TestBackoffDoublesUpToCap(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{Random: noJitter, Backoff: time.Second, MaxBackoff: 10 * time.Second}, nil)
	ctx := context.Background()
	upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
	now := t0
	fail := errors.New("boom")
	for i, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		jobs := claim(t, s, now)
		if len(jobs) != 1 {
			t.Fatalf("step %d: ClaimAt(t0+%v) = %v, want the job", i, now.Sub(t0), streams(jobs))
		}
		j, err := s.FinishAt(ctx, now, jobs[0], schedule.Result{}, fail)
		if err != nil {
			t.Fatalf("step %d: FinishAt: %v", i, err)
		}
		if got := j.NextRun.Sub(now); got != want*time.Second || j.Stats.Streak != i+1 {
			t.Fatalf("step %d: backoff %v, streak %d; want %v, %d", i, got, j.Stats.Streak, want*time.Second, i+1)
		}
		now = j.NextRun
	}
	jobs := claim(t, s, now)
	j, _ := s.FinishAt(ctx, now, jobs[0], schedule.Result{}, nil)
	if j.Stats.Streak != 0 || j.Stats.Failures != 6 || j.Stats.Successes != 1 {
		t.Fatalf("after a success: %+v, want streak 0, 6 failures, 1 success", j.Stats)
	}
}

// TestCadenceSkipsMissedCycles: a periodic job that fell behind runs at
// the next point of its cadence, not back to back.
func TestCadenceSkipsMissedCycles(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{Random: noJitter}, nil)
	upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s", Interval: time.Minute})
	late := t0.Add(3*time.Minute + 30*time.Second)
	jobs := claim(t, s, late)
	j, err := s.FinishAt(context.Background(), late.Add(time.Second), jobs[0], schedule.Result{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(4 * time.Minute); !j.NextRun.Equal(want) {
		t.Fatalf("next run t0+%v, want t0+%v", j.NextRun.Sub(t0), want.Sub(t0))
	}
}

// TestPropertyJitterWithinBounds: whatever the random draw, interval and
// jitter, a periodic job's next run is one interval after the last due
// time, give or take Jitter × interval, and never in the past.
func TestPropertyJitterWithinBounds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		r := rapid.Float64Range(0, 0.999999).Draw(rt, "random")
		jit := rapid.Float64Range(0, 0.5).Draw(rt, "jitter")
		iv := time.Duration(rapid.Int64Range(int64(time.Second), int64(24*time.Hour)).Draw(rt, "interval"))
		took := time.Duration(rapid.Int64Range(0, int64(iv/2)).Draw(rt, "run took"))
		s, _ := newSched(rt, schedule.Config{Random: func() float64 { return r }, Jitter: jit}, nil)
		upsert(rt, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s", Interval: iv})
		jobs := claim(rt, s, t0)
		j, err := s.FinishAt(context.Background(), t0.Add(took), jobs[0], schedule.Result{}, nil)
		if err != nil {
			rt.Fatal(err)
		}
		eff := jit
		if eff == 0 {
			eff = 0.05
		}
		lo := t0.Add(iv - time.Duration(eff*float64(iv)) - 1)
		hi := t0.Add(iv + time.Duration(eff*float64(iv)) + 1)
		if j.NextRun.Before(lo) || j.NextRun.After(hi) || !j.NextRun.After(t0.Add(took)) {
			rt.Fatalf("next run t0+%v with interval %v, jitter %v, run took %v: want in [%v, %v] and after the run",
				j.NextRun.Sub(t0), iv, jit, took, lo.Sub(t0), hi.Sub(t0))
		}
	})
}

// TestNoJitterIsExact: with Jitter set to NoJitter a periodic job's next
// run is exactly one interval after its due time, whatever the draw.
func TestNoJitterIsExact(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{Jitter: schedule.NoJitter, Random: func() float64 { return 0.999 }}, nil)
	upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s", Interval: time.Hour})
	jobs := claim(t, s, t0)
	j, err := s.FinishAt(context.Background(), t0.Add(time.Second), jobs[0], schedule.Result{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Hour); !j.NextRun.Equal(want) {
		t.Fatalf("next run t0+%v with NoJitter, want exactly t0+%v", j.NextRun.Sub(t0), want.Sub(t0))
	}
}
