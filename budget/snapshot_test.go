package budget_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// TestSnapshotShowsStatusPauseAndLimits: a snapshot says what an operator
// set (status and why), why the provider's pause is in force, and how much
// of each known limit the calls booked and when it is whole again, as an
// admin page shows them.
func TestSnapshotShowsStatusPauseAndLimits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.Limits = []budget.Limit{{Name: "10/m", Count: 10, Per: time.Minute, Burst: 5}} // 5 back to back, then one per 10.25 s
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
		p := provider(reg, "api.example.com")
		s := p.Snapshot()
		if s.Status != budget.StatusActive || s.Why != "" || s.PauseReason != "" || len(s.Limits) != 1 ||
			s.Limits[0] != (budget.LimitSnapshot{Name: "10/m", Count: 10, Per: time.Minute}) {
			t.Fatalf("a new provider's snapshot: %+v; want active, no pause, the limit unused", s)
		}
		ctx := context.Background()
		n, start := 0, time.Now()
		for range 3 {
			if err := p.Do(ctx, nil, countingAttempt(&n)); err != nil {
				t.Fatal(err)
			}
		}
		const slot = 10250 * time.Millisecond // 60 s / (10 − 5 + 1), and a margin of 250 ms
		reset := start.Add(3 * slot)          // three slots booked (the pacer spaced the calls)
		want := int((time.Until(reset) + slot - 1) / slot)
		if l := p.Snapshot().Limits[0]; l.Used != want || want < 1 || !l.Reset.Equal(reset) {
			t.Fatalf("after 3 calls, %v in: %+v; want %d used, whole again at %v", time.Since(start), l, want, reset)
		}
		time.Sleep(time.Until(reset))
		if l := p.Snapshot().Limits[0]; l.Used != 0 || !l.Reset.IsZero() {
			t.Fatalf("at the reset: %+v; want none used, no reset", l)
		}
		_ = p.Do(ctx, nil, status(429, 30*time.Second))
		if s := p.Snapshot(); !s.PausedUntil.After(time.Now()) || s.PauseReason != forage.ReasonThrottled {
			t.Fatalf("after a 429 with Retry-After: paused until %v for %q; want a throttled pause in force", s.PausedUntil, s.PauseReason)
		}
		if err := reg.SetStatus(ctx, "api.example.com", budget.StatusPaused, "maintenance"); err != nil {
			t.Fatal(err)
		}
		if s := p.Snapshot(); s.Status != budget.StatusPaused || s.Why != "maintenance" {
			t.Fatalf("after SetStatus: %q %q; want paused, maintenance", s.Status, s.Why)
		}
		// A resume's reason is shown as a pause's is (it was kept in the
		// record, and the snapshot showed none), and one with none
		// clears the pause's.
		if err := reg.SetStatus(ctx, "api.example.com", budget.StatusActive, "the provider's maintenance ended"); err != nil {
			t.Fatal(err)
		}
		if s := p.Snapshot(); s.Status != budget.StatusActive || s.Why != "the provider's maintenance ended" {
			t.Fatalf("after a resume: %q %q; want active with its reason", s.Status, s.Why)
		}
		if err := reg.SetStatus(ctx, "api.example.com", budget.StatusActive, ""); err != nil {
			t.Fatal(err)
		}
		if s := p.Snapshot(); s.Why != "" {
			t.Fatalf("after a resume with no reason: %q; want none", s.Why)
		}
	})
}
