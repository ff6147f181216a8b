package breaker_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
)

// Tests of the trip rule against traffic: how fast a warm breaker with the
// default Config opens on an outage. The noise side (random failures never
// open it) is in property_test.go.

// traffic drives b at rate requests per second, sequentially, the i-th
// request at i/rate after the call, reporting outcome(at) for it, until the
// breaker opens or limit has passed. It returns when, since the call, the
// request whose report opened the breaker was sent, or -1 if it stayed
// closed.
func traffic(tb testing.TB, b *breaker.Breaker, rate int, limit time.Duration, outcome func(at time.Duration) forage.Class) time.Duration {
	tb.Helper()
	start := time.Now()
	for i := int64(0); ; i++ {
		at := time.Duration(i * int64(time.Second) / int64(rate))
		if at > limit {
			return -1
		}
		time.Sleep(time.Until(start.Add(at)))
		done, err := b.Allow()
		if err != nil {
			tb.Fatalf("request %d at %v: Allow() = %v, with the breaker closed after the last report", i, at, err)
		}
		done(outcome(at))
		if b.State() == breaker.StateOpen {
			return at
		}
	}
}

// TestOutageAfterWarmTrafficOpensWithinFiveSeconds is issue 11: after a
// minute of success, a total outage opens the breaker within 5s at 2 to
// 200 requests/s (and within MinRequests requests at 1 request/s), by the
// burst rule, wherever the outage begins within a bucket. It logs the
// slowest detection time per rate.
func TestOutageAfterWarmTrafficOpensWithinFiveSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rate  int // requests per second
		limit time.Duration
	}{
		{1, 9 * time.Second}, // nine failures, one a second
		{2, 5 * time.Second},
		{3, 5 * time.Second},
		{5, 5 * time.Second},
		{10, 5 * time.Second},
		{50, 5 * time.Second},
		{200, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/s", tt.rate), func(t *testing.T) {
			t.Parallel()
			var slowest time.Duration
			for _, phase := range []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, 999 * time.Millisecond} {
				synctest.Test(t, func(t *testing.T) {
					var got []breaker.Transition
					b := mustNew(t, breaker.Config{Name: "p"}, &got)
					outage := time.Minute + phase
					opened := traffic(t, b, tt.rate, outage+time.Minute, func(at time.Duration) forage.Class {
						if at < outage {
							return forage.Success
						}
						return forage.Transient
					})
					took := opened - outage
					switch {
					case opened < 0:
						t.Fatalf("outage at %v: still closed a minute later", outage)
					case took < 0:
						t.Fatalf("opened at %v, before the outage at %v: %v", opened, outage, got)
					case took > tt.limit:
						t.Errorf("outage at %v: opened %v after it began, want at most %v (%v)", outage, took, tt.limit, got[0])
					case got[0].Reason != breaker.ReasonConsecutiveFailures:
						t.Errorf("outage at %v: opened by %v, want the burst rule", outage, got[0])
					}
					slowest = max(slowest, took)
				})
			}
			t.Logf("%d requests/s: opened at most %v after the outage began", tt.rate, slowest)
		})
	}
}

// TestPartialOutageAfterWarmTrafficOpensOnFailureRatio: after a minute of
// success at 20 requests/s, a failure share of 70% in runs of at most three
// (never a burst) opens the breaker by the ratio rule within 10s.
func TestPartialOutageAfterWarmTrafficOpensOnFailureRatio(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var got []breaker.Transition
		b := mustNew(t, breaker.Config{Name: "p"}, &got)
		const pattern = "FFSFFSFFSF" // 7 of 10 fail
		i := 0
		opened := traffic(t, b, 20, 2*time.Minute, func(at time.Duration) forage.Class {
			if at < time.Minute {
				return forage.Success
			}
			i++
			if pattern[(i-1)%len(pattern)] == 'F' {
				return forage.Transient
			}
			return forage.Success
		})
		took := opened - time.Minute
		if opened < 0 || took < 0 || took > 10*time.Second || got[0].Reason != breaker.ReasonFailureRatio {
			t.Fatalf("opened %v after the partial outage began (transitions %v), want within 10s by failure_ratio", took, got)
		}
		t.Logf("70%% failures at 20 requests/s: opened %v after they began", took)
	})
}

// TestRolledWindowOpensAtTheNextReportedFailure: a window that rolls into
// meeting the trip rule does not open the breaker by itself; the next
// reported Failure does, even one whose bucket has left the window and
// that is therefore not counted.
func TestRolledWindowOpensAtTheNextReportedFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var got []breaker.Transition
		b := mustNew(t, breaker.Config{MinRequests: 1, FailureRatio: 1, Window: 2 * time.Second, BucketPeriod: time.Second}, &got)
		late, _ := b.Allow() // bucket 0
		for range 6 {
			report(t, b, forage.Success) // bucket 0
		}
		time.Sleep(time.Second)
		report(t, b, forage.Transient) // bucket 1: 1 of 7 failed, below both rules
		wantState(t, b, breaker.StateClosed)
		time.Sleep(time.Second) // bucket 0 leaves: the window is that one failure
		wantState(t, b, breaker.StateClosed)
		late(forage.Transient) // not counted (bucket 0 left), but the rule is checked
		wantState(t, b, breaker.StateOpen)
		want := breaker.Counts{Requests: 1, Failures: 1, ConsecutiveFailures: 1}
		if len(got) != 1 || got[0].Reason != breaker.ReasonConsecutiveFailures || got[0].Counts != want {
			t.Fatalf("transitions %v, want one consecutive_failures with %v", got, want)
		}
	})
}
