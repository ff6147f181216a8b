package gcra_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/forage-go/forage/gcra"
	"golang.org/x/time/rate"
	"pgregory.net/rapid"
)

// admitted is one admitted request: its time in nanoseconds since the start
// of the sequence, and its cost.
type admitted struct {
	at int64
	n  int
}

// checkWindows fails if any window that opens with an admitted request holds
// more than burst + ⌊T/I⌋ cost units, T being the window's length.
func checkWindows(t rapid.TB, adm []admitted, burst int, iv int64) {
	t.Helper()
	for i := range adm {
		sum := 0
		for j := i; j < len(adm); j++ {
			sum += adm[j].n
			span := adm[j].at - adm[i].at
			if limit := burst + int(span/iv); sum > limit {
				t.Fatalf("window from admit %d (t=%v) to admit %d (t=%v): %d units admitted, bound Burst %d + ⌊%v/%v⌋ = %d",
					i, time.Duration(adm[i].at), j, time.Duration(adm[j].at), sum, burst, time.Duration(span), time.Duration(iv), limit)
			}
		}
	}
}

// drawLimiter draws an interval and burst and returns a limiter built from the
// matching rate, with its interval read back.
func drawLimiter(t *rapid.T) (*gcra.Limiter, int64, int) {
	ivWant := rapid.Int64Range(int64(time.Microsecond), int64(time.Second)).Draw(t, "interval")
	burst := rapid.IntRange(1, 20).Draw(t, "burst")
	lim, err := gcra.New(gcra.Config{Rate: 1e9 / float64(ivWant), Burst: burst})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return lim, int64(lim.Interval()), burst
}

// drawStart draws a start time, including ones long before the limiter was
// created (the Unix epoch) and long after it.
func drawStart(t *rapid.T) time.Time {
	return rapid.SampledFrom([]time.Time{
		time.Unix(0, 0), time.Now(), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	}).Draw(t, "start")
}

// drawGap draws the time to the next request, favouring the edges: none,
// exactly one interval, and a nanosecond either side of it.
func drawGap(t *rapid.T, iv int64, label string) int64 {
	return rapid.OneOf(
		rapid.SampledFrom([]int64{0, 0, iv, iv - 1, iv + 1}),
		rapid.Int64Range(0, 3*iv),
	).Draw(t, label)
}

// drawHistory admits a random history of requests at random
// gaps from start on (at most most of them), and returns the offset of the
// last one.
func drawHistory(rt *rapid.T, lim *gcra.Limiter, start time.Time, iv int64, burst, most int) int64 {
	var at int64
	for range rapid.IntRange(0, most).Draw(rt, "history") {
		at += drawGap(rt, iv, "gap")
		lim.AllowNAt(start.Add(time.Duration(at)), rapid.IntRange(1, burst).Draw(rt, "cost"))
	}
	return at
}

// TestWindowBound: in any window of length T opening with an admitted
// request, at most Burst + ⌊T/I⌋ cost units are admitted.
func TestWindowBound(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim, iv, burst := drawLimiter(rt)
		start := drawStart(rt)
		var at int64
		var adm []admitted
		steps := rapid.IntRange(10, 300).Draw(rt, "steps")
		for i := range steps {
			at += drawGap(rt, iv, "gap")
			n := rapid.IntRange(0, burst+1).Draw(rt, "cost")
			r := lim.AllowNAt(start.Add(time.Duration(at)), n)
			if r.Allowed && n > burst {
				rt.Fatalf("step %d: cost %d > Burst %d admitted", i, n, burst)
			}
			if r.Allowed && n > 0 {
				adm = append(adm, admitted{at, n})
			}
		}
		checkWindows(rt, adm, burst, iv)
	})
}

// TestIdleBanksExactlyBurst: after idling for Burst·I, the limiter admits
// exactly Burst back-to-back unit requests, whatever came before.
func TestIdleBanksExactlyBurst(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim, iv, burst := drawLimiter(rt)
		start := drawStart(rt)
		at := drawHistory(rt, lim, start, iv, burst, 50)
		at += int64(burst)*iv + rapid.Int64Range(0, 10*iv).Draw(rt, "idle beyond Burst·I")
		now := start.Add(time.Duration(at))
		for i := range burst {
			if r := lim.AllowNAt(now, 1); !r.Allowed || r.Remaining != burst-1-i {
				rt.Fatalf("back-to-back request %d of %d after idling: %+v", i, burst, r)
			}
		}
		if r := lim.AllowNAt(now, 1); r.Allowed || r.RetryAfter != time.Duration(iv) {
			rt.Fatalf("request %d after idling: %+v, want denied with RetryAfter %v", burst+1, r, time.Duration(iv))
		}
	})
}

