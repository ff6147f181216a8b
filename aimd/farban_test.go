package aimd_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/aimd"
)

// TestPropertyAnAllowanceFarAwayIsNeverBanned: a provider of 4-60
// requests a second with an allowance of 2-25, 10-60 ms away (and up to a
// third more), that answers 429 with Retry-After and bans after 5 refused
// requests a minute, is never triggered in a minute, however many
// requests are in flight. The allowance hides the limit from slow start;
// what ends slow start is the allowance running out, and every request
// then in flight over the limit is refused. Doubling every 250 ms, slow
// start was at several times the limit by then: 47/s with an allowance of
// 24, 34 ms away, was left at 198/s with seven requests refused in flight,
// a ban. Its pace is now fitted to the round trip (see exitAccel), the
// echoes of its end lower the rate by what they show (see echoCut), and
// the fourth refused request of the minute holds the rate at what the
// provider surely admits.
func TestPropertyAnAllowanceFarAwayIsNeverBanned(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(4, 60).Draw(t, "limit")
		burst := rapid.IntRange(2, 25).Draw(t, "burst")
		latency := time.Duration(rapid.IntRange(10, 60).Draw(t, "latency_ms")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if r := simulate(c, gcra(limit, burst, answerBan)(), time.Minute, latency, latency/3); r.bans > 0 {
			t.Fatalf("banned: %d refused in a minute at most (%s)", r.perMinute, r)
		}
	})
}
