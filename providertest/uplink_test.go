package providertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/providertest"
)

// serverDelay sends GET /api/v3/time through s's transport and returns how
// long after sending the server decided (its serverTime) and the round trip.
func serverDelay(tb fataler, s *providertest.Server) (arrival, roundTrip time.Duration) {
	tb.Helper()
	start := time.Now()
	r := get(tb, s.Client(), inMemory, "/api/v3/time", nil)
	var body struct{ ServerTime int64 }
	if err := json.Unmarshal(r.body, &body); r.status != 200 || err != nil {
		tb.Fatalf("time: %d %s (%v)", r.status, r.body, err)
	}
	return time.UnixMilli(body.ServerTime).Sub(start), time.Since(start)
}

// TestUplinkDelaysArrival checks the uplink is waited out before the server
// decides: serverTime is Uplink plus a jitter in [0, UplinkJitter) after the
// send, the jitter varies, and the round trip adds the latency after it.
func TestUplinkDelaysArrival(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, providertest.Config{Uplink: 10 * time.Millisecond, UplinkJitter: 20 * time.Millisecond, Latency: 5 * time.Millisecond})
		lo, hi := time.Hour, time.Duration(0)
		for i := range 200 {
			time.Sleep(time.Millisecond - time.Duration(time.Now().UnixNano())%time.Millisecond) // send on a whole ms
			arrival, rt := serverDelay(t, s)
			if arrival < 10*time.Millisecond || arrival >= 30*time.Millisecond || rt-arrival < 5*time.Millisecond || rt-arrival >= 6*time.Millisecond {
				t.Fatalf("request %d: arrived after %v, answered after %v; want arrival in [10ms, 30ms) and the 5ms latency after it", i, arrival, rt)
			}
			lo, hi = min(lo, arrival), max(hi, arrival)
		}
		if hi-lo < 15*time.Millisecond {
			t.Fatalf("arrivals spread over [%v, %v] only: the jitter is not drawn per request", lo, hi)
		}
	})
}

// TestUplinkTailHoldsAShare checks the tail: about UplinkTailShare of the
// requests arrive later than Uplink plus its jitter, by an exponential
// extra of mean UplinkTail, and the rest as without it.
func TestUplinkTailHoldsAShare(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		s := newServer(t, providertest.Config{Seed: 5, Uplink: time.Millisecond, UplinkJitter: time.Millisecond, UplinkTail: 4 * time.Millisecond, UplinkTailShare: 0.2})
		var held int
		var extra time.Duration
		for range n {
			time.Sleep(time.Millisecond - time.Duration(time.Now().UnixNano())%time.Millisecond) // send on a whole ms
			arrival, _ := serverDelay(t, s)
			if arrival < time.Millisecond {
				t.Fatalf("arrived after %v, under the Uplink", arrival)
			}
			if arrival >= 2*time.Millisecond {
				held++
				extra += arrival - 2*time.Millisecond
			}
		}
		// A held request whose extra rounds under the jitter's millisecond
		// is not seen held: exp(-1ms/4ms) of them are, at a mean extra of 4ms.
		if held < n*13/100 || held > n*23/100 {
			t.Fatalf("%d of %d held past the jitter, want about 20%% x exp(-1/4) = 16%%", held, n)
		}
		if mean := extra / time.Duration(held); mean < 3*time.Millisecond || mean > 5*time.Millisecond {
			t.Fatalf("held requests arrived %v past the jitter on average, want about 4ms (the exponential's mean)", mean)
		}
	})
}

// TestUplinkJitterRefusesAtTheRate is why the uplink exists: a client that
// sends exactly at a burst-1 GCRA's rate is never refused when requests
// arrive as sent, and is refused sometimes when they arrive jittered (a
// request delayed less than the one before it comes early).
func TestUplinkJitterRefusesAtTheRate(t *testing.T) {
	t.Parallel()
	refused := func(jitter time.Duration) (n int64) {
		synctest.Test(t, func(t *testing.T) {
			s := newServer(t, providertest.Config{Seed: 3, Limit: providertest.Limit{Rate: 10, Burst: 1}, UplinkJitter: jitter})
			var wg sync.WaitGroup
			for range 200 {
				wg.Go(func() { get(t, s.Client(), inMemory, "/api/v3/time", nil) })
				time.Sleep(100 * time.Millisecond)
			}
			wg.Wait()
			st := s.Stats()
			if st.Requests != 200 {
				t.Fatalf("jitter %v: %d requests reached the server, want 200", jitter, st.Requests)
			}
			n = st.Throttled
		})
		return n
	}
	if n := refused(0); n != 0 {
		t.Fatalf("no uplink jitter: %d of 200 refused, want 0", n)
	}
	if n := refused(50 * time.Millisecond); n < 10 || n > 150 {
		t.Fatalf("50ms uplink jitter: %d of 200 refused, want some (10 to 150)", n)
	}
}

// TestUplinkHonoursContext checks a request whose context ends during the
// uplink returns the context's error and never reaches the server.
func TestUplinkHonoursContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, providertest.Config{Uplink: 50 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := tryGet(ctx, s.Client(), inMemory, "/api/v3/time", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want deadline exceeded", err)
		}
		if st := s.Stats(); st.Requests != 0 {
			t.Fatalf("a request cut during the uplink reached the server: %+v", st)
		}
	})
}
