package aimd

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertyLatencyTailHoldsTheMinutesLongest: the ban guard's longest
// hold (latencyTail.high) is never under the longest latency answered in
// the last refusal window, and never over the longest of the last
// refusal window and one slot: a hold seen once is remembered for the
// minute a provider counts refusals over, and then forgotten.
func TestPropertyLatencyTailHoldsTheMinutesLongest(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tl latencyTail
		type sample struct {
			at time.Time
			x  float64
		}
		var seen []sample
		now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, "start")))
		for i := range rapid.IntRange(1, 200).Draw(rt, "n") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(20*time.Second)).Draw(rt, "gap")))
			x := rapid.Float64Range(0, 2).Draw(rt, "latency")
			tl.add(now, x)
			seen = append(seen, sample{now, x})
			at := now.Add(time.Duration(rapid.Int64Range(0, int64(2*time.Minute)).Draw(rt, "ask")))
			var inWindow, inSlack float64
			for _, s := range seen {
				if d := at.Sub(s.at); d < refusalWindow {
					inWindow = max(inWindow, s.x)
				}
				if d := at.Sub(s.at); d < refusalWindow+tailSlot {
					inSlack = max(inSlack, s.x)
				}
			}
			got := tl.high(at)
			if got < float64(float32(inWindow)) || got > float64(float32(inSlack)) {
				rt.Fatalf("after %d samples, %v later: high %v, want in [%v, %v]", i+1, at.Sub(now), got, inWindow, inSlack)
			}
		}
	})
}
