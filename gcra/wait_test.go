package gcra_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/gcra"
	"pgregory.net/rapid"
)

// TestWaitSpacesRequestsExactly: at Burst 1, n Waits in a row return exactly
// one interval apart, (n−1)·I in all.
func TestWaitSpacesRequestsExactly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		lim := mustNew(t, gcra.Config{Rate: 20, Burst: 1})
		start := time.Now()
		const n = 10
		for i := range n {
			if err := lim.WaitN(t.Context(), 1); err != nil {
				t.Fatalf("Wait %d: %v", i, err)
			}
			if got, want := time.Since(start), time.Duration(i)*50*time.Millisecond; got != want {
				t.Fatalf("Wait %d returned at %v, want %v", i, got, want)
			}
		}
	})
}

// TestWaitSchedule: for any rate and burst, the k-th of a run of back-to-back
// Waits returns at max(0, k−Burst+1)·I: the burst at once, then one interval
// apart.
func TestWaitSchedule(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		iv := rapid.Int64Range(int64(time.Millisecond), int64(time.Minute)).Draw(rt, "interval")
		burst := rapid.IntRange(1, 10).Draw(rt, "burst")
		n := rapid.IntRange(1, 30).Draw(rt, "waits")
		rapid.SyncTest(rt, func(rt *rapid.T) {
			lim, err := gcra.New(gcra.Config{Rate: 1e9 / float64(iv), Burst: burst})
			if err != nil {
				rt.Fatalf("New: %v", err)
			}
			iv := lim.Interval()
			start := time.Now()
			for k := range n {
				if err := lim.WaitN(context.Background(), 1); err != nil {
					rt.Fatalf("Wait %d: %v", k, err)
				}
				if got, want := time.Since(start), time.Duration(max(0, k-burst+1))*iv; got != want {
					rt.Fatalf("Wait %d returned at %v, want %v", k, got, want)
				}
			}
		})
	})
}

// TestWaitDeadlineTooShortFailsAtOnce: a deadline before the slot fails
// without sleeping, with context.DeadlineExceeded, and leaves no slot
// booked.
func TestWaitDeadlineTooShortFailsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		lim := mustNew(t, gcra.Config{Rate: 20, Burst: 1})
		lim.Allow() // the next slot is 50ms away
		before := lim.AllowNAt(time.Now(), 0)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := lim.WaitN(ctx, 1)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "would exceed") {
			t.Fatalf("Wait with a 30ms deadline for a 50ms slot: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Wait slept %v before refusing", d)
		}
		if after := lim.AllowNAt(time.Now(), 0); after != before {
			t.Fatalf("refused Wait left a slot booked: %+v -> %+v", before, after)
		}
	})
}

// TestWaitCancelledGivesSlotBack: a Wait whose context is cancelled while it
// sleeps returns ctx.Err() and frees its slot for the next caller.
func TestWaitCancelledGivesSlotBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		lim := mustNew(t, gcra.Config{Rate: 20, Burst: 1})
		lim.Allow()
		before := lim.AllowNAt(time.Now(), 0)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- lim.WaitN(ctx, 1) }()
		synctest.Wait() // the Wait is asleep on its timer
		time.Sleep(10 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait: %v", err)
		}
		if after := lim.AllowNAt(time.Now(), 0); after.ResetAfter != before.ResetAfter-10*time.Millisecond {
			t.Fatalf("cancelled Wait kept its slot: %+v -> %+v", before, after)
		}
		start := time.Now()
		if err := lim.WaitN(t.Context(), 1); err != nil || time.Since(start) != 40*time.Millisecond {
			t.Fatalf("next Wait: %v after %v, want nil after the original 40ms", err, time.Since(start))
		}
	})
}

func TestWaitRejectsImpossibleCost(t *testing.T) {
	t.Parallel()
	lim := mustNew(t, gcra.Config{Rate: 20, Burst: 3})
	for _, n := range []int{-1, 4} {
		if err := lim.WaitN(t.Context(), n); !errors.Is(err, gcra.ErrInvalidConfig) {
			t.Errorf("WaitN(%d) with Burst 3: %v, want ErrInvalidConfig", n, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before := lim.AllowNAt(time.Now(), 0)
	if err := lim.WaitN(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context: %v", err)
	}
	if after := lim.AllowNAt(time.Now(), 0); after.Remaining != before.Remaining {
		t.Fatalf("Wait on a cancelled context booked a slot: %+v -> %+v", before, after)
	}
}
