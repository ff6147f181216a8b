package aimd_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
)

// TestAFuzzyEdgeIsNotARisenLimit: a provider that allows little or no
// burst, that requests reach up to tens of milliseconds late (a busy
// machine, a jittery path), and that bans at the fifth refusal in a
// minute, has no sharp edge: a jitter cut leaves the ceiling under where
// it refuses, and the probe passes that ceiling by a tenth with no
// refusal though the limit never moved. Read as a limit that rose, the
// probe went on at the unconfirmed pace, was far over the edge when the
// refusal came back, and the climbs back under a ceiling set 0.95 under
// that rate drew the fifth refusal of the minute: each of these was
// banned (none was before the rule, nor is with a fifth as the mark).
func TestAFuzzyEdgeIsNotARisenLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit           float64
		burst           int
		latency, jitter time.Duration
		late            time.Duration
		seed            uint64
	}{
		{78.9, 2, 100 * time.Millisecond, 0, 24 * time.Millisecond, 51},
		{101.2, 3, 35 * time.Millisecond, 12 * time.Millisecond, 44 * time.Millisecond, 2097},
		{120.7, 3, 14 * time.Millisecond, 50 * time.Millisecond, 32 * time.Millisecond, 2797},
		{132.3, 1, 78 * time.Millisecond, 49 * time.Millisecond, 36 * time.Millisecond, 242},
		{94.5, 1, 24 * time.Millisecond, 1 * time.Millisecond, 50 * time.Millisecond, 419},
		{106.8, 3, 10 * time.Millisecond, 0, 50 * time.Millisecond, 2535},
	} {
		srv := gcra(tc.limit, tc.burst, answerBan)()
		rng := rand.New(rand.NewPCG(tc.seed, 9))
		srv.late = func() time.Duration { return time.Duration(rng.Int64N(int64(tc.late))) }
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if r := simulate(c, srv, 5*time.Minute, tc.latency, tc.jitter); r.bans > 0 {
			t.Errorf("%.1f/s burst %d, %v away (+%v), up to %v late: %d bans, %d refused in a minute at most; want none (%s)",
				tc.limit, tc.burst, tc.latency, tc.jitter, tc.late, r.bans, r.perMinute, r)
		}
	}
}
