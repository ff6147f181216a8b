package aimd_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
)

// A provider that answers every refusal at its rate limit with a long
// Retry-After (60 s): each refusal costs a minute of it. Read as a spent
// window, each cycle's delivered rate set an unconfirmed ceiling that the
// fast climb left within seconds, into the next refusal: 20 s of calls in
// every 80, 8-10% of the limit for good. The fast climb now stops a
// margin under the rate the long refusal came at, and the probe above a
// confirmed ceiling takes ten pauses' time.
func TestALongRetryAfterAtEveryRefusalIsNotACycle(t *testing.T) {
	t.Parallel()
	for _, p := range []struct {
		rate  float64
		burst int
	}{{201, 18}, {88.3, 2}, {23.8, 6}, {15.2, 8}} {
		srv := gcra(p.rate, p.burst, answer429)()
		srv.fixedRA = time.Minute
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		r := simulate(c, srv, 10*time.Minute, 3*time.Millisecond, 2*time.Millisecond)
		t.Logf("%.1f/s burst %d, Retry-After 60 s: %s final %.1f/s", p.rate, p.burst, r, r.finalRate)
		if r.goodput < 0.5 || r.finalRate < 0.8*p.rate {
			t.Errorf("%.1f/s burst %d answering each refusal with 60 s: goodput %.1f%% over 10 minutes, final rate %.1f/s; want >= 50%%, >= 80%% of the limit",
				p.rate, p.burst, 100*r.goodput, r.finalRate)
		}
	}
}
