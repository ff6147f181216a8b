package aimd_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// TestABucketOfOnesResetIsNoPause: a token bucket that allows no burst
// and sends usage headers says "Limit 1, Remaining 0, Reset 1" after every
// request it admits, and on every request it refuses or a gateway behind
// it fails: the Reset is one interval rounded up to a second. After
// answers that came faster than that, neither its 503 nor a 502 pauses
// the provider for that second (each 503 paused a second, and a 10/s
// provider was served 16% of its rate over 5 s, 78% over 30 s; with 5% of
// 502s too, each pausing a second, 44-58%). A refusal that says so from a
// provider whose answers came a second apart (a window of one a second),
// or from a quota of more than one (a window of a second, a bigger
// bucket's time to refill), still pauses until its reset.
func TestABucketOfOnesResetIsNoPause(t *testing.T) {
	t.Parallel()
	quota := func(limit float64) forage.Quota {
		return forage.Quota{Limit: limit, Remaining: 0, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true}
	}
	for _, tc := range []struct {
		name      string
		gap       time.Duration // between the successes before the answer
		limit     float64
		class     forage.Class
		wantPause bool
	}{
		{"bucket of one at 10/s, 503", 100 * ms, 1, forage.Overloaded, false},
		{"bucket of one at 10/s, bare 429", 100 * ms, 1, forage.Throttled, false},
		{"bucket of one at 10/s, 502", 100 * ms, 1, forage.Transient, false},
		{"bucket of one at 10/s, 404", 100 * ms, 1, forage.Permanent, false},
		{"window of one a second, 503", time.Second, 1, forage.Overloaded, true},
		{"window of one a second, 502", time.Second, 1, forage.Transient, false},
		{"window of 20 a second, 503", 100 * ms, 20, forage.Overloaded, true},
	} {
		c := mustNew(t, aimd.Config{Initial: 10})
		now := t0
		for i := range 4 {
			now = t0.Add(time.Duration(i) * tc.gap)
			left := 0.0
			if tc.limit > 1 {
				left = tc.limit - 1 - float64(i) // a window says 0 left only at its last request
			}
			q := quota(tc.limit)
			q.Remaining = max(left, 0)
			c.ObserveAt(now, aimd.Signal{Class: forage.Success, Sent: now.Add(-5 * ms), Quota: q})
		}
		now = now.Add(tc.gap)
		c.ObserveAt(now, aimd.Signal{Class: tc.class, Sent: now.Add(-5 * ms), Quota: quota(tc.limit)})
		pause := c.Snapshot().PausedUntil
		if paused := pause.After(now); paused != tc.wantPause {
			t.Errorf("%s: paused until now+%v; want a pause: %v", tc.name, pause.Sub(now), tc.wantPause)
		}
		if tc.wantPause && !pause.Equal(now.Add(time.Second)) {
			t.Errorf("%s: paused until now+%v, want now+1s", tc.name, pause.Sub(now))
		}
	}
}