// TestMatchesXTimeRate: the decisions equal golang.org/x/time/rate's
// AllowN(t, n) with the same rate and burst. The peer computes in float64
// seconds, so a request within 1µs of the boundary where the decision flips
// is skipped: neither limiter sees it, and both states stay equal.
func TestMatchesXTimeRate(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim, iv, burst := drawLimiter(rt)
		peer := rate.NewLimiter(rate.Limit(1e9/float64(iv)), burst)
		start := drawStart(rt)
		var at int64
		for i := range rapid.IntRange(10, 300).Draw(rt, "steps") {
			at += drawGap(rt, iv, "gap")
			now := start.Add(time.Duration(at))
			n := rapid.IntRange(0, burst+1).Draw(rt, "cost")
			if n <= burst {
				backlog := int64(lim.AllowNAt(now, 0).ResetAfter) // probe: books nothing
				margin := backlog + int64(n)*iv - int64(burst)*iv
				if margin > -int64(time.Microsecond) && margin < int64(time.Microsecond) {
					continue // too close to the flip for the peer's floats
				}
			}
			ours, theirs := lim.AllowNAt(now, n).Allowed, peer.AllowN(now, n)
			if ours != theirs {
				rt.Fatalf("step %d (t=%v, n=%d): gcra allowed=%v, x/time/rate allowed=%v", i, time.Duration(at), n, ours, theirs)
			}
		}
	})
}

// TestSetRateCreatesNoCredit: a rate change at t0 never leaves more credit
// than before it (and at most one unit less, from rounding towards less
// credit), and from t0 on the window bound holds with the new interval.
func TestSetRateCreatesNoCredit(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim, iv, burst := drawLimiter(rt)
		start := drawStart(rt)
		at := drawHistory(rt, lim, start, iv, burst, 40)
		for c := range rapid.IntRange(1, 3).Draw(rt, "changes") {
			at += drawGap(rt, iv, "gap to change")
			t0 := start.Add(time.Duration(at))
			newIv := rapid.Int64Range(int64(time.Microsecond), int64(time.Second)).Draw(rt, "new interval")
			before := lim.AllowNAt(t0, 0)
			if err := lim.SetRateAt(t0, 1e9/float64(newIv)); err != nil {
				rt.Fatalf("change %d: SetRateAt: %v", c, err)
			}
			iv = int64(lim.Interval())
			after := lim.AllowNAt(t0, 0)
			if after.Remaining > before.Remaining || after.Remaining < before.Remaining-1 {
				rt.Fatalf("change %d at t=%v: Remaining %d before, %d after", c, time.Duration(at), before.Remaining, after.Remaining)
			}
			if before.ResetAfter == 0 && after.Remaining != burst {
				rt.Fatalf("change %d: an idle limiter lost credit: Remaining %d, Burst %d", c, after.Remaining, burst)
			}
			var adm []admitted
			for range rapid.IntRange(10, 100).Draw(rt, "steps") {
				n := rapid.IntRange(1, burst).Draw(rt, "cost")
				if lim.AllowNAt(start.Add(time.Duration(at)), n).Allowed {
					adm = append(adm, admitted{at, n})
				}
				at += drawGap(rt, iv, "gap")
			}
			checkWindows(rt, adm, burst, iv)
		}
	})
}

// TestPauseUntil: nothing conforms before the pause ends, requests after it
// are paced (at most 1 + ⌊(t−p)/I⌋ units by time t, no burst), and a shorter
// pause never moves the limiter backwards.
func TestPauseUntil(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim, iv, burst := drawLimiter(rt)
		start := drawStart(rt)
		at := drawHistory(rt, lim, start, iv, burst, 30)
		p := at + rapid.Int64Range(0, 20*iv).Draw(rt, "pause")
		lim.PauseUntil(start.Add(time.Duration(p)))
		probe := lim.AllowNAt(start.Add(time.Duration(at)), 0)
		lim.PauseUntil(start.Add(time.Duration(p - rapid.Int64Range(0, 20*iv).Draw(rt, "shorter"))))
		if again := lim.AllowNAt(start.Add(time.Duration(at)), 0); again != probe {
			rt.Fatalf("a shorter pause changed the state: %+v -> %+v", probe, again)
		}
		units := 0
		for i := range rapid.IntRange(10, 200).Draw(rt, "steps") {
			n := rapid.IntRange(1, burst).Draw(rt, "cost")
			r := lim.AllowNAt(start.Add(time.Duration(at)), n)
			if r.Allowed && at < p {
				rt.Fatalf("step %d: cost %d admitted at t=%v, before the pause ends at %v", i, n, time.Duration(at), time.Duration(p))
			}
			if r.Allowed {
				units += n
				if limit := 1 + int((at-p)/iv); units > limit {
					rt.Fatalf("step %d: %d units admitted by t=%v after a pause ending at %v; paced bound %d", i, units, time.Duration(at), time.Duration(p), limit)
				}
			}
			at += drawGap(rt, iv, "gap")
		}
	})
}

