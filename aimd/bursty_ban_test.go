package aimd_test

import (
	"container/heap"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/aimd"
)

// burstyRun drives c against srv for dur with a caller that sends at the
// controller's rate, up to workers requests in flight, for on, then
// nothing for off, over and over; it returns the bans srv handed out.
func burstyRun(c *aimd.Controller, srv *simServer, dur, on, off, latency time.Duration, workers int) int {
	var (
		flights  flightHeap
		now      time.Duration
		lastSend = time.Duration(-1)
		onUntil  = on
	)
	at := func(d time.Duration) time.Time { return simEpoch.Add(d) }
	for {
		next := now
		if lastSend >= 0 {
			next = max(lastSend+time.Duration(1e9/c.Snapshot().Rate), now)
		}
		if p := c.Snapshot().PausedUntil.Sub(simEpoch); p > next {
			next = p
		}
		for next >= onUntil {
			if next < onUntil+off {
				next = onUntil + off // idle between bursts
			}
			onUntil += on + off
		}
		if len(flights) > 0 && (flights[0].at <= next || len(flights) >= workers) {
			f := heap.Pop(&flights).(inFlight)
			now = max(now, f.at)
			c.ObserveAt(at(f.at), aimd.Signal{Class: f.r.kind, Sent: at(f.sent), RetryAfter: f.r.retryAfter})
			continue
		}
		if next >= dur {
			break
		}
		now, lastSend = next, next
		heap.Push(&flights, inFlight{at: now + latency, sent: now, r: srv.take(now)})
	}
	return srv.bans
}

// TestPropertyABurstyCallerIsNeverBanned: a caller that sends in short
// bursts and idles seconds between them (a collector busy writing between
// its turns of fetches), one request at a time, is never banned by a slow
// provider with an allowance that bans after 5 refusals within a minute.
// Each quiet spell refills the allowance, as a pause does. (Taken for a
// steady episode, the allowance each burst spent read as the limit:
// 103 runs of 300 were banned within 2 minutes, each burst refused once,
// the cuts 10% each.)
func TestPropertyABurstyCallerIsNeverBanned(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Float64Range(5.5, 13.5).Draw(t, "limit")
		burst := rapid.IntRange(5, 8).Draw(t, "burst")
		latency := time.Duration(rapid.IntRange(1, 20).Draw(t, "latencyMs")) * time.Millisecond
		on := time.Duration(rapid.IntRange(900, 1600).Draw(t, "onMs")) * time.Millisecond
		off := time.Duration(rapid.IntRange(3000, 10000).Draw(t, "offMs")) * time.Millisecond
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if bans := burstyRun(c, gcra(limit, burst, answerBan)(), 2*time.Minute, on, off, latency, 1); bans > 0 {
			t.Fatalf("limit %.1f/s, allowance %d, bursts of %v every %v: %d bans", limit, burst, on, on+off, bans)
		}
	})
}
