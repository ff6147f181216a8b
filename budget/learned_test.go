package budget_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

// TestClassifyReadsTheProvidersStatuses: a host's Config.Classify decides
// what an attempt means. A provider whose 503s come from a flaky gateway is
// told to read them as transient: they are retried, and never cut the rate.
func TestClassifyReadsTheProvidersStatuses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, err := budget.NewLocal("gw", budget.Config{
			Adaptive: aimd.Config{Initial: 20},
			Classify: func(o forage.Outcome) forage.Class {
				if o.Status == 503 {
					return forage.Transient
				}
				return o.Class()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		err = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			if calls++; calls == 1 {
				return forage.Outcome{Status: 503}
			}
			return forage.Outcome{Status: 200}
		})
		if err != nil || calls != 2 {
			t.Fatalf("Do = %v after %d attempts, want a retried 503 and success", err, calls)
		}
		s := p.Snapshot()
		if s.Overloaded != 0 || s.Transient != 1 || s.Rate < 20 {
			t.Fatalf("snapshot %+v: want the 503 counted transient, the rate not cut", s)
		}
	})
}

// TestKnownLimitIsTheStartingRate: told knowledge is used at once: with a
// known Limit and no Adaptive.Initial, the provider starts at the limit's
// rate, not at the conservative default.
func TestKnownLimitIsTheStartingRate(t *testing.T) {
	t.Parallel()
	p, err := budget.NewLocal("x", budget.Config{Limits: []budget.Limit{{Count: 600, Per: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Snapshot().Rate; got != 10 {
		t.Fatalf("starting rate %g, want 10 (600 per minute)", got)
	}
}

// TestStateSurvivesARestart: what one provider learned (rate, ceiling, a
// pause in force) restores into a fresh one, whose next call waits out the
// pause; an invalid state is refused and changes nothing.
func TestStateSurvivesARestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		first, _ := budget.NewLocal("x", budget.Config{})
		_ = first.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 429, RetryAfter: 30 * time.Second}
		}, budget.CallOption{NoRetry: true})
		saved := budget.StateOf(first)
		if saved.PausedUntil.IsZero() || saved.Rate == 0 {
			t.Fatalf("saved %+v: want a rate and the 30s pause", saved)
		}

		second, _ := budget.NewLocal("x", budget.Config{})
		if err := budget.RestoreState(second, aimd.State{Rate: -1}); !errors.Is(err, aimd.ErrInvalidConfig) {
			t.Fatalf("Restore of a negative rate = %v, want ErrInvalidConfig", err)
		}
		if err := budget.RestoreState(second, saved); err != nil {
			t.Fatal(err)
		}
		if got := budget.StateOf(second); got.Rate != saved.Rate || !got.PausedUntil.Equal(saved.PausedUntil) {
			t.Fatalf("restored %+v, want %+v", got, saved)
		}
		start := time.Now()
		sent := time.Time{}
		if err := second.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			sent = time.Now()
			return forage.Outcome{Status: 200}
		}); err != nil {
			t.Fatal(err)
		}
		if sent.Before(saved.PausedUntil) {
			t.Fatalf("sent %v after the restart, before the restored pause ended (%v)", sent.Sub(start), saved.PausedUntil.Sub(start))
		}
	})
}
