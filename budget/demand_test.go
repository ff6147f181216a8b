package budget_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// TestAQuietCallerMeetsTheLimitOnce: a caller that used a fraction of
// what the provider allows (one worker, 100 ms away: 10/s against 50/s)
// and then calls it with 32 workers meets the limit as slow start does,
// with a refusal or a few, and goes on at it. The rate had climbed on the
// quiet caller's successes to 1088/s, and the 32 workers drew 30 refusals
// at once and got 3 requests through in the next 5 s.
func TestAQuietCallerMeetsTheLimitOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(providertest.Config{Seed: 7, Limit: providertest.Limit{Rate: 50, Burst: 1},
			Latency: 100 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := budget.NewLocal("sim", budget.Config{})
		if err != nil {
			t.Fatal(err)
		}
		attempt := simAttempt(srv.Client().Transport, nil)
		quiet, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		drive(quiet, p, 1, attempt)
		before := srv.Stats()
		if r := p.Snapshot().Rate; r > 50 {
			t.Errorf("rate %.1f after 20 s of a caller sending about 10/s, want at most 50 (5 times what it sent)", r)
		}
		busy, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel2()
		drive(busy, p, 32, attempt)
		after := srv.Stats()
		ok, refused := after.OK-before.OK, after.Throttled-before.Throttled
		t.Logf("quiet: %d ok, %d refused; then 32 workers for 5 s: %d ok, %d refused, rate %.1f", before.OK, before.Throttled, ok, refused, p.Snapshot().Rate)
		if before.Throttled != 0 || refused > 8 || ok < 100 {
			t.Errorf("32 workers after a quiet caller: %d ok and %d refused in 5 s (%d refused before), want at least 100 ok and at most 8 refused", ok, refused, before.Throttled)
		}
	})
}
