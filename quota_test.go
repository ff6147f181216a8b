package forage_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/forage-go/forage"
)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// rlNow is the reference time of the rate-limit tests: recent enough that
// Unix times in reset headers are above the 1e9 epoch threshold.
var rlNow = time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)

func TestParseQuota(t *testing.T) {
	t.Parallel()
	epoch := strconv.FormatInt(rlNow.Unix()+30, 10)
	tests := []struct {
		name string
		h    http.Header
		want forage.Quota
	}{
		{"none", header("Content-Type", "text/plain"), forage.Quota{}},
		// A gateway and the origin each set the header: the more cautious
		// line is read, whatever their order (the first alone missed a
		// spent quota).
		{"two Remaining lines: the least left",
			header("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"),
			forage.Quota{Limit: 100, Remaining: 0, Reset: 30 * time.Second, HasLimit: true, HasRemaining: true, HasReset: true}},
		{"two Reset lines: the latest",
			header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1", "X-RateLimit-Reset", epoch),
			forage.Quota{Remaining: 0, Reset: 30 * time.Second, HasRemaining: true, HasReset: true}},
		{"two Limit and Used lines: the least limit, the most used",
			header("RateLimit-Limit", "5000", "RateLimit-Limit", "60", "RateLimit-Used", "60", "RateLimit-Used", "3"),
			forage.Quota{Limit: 60, Used: 60, HasLimit: true, HasUsed: true}},
		{"a line that is no number does not hide one that is",
			header("X-RateLimit-Remaining", "n/a", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "garbage", "X-RateLimit-Reset", "5"),
			forage.Quota{Remaining: 0, Reset: 5 * time.Second, HasRemaining: true, HasReset: true}},
		{"IETF structured, older draft",
			header("RateLimit", "limit=100, remaining=50, reset=5", "RateLimit-Policy", "100;w=60"),
			forage.Quota{Limit: 100, Remaining: 50, Reset: 5 * time.Second, Window: time.Minute, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}},
		{"IETF structured, current draft",
			header("RateLimit", `"default";r=50;t=30`, "RateLimit-Policy", `"default";q=100;w=60`),
			forage.Quota{Limit: 100, Remaining: 50, Reset: 30 * time.Second, Window: time.Minute, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}},
		{"IETF structured, the policy that binds: least left per second",
			header("RateLimit", `"burst";r=1;t=2, "day";r=900;t=3600`),
			forage.Quota{Remaining: 900, Reset: time.Hour, HasRemaining: true, HasReset: true}},
		{"the policy that binds, listed last",
			header("RateLimit", `"minute";r=50;t=30, "day";r=2;t=3600`, "RateLimit-Policy", `"minute";q=100;w=60, "day";q=1000;w=86400`),
			forage.Quota{Limit: 1000, Remaining: 2, Reset: time.Hour, Window: 24 * time.Hour, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}},
		{"of spent policies, the one that resets last",
			header("RateLimit", `"second";r=0;t=1, "hour";r=0;t=600, "minute";r=0;t=40`),
			forage.Quota{Remaining: 0, Reset: 10 * time.Minute, HasRemaining: true, HasReset: true}},
		{"the first, when none gives both",
			header("RateLimit", `"burst";r=1, "day";t=3600`),
			forage.Quota{Remaining: 1, HasRemaining: true}},
		{"the state's policy by name",
			header("RateLimit", `"day";r=0;t=3000`, "RateLimit-Policy", `"burst";q=10;w=1, "day";q=1000;w=86400`),
			forage.Quota{Limit: 1000, Remaining: 0, Reset: 3000 * time.Second, Window: 24 * time.Hour, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}},
		{"no field from another policy's state",
			header("RateLimit", `"burst";r=1, "day";r=900;t=3600`),
			forage.Quota{Remaining: 900, Reset: time.Hour, HasRemaining: true, HasReset: true}},
		{"a state whose policy is not announced",
			header("RateLimit", `"hour";r=5;t=60`, "RateLimit-Policy", `"day";q=1000;w=86400`),
			forage.Quota{Remaining: 5, Reset: time.Minute, HasRemaining: true, HasReset: true}},
		{"a window too short to be one",
			header("RateLimit-Policy", `"p";q=10;w=0.0000000001`),
			forage.Quota{Limit: 10, HasLimit: true}},
		{"policy ignores state keys",
			header("RateLimit-Policy", `"p";q=10;w=1;r=5;t=9`),
			forage.Quota{Limit: 10, Window: time.Second, HasLimit: true, HasWindow: true}},
		{"IETF separate headers with policy list",
			header("RateLimit-Limit", "100, 100;w=60, 1000;w=3600", "RateLimit-Remaining", "0", "RateLimit-Reset", "17"),
			forage.Quota{Limit: 100, Remaining: 0, Reset: 17 * time.Second, Window: time.Minute, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}},
		{"X-RateLimit delta reset",
			header("X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "59", "X-RateLimit-Reset", "42"),
			forage.Quota{Limit: 60, Remaining: 59, Reset: 42 * time.Second, HasLimit: true, HasRemaining: true, HasReset: true}},
		{"X-RateLimit epoch reset (GitHub)",
			header("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Used", "1", "X-RateLimit-Reset", epoch),
			forage.Quota{Limit: 5000, Remaining: 4999, Used: 1, Reset: 30 * time.Second, HasLimit: true, HasRemaining: true, HasUsed: true, HasReset: true}},
		{"X-RateLimit epoch milliseconds",
			header("X-RateLimit-Reset", epoch+"500"),
			forage.Quota{Reset: 30*time.Second + 500*time.Millisecond, HasReset: true}},
		{"X-RateLimit epoch in the past",
			header("X-RateLimit-Reset", strconv.FormatInt(rlNow.Unix()-100, 10)),
			forage.Quota{Reset: 0, HasReset: true}},
		{"X-RateLimit float counts (Reddit)",
			header("X-Ratelimit-Remaining", "598.0", "X-Ratelimit-Used", "2", "X-Ratelimit-Reset", "349"),
			forage.Quota{Remaining: 598, Used: 2, Reset: 349 * time.Second, HasRemaining: true, HasUsed: true, HasReset: true}},
		{"Reset-After wins over epoch Reset (Discord)",
			header("X-RateLimit-Reset", epoch, "X-RateLimit-Reset-After", "1.25"),
			forage.Quota{Reset: 1250 * time.Millisecond, HasReset: true}},
		{"X-Rate-Limit (Twitter)",
			header("X-Rate-Limit-Limit", "15", "X-Rate-Limit-Remaining", "14"),
			forage.Quota{Limit: 15, Remaining: 14, HasLimit: true, HasRemaining: true}},
		{"IETF wins over X-RateLimit, whole: no field is borrowed",
			header("RateLimit-Remaining", "5", "X-RateLimit-Remaining", "9", "X-RateLimit-Limit", "10"),
			forage.Quota{Remaining: 5, HasRemaining: true}},
		{"families read apart: no window from an unrelated Binance header",
			header("RateLimit-Limit", "600", "RateLimit-Remaining", "599", "RateLimit-Reset", "30", "X-MBX-USED-WEIGHT-1M", "1"),
			forage.Quota{Limit: 600, Remaining: 599, Reset: 30 * time.Second, HasLimit: true, HasRemaining: true, HasReset: true}},
		{"Binance only when no other family",
			header("X-RateLimit-Limit", "60", "X-MBX-USED-WEIGHT-1M", "7"),
			forage.Quota{Limit: 60, HasLimit: true}},
		{"reset capped",
			header("X-RateLimit-Reset", "999999999"),
			forage.Quota{Reset: forage.MaxRetryAfter, HasReset: true}},
		{"Binance 1m",
			header("X-MBX-USED-WEIGHT-1M", "1200", "X-MBX-USED-WEIGHT", "1200"),
			forage.Quota{Used: 1200, Window: time.Minute, HasUsed: true, HasWindow: true}},
		{"Binance shortest interval wins",
			header("X-MBX-USED-WEIGHT-1D", "50000", "X-MBX-USED-WEIGHT-10S", "30", "X-MBX-USED-WEIGHT-1M", "900"),
			forage.Quota{Used: 30, Window: 10 * time.Second, HasUsed: true, HasWindow: true}},
		{"Binance bare header only",
			header("X-MBX-USED-WEIGHT", "7"),
			forage.Quota{Used: 7, HasUsed: true}},
		{"Binance non-canonical key",
			http.Header{"x-mbx-used-weight-2h": {"3"}},
			forage.Quota{Used: 3, Window: 2 * time.Hour, HasUsed: true, HasWindow: true}},
		{"Binance bad suffixes ignored",
			header("X-MBX-USED-WEIGHT-1Y", "1", "X-MBX-USED-WEIGHT-M", "2", "X-MBX-USED-WEIGHT-0M", "3", "X-MBX-USED-WEIGHTS", "4", "X-MBX-USED-WEIGHT-99999999D", "5"),
			forage.Quota{}},
		{"garbage ignored",
			header("RateLimit", "limit=-1, remaining=nan, reset=inf, w=1e3", "X-RateLimit-Limit", "0x10", "X-RateLimit-Remaining", "+5",
				"X-RateLimit-Reset", "soon", "RateLimit-Policy", "1.2.3;w=-60", "X-MBX-USED-WEIGHT-1M", "lots"),
			forage.Quota{}},
		{"window over a year ignored",
			header("RateLimit-Policy", "100;w=99999999"),
			forage.Quota{Limit: 100, HasLimit: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := forage.ParseQuota(tt.h, rlNow)
			if diff := cmp.Diff(tt.want, got); diff != "" || ok != anyKnown(tt.want) {
				t.Fatalf("ParseQuota(%v) ok=%v (-want +got):\n%s", tt.h, ok, diff)
			}
		})
	}
}

// TestAnEpochResetOnAClockBefore2001: a Unix time within a year of a clock
// set before the 1e9 threshold (testing/synctest's starts in 2000) is still
// a Unix time, in seconds and in milliseconds; it was read as 30 years of
// delta seconds, and paused the provider for the longest pause allowed.
func TestAnEpochResetOnAClockBefore2001(t *testing.T) {
	t.Parallel()
	now := time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range []string{strconv.FormatInt(now.Unix()+60, 10), strconv.FormatInt(now.Unix()+60, 10) + "000"} {
		q, ok := forage.ParseQuota(header("X-RateLimit-Reset", v), now)
		if !ok || q.Reset != time.Minute {
			t.Errorf("X-RateLimit-Reset: %s at %v: Reset %v (ok %v), want 1m0s", v, now, q.Reset, ok)
		}
	}
	// A delta stays a delta at any clock, even one at 1970.
	if q, _ := forage.ParseQuota(header("X-RateLimit-Reset", "60"), time.Unix(30, 0)); q.Reset != time.Minute {
		t.Errorf("X-RateLimit-Reset: 60 at 1970: Reset %v, want 1m0s", q.Reset)
	}
}

// TestParseQuotaInvariants: for headers assembled from random pieces of
// valid and invalid syntax, the result keeps its invariants (see
// checkRateLimit).
func TestParseQuotaInvariants(t *testing.T) {
	t.Parallel()
	piece := rapid.SampledFrom([]string{
		"limit=", "remaining=", "reset=", "q=", "r=", "t=", "w=", `"p"`, ",", ";", " ", "=", "\"",
		"0", "1", "60", "1.5", "-1", "1e9", "nan", "1700000000", "1700000000000", "99999999999999999999",
	})
	value := rapid.Custom(func(rt *rapid.T) string {
		s := ""
		for _, p := range rapid.SliceOfN(piece, 0, 12).Draw(rt, "pieces") {
			s += p
		}
		return s
	})
	keys := rapid.SampledFrom([]string{
		"RateLimit", "RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
		"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Used", "X-RateLimit-Reset", "X-RateLimit-Reset-After",
		"X-MBX-USED-WEIGHT", "X-MBX-USED-WEIGHT-1M", "X-MBX-USED-WEIGHT-10S", "X-MBX-USED-WEIGHT-1r",
	})
	rapid.Check(t, func(rt *rapid.T) {
		h := http.Header{}
		for range rapid.IntRange(0, 8).Draw(rt, "headers") {
			h.Add(keys.Draw(rt, "key"), value.Draw(rt, "value"))
		}
		r, ok := forage.ParseQuota(h, rlNow)
		if ok != anyKnown(r) || r.Limit < 0 || r.Remaining < 0 || r.Used < 0 ||
			r.Reset < 0 || r.Reset > forage.MaxRetryAfter || r.Window < 0 || r.Window > 366*24*time.Hour {
			rt.Fatalf("ParseQuota(%v) = %+v, %v", h, r, ok)
		}
	})
}

func TestParseQuotaAllocs(t *testing.T) {
	h := header("X-MBX-USED-WEIGHT-1M", "1200", "RateLimit", "limit=100, remaining=50, reset=5")
	if n := testing.AllocsPerRun(100, func() { forage.ParseQuota(h, rlNow) }); n != 0 {
		t.Fatalf("ParseQuota allocates %v times; want 0", n)
	}
}

func BenchmarkParseQuota(b *testing.B) {
	h := header("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Reset", "1700000000",
		"X-MBX-USED-WEIGHT-1M", "1200", "Content-Type", "application/json")
	b.ReportAllocs()
	for b.Loop() {
		forage.ParseQuota(h, rlNow)
	}
}

// anyKnown reports whether q has any field the headers gave.
func anyKnown(q forage.Quota) bool {
	return q.HasLimit || q.HasRemaining || q.HasUsed || q.HasReset || q.HasWindow
}
