package aimd_test

import (
	"math"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// TestQuotaHeadersNeverUndoACut: a provider that says 99,999 of 100,000
// are left on every answer while it refuses over 10 a second. Its word
// spends the window at once (the rate jumps to what is left over the
// reset), but once it has refused a request, what it says is left only
// bounds the climb, and discovery starts over: 3 refusals in 30 s (2
// without the headers), and the rate settles under the limit. Each answer
// undid the cut: 30 of 61 requests were refused, the rate at 10,000/s.
func TestQuotaHeadersNeverUndoACut(t *testing.T) {
	t.Parallel()
	c, err := aimd.New(aimd.Config{Initial: 5})
	if err != nil {
		t.Fatal(err)
	}
	lie := forage.Quota{Limit: 100000, Remaining: 99999, Reset: 10 * time.Second, HasLimit: true, HasRemaining: true, HasReset: true}
	now, end := t0, t0.Add(30*time.Second)
	refused, sent := 0, 0
	var free time.Time // the provider: 10 a second, no burst
	for now.Before(end) {
		if pu := c.Snapshot().PausedUntil; pu.After(now) {
			now = pu
		}
		now = now.Add(max(time.Duration(float64(time.Second)/c.Snapshot().Rate), time.Millisecond))
		sent++
		if now.Before(free) {
			refused++
			c.ObserveAt(now, aimd.Signal{Class: forage.Throttled, Latency: time.Millisecond, RetryAfter: time.Second})
			continue
		}
		free = now.Add(100 * time.Millisecond)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: time.Millisecond, Quota: lie})
	}
	if r := c.Snapshot().Rate; refused > 4 || r > 10 {
		t.Fatalf("30 s against 10/s whose every answer says 99999 left: %d of %d refused, rate %v at the end; want a few, under 10", refused, sent, r)
	}
}

// TestADeclarationLapses: one answer declaring a quota of 1 a year (one
// endpoint's, or a lie) pins the rate to the floor; three answers in a row
// that declare nothing end it, and the rate climbs again. A later
// declaration raises the ceiling a lower one set. Neither is exported as a
// learned ceiling. One such answer held a provider at one request every 20
// seconds for good, and in its record across restarts.
func TestADeclarationLapses(t *testing.T) {
	t.Parallel()
	c, err := aimd.New(aimd.Config{Initial: 10})
	if err != nil {
		t.Fatal(err)
	}
	year := 365 * 24 * time.Hour
	now := t0
	c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: 5 * time.Millisecond,
		Quota: forage.Quota{Limit: 1, Remaining: 1, Reset: year, Window: year, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}})
	if r, st := c.Snapshot().Rate, c.State(); r != aimd.ConfigOf(c).Min || st.Ceiling != 0 || st.Confirmed {
		t.Fatalf("declared 1 a year: rate %v, exported ceiling %v (confirmed %v); want the floor, none exported", r, st.Ceiling, st.Confirmed)
	}
	for range 3 {
		now = now.Add(20 * time.Second)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: 5 * time.Millisecond})
	}
	for range 200 {
		now = now.Add(time.Second / 20)
		c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: 5 * time.Millisecond})
	}
	if r := c.Snapshot().Rate; r < 5 {
		t.Fatalf("ten seconds of answers declaring nothing after the declaration: rate %v, want it climbing again", r)
	}
	minute := forage.Quota{Limit: 60, Remaining: 59, Reset: time.Minute, Window: time.Minute, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}
	c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: 5 * time.Millisecond, Quota: minute})
	minute.Limit, minute.Remaining = 600, 590 // under what spends it evenly by the reset: the later word is the ceiling
	c.ObserveAt(now, aimd.Signal{Class: forage.Success, Latency: 5 * time.Millisecond, Quota: minute})
	if s := c.Snapshot(); s.Ceiling != 10 {
		t.Fatalf("60 a minute, then 600 a minute declared: ceiling %v, want 10 (the later word)", s.Ceiling)
	}
}

// TestARetryAfterOnASuccessPausesNothing: a 202 with Retry-After (a job
// to poll later) does not pause the provider; a 429 with one does. It
// paused every request to the host for as long as the job took.
func TestARetryAfterOnASuccessPausesNothing(t *testing.T) {
	t.Parallel()
	c, err := aimd.New(aimd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.ObserveAt(t0, aimd.Signal{Class: forage.Success, RetryAfter: 2 * time.Minute})
	if pu := c.Snapshot().PausedUntil; !pu.IsZero() {
		t.Fatalf("a success with Retry-After 2m: paused until +%v, want no pause", pu.Sub(t0))
	}
	c.ObserveAt(t0, aimd.Signal{Class: forage.Throttled, RetryAfter: 2 * time.Minute})
	if pu := c.Snapshot().PausedUntil; !pu.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("a 429 with Retry-After 2m: paused until +%v, want +2m", pu.Sub(t0))
	}
}

// TestACeilingLearnedUnderADeclaredQuotaStays: a provider that declares
// 1200 a minute, honestly, and limits to 10 a second besides (a burst of
// 10), without saying so. The ceiling its refusals teach stays under the
// declared quota's: the next declaring answer does not put it back, and
// State exports it. It did put it back: 156 refusals in 5 minutes, one
// every 2 s, and the exported ceiling was none.
func TestACeilingLearnedUnderADeclaredQuotaStays(t *testing.T) {
	t.Parallel()
	c, err := aimd.New(aimd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const lat = 50 * time.Millisecond
	type answer struct {
		at  time.Time
		sig aimd.Signal
	}
	now := t0
	var pending []answer
	next, winStart, used, refused := now, now, 0.0, 0
	var tat time.Time // the hidden 10/s limit, a burst of 10
	for now.Sub(t0) < 5*time.Minute {
		if len(pending) > 0 && !pending[0].at.After(next) {
			now = pending[0].at
			c.ObserveAt(now, pending[0].sig)
			pending = pending[1:]
			continue
		}
		now = next
		if pu := c.Snapshot().PausedUntil; pu.After(now) {
			next = pu
			continue
		}
		for !now.Before(winStart.Add(time.Minute)) {
			winStart, used = winStart.Add(time.Minute), 0
		}
		reset := time.Duration(math.Ceil(winStart.Add(time.Minute).Sub(now).Seconds())) * time.Second
		sig := aimd.Signal{Sent: now, Latency: lat}
		switch {
		case used >= 1200:
			sig.Class, sig.RetryAfter = forage.Throttled, reset
			refused++
		case tat.Sub(now) > 900*time.Millisecond:
			sig.Class = forage.Throttled
			refused++
		default:
			if tat.Before(now) {
				tat = now
			}
			tat = tat.Add(100 * time.Millisecond)
			used++
			sig.Class = forage.Success
		}
		sig.Quota = forage.Quota{Limit: 1200, Remaining: 1200 - used, Reset: reset, Window: time.Minute, HasLimit: true, HasRemaining: true, HasReset: true, HasWindow: true}
		pending = append(pending, answer{now.Add(lat), sig})
		next = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
	}
	if st := c.State(); refused > 20 || st.Ceiling == 0 || st.Ceiling > 11 {
		t.Fatalf("5 minutes against 1200/min declared and 10/s hidden: %d refused, exported ceiling %v; want a few, about 10", refused, st.Ceiling)
	}
}
