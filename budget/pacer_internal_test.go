package budget

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPacerCatchesUpLateWakeUps drives the pacer's wake-up rule with
// explicit times: a waiter sleeps until its slot and wakes late by a
// random amount. Woken at most an eighth of an interval late, it books the
// slot it slept for, so no slot is lost and the pacer keeps its rate
// (booked from the late wake-up, it ran 2.5% under it at 50/s, 10-20% at
// 200/s); two requests never go closer than seven eighths of an interval;
// and a waiter woken later than that (a stall) books from its wake-up, so
// a stall is never made up with a burst.
func TestPacerCatchesUpLateWakeUps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(1, 1000).Draw(t, "rate")
		p, err := newLocalPacer(rate, 1)
		if err != nil {
			t.Fatal(err)
		}
		iv := p.l.Interval()
		now := time.Now()
		if !p.l.AllowNAt(now, 1).Allowed {
			t.Fatal("the first request was not admitted")
		}
		sent, stalled := []time.Time{now}, time.Duration(0)
		for i := range 200 {
			r := p.l.AllowNAt(now, 1)
			if r.Allowed {
				t.Fatalf("request %d admitted %v after the last, under an interval of %v", i, now.Sub(sent[len(sent)-1]), iv)
			}
			due := now.Add(r.RetryAfter)
			late := time.Duration(rapid.Int64Range(0, int64(iv/4)).Draw(t, fmt.Sprint("late", i)))
			now = due.Add(late)
			if late > iv/catchUp {
				stalled += late
			}
			if !p.woken(due, now, 1).Allowed {
				t.Fatalf("request %d not admitted at the slot it slept for", i)
			}
			if gap := now.Sub(sent[len(sent)-1]); gap < iv-iv/catchUp {
				t.Fatalf("request %d went %v after the last; want at least %v", i, gap, iv-iv/catchUp)
			}
			sent = append(sent, now)
		}
		// Only the stalls cost time (and the last wake-up's lateness).
		span := sent[len(sent)-1].Sub(sent[0])
		if want := 200*iv + stalled + iv/catchUp; span > want {
			t.Fatalf("200 slots took %v at an interval of %v with %v of stalls; want at most %v", span, iv, stalled, want)
		}
	})
}
