package aimd_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// quotaOverLimit is a provider that announces a fixed-window quota in
// every answer (Limit, Remaining and a Reset in whole seconds, no Window)
// and enforces it, and limits the rate more tightly besides without saying
// so: a GCRA of hidden requests/s with a burst of burst, whose refusals
// carry the quota's headers too.
type quotaOverLimit struct {
	count   float64       // the quota, per window
	window  time.Duration // its window
	hidden  float64       // the unnamed limit, requests/s
	burst   int           // its burst
	latency time.Duration // of every answer
	bare    bool          // the unnamed limit's 429s carry no Retry-After
	run     time.Duration
	unread  bool // the answers carry no quota (it is enforced all the same)
}

// serve drives c against p for p.run: a client sending at c's rate,
// waiting out its pauses, its answers arriving p.latency after sending. It
// returns the unnamed limit's refusals in each window of the quota, and
// the refusals for the quota itself.
func (p quotaOverLimit) serve(c *aimd.Controller) (perWindow []int, spent int) {
	type answer struct {
		at  time.Time
		sig aimd.Signal
	}
	now, end := simEpoch, simEpoch.Add(p.run)
	var pending []answer
	next, used, win := now, 0.0, 0
	iv := time.Duration(float64(time.Second) / p.hidden)
	var tat time.Time // the unnamed limit's theoretical arrival time
	perWindow = make([]int, int(p.run/p.window)+1)
	for now.Before(end) {
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
		if w := int(now.Sub(simEpoch) / p.window); w != win {
			win, used = w, 0
		}
		reset := wholeSeconds(simEpoch.Add(time.Duration(win+1) * p.window).Sub(now))
		sig := aimd.Signal{Sent: now, Latency: p.latency, Class: forage.Success}
		switch {
		case used >= p.count:
			sig.Class, sig.RetryAfter = forage.Throttled, reset
			spent++
		case tat.Sub(now) > time.Duration(p.burst-1)*iv:
			sig.Class = forage.Throttled
			if !p.bare {
				sig.RetryAfter = wholeSeconds(tat.Sub(now) - time.Duration(p.burst-1)*iv)
			}
			perWindow[win]++
		default:
			if tat.Before(now) {
				tat = now
			}
			tat = tat.Add(iv)
			used++
		}
		if !p.unread {
			sig.Quota = forage.Quota{Limit: p.count, Remaining: p.count - used, Reset: reset, HasLimit: true, HasRemaining: true, HasReset: true}
		}
		pending = append(pending, answer{now.Add(p.latency), sig})
		next = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
	}
	return perWindow, spent
}

// TestAnUnnamedLimitNearAWindowsEndIsLearnedOnce: a provider announcing
// 600 a minute, without naming the window, that limits to 11 a second
// besides, answering over it with bare 429s. Spending what is left over
// the reset stays under 11 a second until the last seconds of each
// window, where the rounding of the reset to whole seconds takes it over
// (a second left rounded up to two). The first refusal there is taken as
// what it is, a limit the quota does not name, though the quota had under
// a tenth of itself left: 3 refusals in 3 minutes. Only a refusal with a
// tenth or more left did that; this one was an ordinary cut, undone at the
// next answer, which set the rate to what was left over the reset again:
// 16-18 refusals in the last seconds of every window, a ban at a
// provider that bans at five in a minute.
func TestAnUnnamedLimitNearAWindowsEndIsLearnedOnce(t *testing.T) {
	t.Parallel()
	c := mustNew(t, aimd.Config{})
	p := quotaOverLimit{count: 600, window: time.Minute, hidden: 11, burst: 1, latency: 50 * ms, bare: true, run: 3 * time.Minute}
	per, spent := p.serve(c)
	total := 0
	for w, n := range per {
		total += n
		if n > 4 {
			t.Errorf("window %d: %d refusals by the unnamed 11/s (all: %v); want at most 4", w, n, per)
		}
	}
	if total > 5 || spent > 0 {
		t.Errorf("3 minutes of 600/min announced over 11/s unnamed: %d refusals by the limit %v, %d for the quota; want at most 5, 0", total, per, spent)
	}
}

