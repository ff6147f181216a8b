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

// TestARestoredRateOverTheLimitIsNeverBanned: a learned rate restored at
// start over what the provider now serves (its limit fell while the
// collector was down, or a hand-edited record) is never worse than no
// record: no ban from a provider that bans after 5 refusals a minute, at
// 1, 4 and 16 workers. A restored rate went out at once from every
// worker: the first burst drew a refusal from each request in flight,
// and one more after the pause was the fifth (banned 1.1 s after the
// start; at 100x the limit, 5 bans and nothing served in 10 minutes).
func TestARestoredRateOverTheLimitIsNeverBanned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit, restored float64
		confirmed       bool
	}{{100, 1000, true}, {50, 500, false}, {10, 100, true}, {100, 10000, true}} {
		for _, workers := range []int{1, 4, 16} {
			var bans int64
			var share float64
			synctest.Test(t, func(t *testing.T) {
				store := checkpoint.NewMemoryStore(checkpoint.Config{})
				r := forage.ProviderRecord{Key: "sim", Rate: tc.restored, Ceiling: tc.restored, Confirmed: tc.confirmed}
				if err := store.SaveRecord(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				srv, err := providertest.New(providertest.Config{Seed: 1, Limit: providertest.Limit{Rate: tc.limit, Burst: 1},
					Answer: providertest.Answer{BanAfter: 5}, Latency: 3 * time.Millisecond, Jitter: 2 * time.Millisecond,
					Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
				if err != nil {
					t.Fatal(err)
				}
				p, err := budget.NewLocal("sim", budget.Config{Records: store})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				drive(ctx, p, workers, simAttempt(srv.Client().Transport, nil))
				st := srv.Stats()
				bans, share = st.Bans, float64(st.OK)/(tc.limit*120)
			})
			if bans > 0 || share < 0.5 {
				t.Errorf("limit %v/s, restored %v/s, %d workers: %d bans, %.0f%% served in 2 min; want none, >= 50%%",
					tc.limit, tc.restored, workers, bans, 100*share)
			}
		}
	}
}
