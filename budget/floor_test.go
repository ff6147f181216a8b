package budget_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/providertest"
)

// TestARateLeftAtTheFloorRecovers: a process restarted after an outage had
// driven its provider's rate to the aimd floor (0.05/s, an unconfirmed
// ceiling from slow start's first refusal) climbs again as soon as the
// provider answers, without drawing refusals. It sent one request in 10 s:
// the first success after the restore earned no climb, and the next slot
// was 20 s away.
func TestARateLeftAtTheFloorRecovers(t *testing.T) {
	t.Parallel()
	for _, pause := range []time.Duration{0, 10 * time.Second, time.Minute} {
		testAFloorRecovers(t, pause)
	}
}

// testAFloorRecovers is TestARateLeftAtTheFloorRecovers with the record's
// pause (the outage's last Retry-After) ending pause after the restore:
// the 10 s are counted from its end. (With one, the hold after the pause
// stopped the first success's climb: 1 request in the 10 s.)
func testAFloorRecovers(t *testing.T, pause time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		rec := forage.ProviderRecord{Key: "sim", Rate: 0.05, Ceiling: 3.8}
		if pause > 0 {
			rec.PausedUntil = time.Now().Add(pause)
		}
		if err := store.SaveRecord(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		srv, err := providertest.New(providertest.Config{Seed: 7, Limit: providertest.Limit{Rate: 20, Burst: 1},
			Latency: 3 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := budget.NewLocal("sim", budget.Config{Records: store})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), pause+10*time.Second)
		defer cancel()
		drive(ctx, p, 3, simAttempt(srv.Client().Transport, nil))
		if st := srv.Stats(); st.OK < 20 || st.Throttled > 0 {
			t.Errorf("10 s after a restore at 0.05/s against a 20/s provider (a pause of %v first): %d ok, %d refused; want 20 or more, none refused", pause, st.OK, st.Throttled)
		}
	})
}
