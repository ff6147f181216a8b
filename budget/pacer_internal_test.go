package budget

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestAFasterRateWakesTheWaiter: a call waiting for its slot at a slow rate
// goes as soon as the rate rises, not when the slow rate's slot comes.
// (At the aimd floor of 0.05/s, a call slept 20 s after the provider came
// back and the rate had risen to 6/s.)
func TestAFasterRateWakesTheWaiter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		if d := waiterAfterRise(t, []float64{10}); d > 1100*time.Millisecond {
			t.Errorf("the waiter went %v after the rate rose to 10/s at 1s; want by 1.1s", d)
		}
	})
}

// TestAClimbInStepsWakesTheWaiter: a rate that rises in steps of under
// double each, to far over twice the one a waiter's slot was computed at,
// wakes it (each step was compared with the one before it, and the waiter
// slept the slow rate's whole 20 s).
func TestAClimbInStepsWakesTheWaiter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var steps []float64
		for r := 0.05 * 1.9; r < 10; r *= 1.9 {
			steps = append(steps, r)
		}
		if d := waiterAfterRise(t, steps); d > 3*time.Second {
			t.Errorf("the waiter went %v after the rate rose 200-fold in 1.5 s in steps of x1.9; want within the climb", d)
		}
	})
}

// waiterAfterRise books the one slot a pacer at 0.05/s has, starts a call
// waiting for the next (20 s away), and a second later sets the rate to
// each of rates, 50 ms apart; it returns when the waiter went, counted
// from its start. Call it in a synctest bubble.
func waiterAfterRise(t *testing.T, rates []float64) time.Duration {
	t.Helper()
	p, err := newLocalPacer(0.05, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitN(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	went := make(chan time.Duration)
	go func() {
		if err := p.WaitN(context.Background(), 1); err != nil {
			t.Error(err)
		}
		went <- time.Since(start)
	}()
	time.Sleep(time.Second)
	synctest.Wait()
	for _, r := range rates {
		if err := p.SetRate(r); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return <-went
}