// TestPropertyAQuotasWordCostsNoRefusals: whatever the quota (400 to
// 1800 a minute, its window unnamed), the tighter limit under it (up to
// half again over the quota's average rate, so that spending what is left
// evenly meets it only in the last seconds of a window, where the reset's
// rounding takes the rate over it; a burst of 1 to 3), the latency (up to
// 50ms) and the form of its 429s, a controller that reads the quota is
// refused by the tighter limit at most 3 times more in 4 minutes than one
// not shown the quota, which learns the limit by its refusals alone, and
// never by the quota itself. Each cut undone by the next answer, it was
// refused up to 136 times in 4 minutes, 42 in one, in the last seconds of
// the windows.
func TestPropertyAQuotasWordCostsNoRefusals(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		count := float64(rapid.IntRange(400, 1800).Draw(t, "count"))
		p := quotaOverLimit{
			count:   count,
			window:  time.Minute,
			hidden:  count / 60 * rapid.Float64Range(1, 1.5).Draw(t, "hiddenShare"),
			burst:   rapid.IntRange(1, 3).Draw(t, "burst"),
			latency: time.Duration(rapid.IntRange(1, 50).Draw(t, "latencyMs")) * ms,
			bare:    rapid.Bool().Draw(t, "bare"),
			run:     4 * time.Minute,
		}
		c, err := aimd.New(aimd.Config{})
		if err != nil {
			t.Fatal(err)
		}
		read, spent := p.serve(c)
		unread := p
		unread.unread = true
		c, _ = aimd.New(aimd.Config{})
		blind, _ := unread.serve(c)
		if sum(read) > sum(blind)+3 || spent > 0 {
			t.Fatalf("%+v: refused %v per minute by the tighter limit reading the quota, %v not shown it, %d times for the quota itself; want at most 3 more in all, none for the quota",
				p, read, blind, spent)
		}
	})
}

// sum returns the sum of xs.
func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestAnUnnamedLimitAnsweredWithALongPauseIsLearned: 1200 a minute
// announced, plenty of it left, and an unnamed 10 a second answered with a
// Retry-After of 5 s or a minute. A refusal asking for a long pause while
// the quota said plenty was left is no spent window: the quota's word
// only bounds the climb from then on, and the limit is learned in a few
// refusals. Read as the quota's own refusal (as it is with under a tenth
// left), each pause ended in the rate the quota's word set, and the next
// refusal: one a pause, 56 served in 5 minutes with pauses of 5 s, 6 with
// pauses of a minute.
func TestAnUnnamedLimitAnsweredWithALongPauseIsLearned(t *testing.T) {
	t.Parallel()
	for _, ra := range []time.Duration{5 * time.Second, time.Minute} {
		c := mustNew(t, aimd.Config{})
		now, end := simEpoch, simEpoch.Add(5*time.Minute)
		var free time.Time // the unnamed limit: 10 a second, no burst
		used, win, refused, served := 0.0, 0, 0, 0
		for now.Before(end) {
			if pu := c.Snapshot().PausedUntil; pu.After(now) {
				now = pu
			}
			now = now.Add(time.Duration(float64(time.Second) / c.Snapshot().Rate))
			if w := int(now.Sub(simEpoch) / time.Minute); w != win {
				win, used = w, 0
			}
			q := forage.Quota{Limit: 1200, Remaining: 1200 - used, Reset: wholeSeconds(simEpoch.Add(time.Duration(win+1) * time.Minute).Sub(now)),
				HasLimit: true, HasRemaining: true, HasReset: true}
			sig := aimd.Signal{Class: forage.Success, Latency: ms, Quota: q}
			if now.Before(free) {
				sig.Class, sig.RetryAfter = forage.Throttled, ra
				refused++
			} else {
				free, used, served = now.Add(100*ms), used+1, served+1
			}
			c.ObserveAt(now.Add(ms), sig)
		}
		if refused > 8 || served < 250 {
			t.Errorf("Retry-After %v: %d served, %d refused in 5 minutes by the unnamed 10/s under 1200/min announced; want 250 or more, at most 8", ra, served, refused)
		}
	}
}