// TestReserveThenUnreserveRestores: booking a slot and giving it back before
// its time leaves the limiter as it was.
func TestReserveThenUnreserveRestores(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim, iv, burst := drawLimiter(rt)
		start := drawStart(rt)
		var at int64
		for range rapid.IntRange(0, 30).Draw(rt, "history") {
			at += drawGap(rt, iv, "gap")
			lim.ReserveNAt(start.Add(time.Duration(at)), rapid.IntRange(1, burst).Draw(rt, "cost"))
		}
		now := start.Add(time.Duration(at))
		before := lim.AllowNAt(now, 0)
		n := rapid.IntRange(1, burst).Draw(rt, "cost")
		wait := lim.ReserveNAt(now, n)
		if want := before.ResetAfter + time.Duration(int64(n-burst)*iv); wait != max(want, 0) {
			rt.Fatalf("ReserveNAt wait %v, want backlog %v + n·I − Burst·I = %v", wait, before.ResetAfter, want)
		}
		lim.UnreserveNAt(now, n)
		if after := lim.AllowNAt(now, 0); after != before {
			rt.Fatalf("reserve+unreserve changed the state: %+v -> %+v", before, after)
		}
	})
}

// TestPauseSurvivesRateChanges: rate changes during a pause neither shorten
// it (a provider's Retry-After broken) nor stretch it (a process sharing a
// provider that cut its rate by three during a one-second pause waited
// three): nothing conforms before the pause ends, and a request conforms
// when it ends.
func TestPauseSurvivesRateChanges(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim, iv, burst := drawLimiter(rt)
		start := drawStart(rt)
		at := drawHistory(rt, lim, start, iv, burst, 30)
		p := at + 50*iv + rapid.Int64Range(0, 20*iv).Draw(rt, "pause")
		lim.PauseUntil(start.Add(time.Duration(p)))
		for i := range rapid.IntRange(1, 5).Draw(rt, "changes") {
			at += rapid.Int64Range(0, (p-at)/2).Draw(rt, fmt.Sprint("before change ", i))
			rate := rapid.Float64Range(0.5, 4).Draw(rt, fmt.Sprint("factor ", i)) * float64(time.Second) / float64(iv)
			if err := lim.SetRateAt(start.Add(time.Duration(at)), rate); err != nil {
				rt.Fatalf("SetRateAt(%v): %v", rate, err)
			}
			if r := lim.AllowNAt(start.Add(time.Duration(at)), 1); r.Allowed {
				rt.Fatalf("admitted at %v, in a pause until %v", time.Duration(at), time.Duration(p))
			}
		}
		if r := lim.AllowNAt(start.Add(time.Duration(p-1)), 1); r.Allowed {
			rt.Fatalf("admitted a nanosecond before the pause ends")
		}
		if r := lim.AllowNAt(start.Add(time.Duration(p)), 1); !r.Allowed {
			rt.Fatalf("refused when the pause ends (retry after %v): the rate changes moved it", r.RetryAfter)
		}
	})
}

// TestSetBurstDecidesAsIfMadeWithIt: a limiter whose Burst is changed
// (SetBurst) at random points of a random history decides every later
// request exactly as the pure Decide does with the same backlog and the new
// Burst, and from each change on the window bound holds with it; an
// invalid Burst is refused and changes nothing.
func TestSetBurstDecidesAsIfMadeWithIt(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim, iv, burst := drawLimiter(rt)
		start := drawStart(rt)
		at := drawHistory(rt, lim, start, iv, burst, 40)
		for c := range rapid.IntRange(1, 4).Draw(rt, "changes") {
			if err := lim.SetBurst(rapid.IntRange(-2, 0).Draw(rt, "bad burst")); err == nil || !errors.Is(err, gcra.ErrInvalidConfig) || lim.Burst() != burst {
				rt.Fatalf("change %d: SetBurst of a bad value: %v, Burst %d (was %d)", c, err, lim.Burst(), burst)
			}
			at += drawGap(rt, iv, "gap to change")
			t0 := start.Add(time.Duration(at))
			backlog := int64(lim.AllowNAt(t0, 0).ResetAfter)
			burst = rapid.IntRange(1, 20).Draw(rt, "new burst")
			if err := lim.SetBurst(burst); err != nil || lim.Burst() != burst {
				rt.Fatalf("change %d: SetBurst(%d): %v, Burst %d", c, burst, err, lim.Burst())
			}
			if got := int64(lim.AllowNAt(t0, 0).ResetAfter); got != backlog {
				rt.Fatalf("change %d: backlog %v before SetBurst, %v after", c, time.Duration(backlog), time.Duration(got))
			}
			// The model: the backlog as an absolute TAT, decided with the
			// new Burst by the pure function.
			tat := at + backlog
			var adm []admitted
			for range rapid.IntRange(10, 60).Draw(rt, "steps") {
				n := rapid.IntRange(1, burst).Draw(rt, "cost")
				want, wr := gcra.Decide(tat, at, iv, burst, n)
				r := lim.AllowNAt(start.Add(time.Duration(at)), n)
				if r.Allowed != wr.Allowed || r.RetryAfter != wr.RetryAfter {
					rt.Fatalf("change %d, t=%v, cost %d: limiter %+v, Decide %+v", c, time.Duration(at), n, r, wr)
				}
				tat = want
				if r.Allowed {
					adm = append(adm, admitted{at, n})
				}
				at += drawGap(rt, iv, "gap")
			}
			checkWindows(rt, adm, burst, iv)
		}
	})
}
