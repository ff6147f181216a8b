package aimd_test

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// lateAnswer is one answer of lateRun's server on its way back.
type lateAnswer struct {
	at time.Time
	s  aimd.Signal
}

type lateAnswers []lateAnswer

func (h lateAnswers) Len() int           { return len(h) }
func (h lateAnswers) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h lateAnswers) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lateAnswers) Push(x any)        { *h = append(*h, x.(lateAnswer)) }
func (h *lateAnswers) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// lateRun drives a fresh Controller against a fixed window of n requests
// per w (declared: Limit, Window, Remaining, Reset in whole seconds rounded
// up, as most providers send them) that it meets with all n left, enter
// before the window's end. Requests go open loop at the controller's rate,
// as a pacer sends them, so several are in flight; each takes a round trip
// drawn uniformly from [latency/2, 3*latency/2), and the server judges it
// half way. A request over the window's count is refused (429, Remaining
// 0, Retry-After to the end). It returns what the window served and
// refused.
func lateRun(t *testing.T, seed uint64, n int, w, enter, latency time.Duration) (served, refused int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	c, err := aimd.New(aimd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(enter) // the window's true end
	var answers lateAnswers
	count := 0
	next := t0
	for {
		if answers.Len() > 0 && !answers[0].at.After(next) {
			a := heap.Pop(&answers).(lateAnswer)
			c.ObserveAt(a.at, a.s)
			continue
		}
		if !next.Before(end) {
			return served, refused // what is still on its way was judged already
		}
		now := next
		if pu := c.Snapshot().PausedUntil; pu.After(now) {
			next = pu
			continue
		}
		rtt := latency/2 + time.Duration(rng.Int64N(int64(latency)))
		at := now.Add(rtt / 2) // the server judges it
		if !at.Before(end) {
			next = end // the next window: not this test's business
			continue
		}
		reset := time.Duration(math.Ceil(end.Sub(at).Seconds())) * time.Second
		s := aimd.Signal{Sent: now, Latency: rtt, Quota: forage.Quota{Limit: float64(n), Window: w, Reset: reset,
			HasLimit: true, HasWindow: true, HasRemaining: true, HasReset: true}}
		if count < n {
			count++
			served++
			s.Class, s.Quota.Remaining = forage.Success, float64(n-count)
		} else {
			refused++
			s.Class, s.RetryAfter = forage.Throttled, reset
		}
		heap.Push(&answers, lateAnswer{at: now.Add(rtt), s: s})
		next = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
	}
}

// TestALateWindowCountsTheRequestsInFlight: a declared window met late (all
// of 1,200 a minute left 10 s before its reset; round trips of 200-600 ms)
// is spent at what is left over what is left of the window and a round
// trip. The Remaining each answer carries does not count the requests
// still in flight: spread over the time to the reset alone, the window ran
// out before its end, and the requests then in flight were refused, in 20
// runs of 20 (193 requests).
func TestALateWindowCountsTheRequestsInFlight(t *testing.T) {
	t.Parallel()
	total, runs := 0, 0
	for seed := range uint64(20) {
		served, refused := lateRun(t, seed, 1200, time.Minute, 10*time.Second+time.Duration(seed)*37*time.Millisecond, 400*time.Millisecond)
		if refused > 0 {
			runs++
			total += refused
			t.Logf("seed %d: %d served, %d refused", seed, served, refused)
		}
	}
	if runs > 0 {
		t.Errorf("1200 a minute met 10 s before its reset, round trip 200-600 ms: refused in %d runs of 20, %d requests in all; want none", runs, total)
	}
}
