package forage_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage"
)

// TestParseQuotaReadsTheResetOfTheSpentLine: a gateway (10 a second, spent,
// reset in 1 s) and the origin (5000 an hour, 4000 left, reset in an hour)
// each set the separate headers. The quota spent is the gateway's, and it is
// back in a second: read with the origin's hour-long reset, the provider
// was paused an hour for a second's quota.
func TestParseQuotaReadsTheResetOfTheSpentLine(t *testing.T) {
	h := header("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1",
		"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4000", "X-RateLimit-Reset", "3600")
	q, _ := forage.ParseQuota(h, rlNow)
	if !q.HasRemaining || q.Remaining != 0 || !q.HasReset || q.Reset != time.Second {
		t.Errorf("ParseQuota = %+v; want 0 left, reset in 1s (the spent line's)", q)
	}
	// Either order.
	h = header("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4000", "X-RateLimit-Reset", "3600",
		"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1")
	if q, _ := forage.ParseQuota(h, rlNow); q.Remaining != 0 || q.Reset != time.Second {
		t.Errorf("ParseQuota (origin first) = %+v; want 0 left, reset in 1s", q)
	}
	if n := testing.AllocsPerRun(100, func() { forage.ParseQuota(h, rlNow) }); n != 0 {
		t.Errorf("ParseQuota of several lines allocates %v times; want 0", n)
	}
}

// TestParseQuotaPairedResetFallsBack: the spent line's reset is no number;
// the other line's is still read rather than none.
func TestParseQuotaPairedResetFallsBack(t *testing.T) {
	h := header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "garbage",
		"X-RateLimit-Remaining", "n/a", "X-RateLimit-Reset", "5")
	if q, _ := forage.ParseQuota(h, rlNow); !q.HasReset || q.Reset != 5*time.Second {
		t.Errorf("ParseQuota = %+v; want the reset of the line that gives one, 5s", q)
	}
}
