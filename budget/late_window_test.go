package budget_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// TestALateWindowIsSpentWithoutARefusal: a provider with a fixed window of
// 1,200 a minute that announces it (RateLimit-Policy 1200;w=60 and the
// RateLimit-* state), met 20 s before its window ends, answers in 150-450 ms,
// banning at the fifth refusal in a minute (Binance's way), called by 32
// workers through a default Provider. The rest of the window is spread over
// the 20 s left and a round trip: the Remaining each answer carries leaves
// out the requests in flight, and spread over the 20 s alone, the window
// ran out before its end, 7 requests were refused and the client banned.
func TestALateWindowIsSpentWithoutARefusal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(providertest.Config{
			Limit:   providertest.Limit{Count: 1200, Window: time.Minute},
			Headers: providertest.Headers{IETF: true, IETFPolicy: true},
			Latency: 150 * time.Millisecond, Jitter: 300 * time.Millisecond,
			Answer: providertest.Answer{BanAfter: 5}, // Binance's: the fifth refusal in a minute bans for 2 minutes
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := budget.NewLocal("late", budget.Config{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Second) // the bubble's clock starts on a whole minute: 20 s of the window are left
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		drive(ctx, p, 32, simAttempt(srv.Client().Transport, nil))
		st := srv.Stats()
		t.Logf("%d requests, %d served, %d refused, %d bans", st.Requests, st.OK, st.Throttled+st.Banned, st.Bans)
		if st.Throttled+st.Banned > 0 || st.Bans > 0 {
			t.Errorf("1200 a minute, met 20 s before its reset: %d of %d requests refused, %d bans; want none", st.Throttled+st.Banned, st.Requests, st.Bans)
		}
	})
}
