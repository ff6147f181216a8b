package budget_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/providertest"
)

// TestRestartsNeverRatchetTheLearnedRateDown: a provider that names its
// limit with 429 (20/s, no burst) and fails 3% of requests with a random
// 503 is collected by ten 10-second runs in a row, each a new process that
// starts from the provider's saved record, a second after the last one
// ended or at once. Each run after the first serves at least 70% of the
// limit (a restart at once waits out the Retry-After its first request
// draws), and the rate saved at the end is at least 80% of it.
//
// Two ratchets broke it. A restarted process forgot that the provider
// names its limit with 429, read its random 503s as load shedding, cut,
// and saved the lower rate for the next one (a second apart: 15, 13, 12, 9
// ... 4/s). And a process restarted at once had its first request refused
// for the last requests of the one before (the provider's allowance not
// refilled yet), cut its restored ceiling for it, and saved that (15, 13,
// 12 ... 7/s).
func TestRestartsNeverRatchetTheLearnedRateDown(t *testing.T) {
	t.Parallel()
	for _, gap := range []time.Duration{time.Second, 0} {
		t.Run("restart after "+gap.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { restartsHold(t, gap) })
		})
	}
}

// restartsHold runs the restarts of TestRestartsNeverRatchetTheLearnedRateDown,
// gap apart.
func restartsHold(t *testing.T, gap time.Duration) {
	const limit, runs, runFor = 20.0, 10, 10 * time.Second
	srv, err := providertest.New(providertest.Config{Seed: 3, Limit: providertest.Limit{Rate: limit, Burst: 1},
		FaultRate: 0.03, Faults: []providertest.Fault{http.StatusServiceUnavailable},
		Latency: 3 * time.Millisecond, Jitter: 3 * time.Millisecond,
		Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
	if err != nil {
		t.Fatal(err)
	}
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	attempt := simAttempt(srv.Client().Transport, nil)
	var served []float64
	var before int64
	for run := range runs {
		p, err := budget.NewLocal("sim", budget.Config{Records: store})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), runFor)
		drive(ctx, p, 3, attempt)
		cancel()
		synctest.Wait() // the background save is over
		ok := srv.Stats().OK
		served = append(served, float64(ok-before)/runFor.Seconds())
		before = ok
		if run > 0 && served[run] < 0.7*limit {
			t.Fatalf("run %d of %d (a restart from the saved record %v after the last) served %.1f/s of a %v/s limit; per run %.1f",
				run+1, runs, gap, served[run], limit, served)
		}
		time.Sleep(gap)
	}
	rec, _, err := store.LoadRecord(context.Background(), "sim")
	if err != nil || rec.Rate < 0.8*limit {
		t.Fatalf("after %d runs the saved rate is %.1f/s (%v); want at least 80%% of the %v/s limit; served per run %.1f", runs, rec.Rate, err, limit, served)
	}
	t.Logf("served per run, requests/s: %.1f; saved rate %.1f/s", served, rec.Rate)
}
