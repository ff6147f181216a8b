package gcra

import (
	"math"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// ms is a millisecond in the int64 nanoseconds Decide works in.
const ms = int64(time.Millisecond)

// TestDecideWorkedExample pins the arithmetic on the example: 20/s
// (I = 50ms), Burst 5 (L = 200ms), starting idle at t = 0.
func TestDecideWorkedExample(t *testing.T) {
	t.Parallel()
	const iv, burst = 50 * ms, 5
	tat := int64(math.MinInt64)
	steps := []struct {
		now, n int
		want   Result
	}{
		{0, 1, Result{Allowed: true, Remaining: 4, ResetAfter: 50 * time.Millisecond}},
		{0, 1, Result{Allowed: true, Remaining: 3, ResetAfter: 100 * time.Millisecond}},
		{0, 3, Result{Allowed: true, Remaining: 0, ResetAfter: 250 * time.Millisecond}},
		{0, 1, Result{Remaining: 0, RetryAfter: 50 * time.Millisecond, ResetAfter: 250 * time.Millisecond}},
		{0, 0, Result{Allowed: true, Remaining: 0, ResetAfter: 250 * time.Millisecond}},      // probe
		{0, 6, Result{Remaining: 0, RetryAfter: Never, ResetAfter: 250 * time.Millisecond}},  // cost > Burst
		{0, -1, Result{Remaining: 0, RetryAfter: Never, ResetAfter: 250 * time.Millisecond}}, // negative cost
		{20, 1, Result{Remaining: 0, RetryAfter: 30 * time.Millisecond, ResetAfter: 230 * time.Millisecond}},
		{50, 1, Result{Allowed: true, Remaining: 0, ResetAfter: 250 * time.Millisecond}},
		{120, 2, Result{Remaining: 1, RetryAfter: 30 * time.Millisecond, ResetAfter: 180 * time.Millisecond}},
		{150, 2, Result{Allowed: true, Remaining: 0, ResetAfter: 250 * time.Millisecond}},
		{1000, 1, Result{Allowed: true, Remaining: 4, ResetAfter: 50 * time.Millisecond}}, // idle: at most Burst banked
	}
	for i, s := range steps {
		var got Result
		tat, got = Decide(tat, int64(s.now)*ms, iv, burst, s.n)
		if got != s.want {
			t.Fatalf("step %d (t=%dms n=%d): got %+v, want %+v", i, s.now, s.n, got, s.want)
		}
	}
}

// TestDecideProperties checks every Result field against its definition for
// arbitrary states, and that RetryAfter is exact: the same request conforms
// at now + RetryAfter and not a nanosecond earlier.
func TestDecideProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		const lim = int64(1) << 61 // no saturation below this
		iv := rapid.Int64Range(1, int64(time.Hour)).Draw(rt, "interval")
		burst := rapid.IntRange(1, 1000).Draw(rt, "burst")
		now := rapid.Int64Range(-lim, lim).Draw(rt, "now")
		tat := rapid.OneOf(rapid.Just(int64(math.MinInt64)),
			rapid.Int64Range(now-2*int64(burst)*iv, now+3*int64(burst)*iv)).Draw(rt, "tat")
		n := rapid.IntRange(-1, burst+1).Draw(rt, "n")

		newTAT, r := Decide(tat, now, iv, burst, n)
		tau := int64(burst) * iv
		backlog := max(tat, now) - now
		if r.Remaining < 0 || r.Remaining > burst || r.ResetAfter < 0 {
			rt.Fatalf("out of range: %+v", r)
		}
		if got := time.Duration(max(newTAT, now) - now); r.ResetAfter != got {
			rt.Fatalf("ResetAfter %v, want max(TAT−t, 0) = %v", r.ResetAfter, got)
		}
		if want := max(0, (tau-(max(newTAT, now)-now))/iv); int64(r.Remaining) != want && max(newTAT, now)-now <= tau {
			rt.Fatalf("Remaining %d, want %d", r.Remaining, want)
		}
		switch {
		case n < 0 || n > burst:
			if r.Allowed || r.RetryAfter != Never || newTAT != tat {
				rt.Fatalf("cost %d outside [0, %d]: %+v newTAT %d", n, burst, r, newTAT)
			}
			return
		case backlog+int64(n)*iv <= tau:
			want := max(tat, now) + int64(n)*iv
			if n == 0 {
				want = tat
			}
			if !r.Allowed || r.RetryAfter != 0 || newTAT != want {
				rt.Fatalf("conforming request: %+v newTAT %d, want TAT %d", r, newTAT, want)
			}
		default:
			if r.Allowed || newTAT != tat || r.RetryAfter <= 0 {
				rt.Fatalf("non-conforming request: %+v newTAT %d", r, newTAT)
			}
			retry := int64(r.RetryAfter)
			if _, at := Decide(tat, now+retry, iv, burst, n); !at.Allowed {
				rt.Fatalf("RetryAfter %v is a lie: denied then (%+v)", r.RetryAfter, at)
			}
			if _, early := Decide(tat, now+retry-1, iv, burst, n); early.Allowed {
				rt.Fatalf("RetryAfter %v is too long: allowed 1ns earlier", r.RetryAfter)
			}
		}
		// Reserve books the same slot and waits exactly RetryAfter.
		resTAT, wait := Reserve(tat, now, iv, burst, n)
		if wait != r.RetryAfter {
			rt.Fatalf("Reserve wait %v, Decide RetryAfter %v", wait, r.RetryAfter)
		}
		if want := max(tat, now) + int64(n)*iv; n > 0 && resTAT != want {
			rt.Fatalf("Reserve TAT %d, want %d", resTAT, want)
		}
	})
}

// TestDecideSaturates feeds extreme values: nothing panics or wraps around.
func TestDecideSaturates(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		tat := rapid.Int64().Draw(rt, "tat")
		now := rapid.Int64().Draw(rt, "now")
		iv := rapid.Int64().Draw(rt, "interval")
		burst := rapid.Int().Draw(rt, "burst")
		n := rapid.Int().Draw(rt, "n")
		newTAT, r := Decide(tat, now, iv, burst, n)
		if _, ok := tolerance(iv, burst); !ok {
			if r.Allowed || r.RetryAfter != Never || newTAT != tat {
				rt.Fatalf("invalid parameters conformed: %+v", r)
			}
			return
		}
		if r.Remaining < 0 || r.Remaining > burst || r.ResetAfter < 0 || r.RetryAfter < 0 {
			rt.Fatalf("out of range: %+v", r)
		}
		if r.Allowed && n > 0 && newTAT < tat {
			rt.Fatalf("an admit moved TAT back: %d -> %d", tat, newTAT)
		}
		resTAT, wait := Reserve(tat, now, iv, burst, n)
		if wait < 0 || (n > 0 && n <= burst && resTAT < tat) {
			rt.Fatalf("Reserve: TAT %d -> %d, wait %v", tat, resTAT, wait)
		}
	})
}

// TestRescaleKeepsUnits checks the rate-change arithmetic: the backlog keeps
// its size in cost units, rounded up (plus 1ns where that equals the old TAT); an idle
// limiter stays idle; and the word always changes.
func TestRescaleKeepsUnits(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		oldIv := rapid.Int64Range(1, int64(time.Minute)).Draw(rt, "old")
		newIv := rapid.Int64Range(1, int64(time.Minute)).Draw(rt, "new")
		now := rapid.Int64Range(-1<<60, 1<<60).Draw(rt, "now")
		tat := now + rapid.Int64Range(-1000*oldIv, 1000*oldIv).Draw(rt, "backlog")
		got := rescale(tat, now, oldIv, newIv)
		if got == tat {
			rt.Fatalf("rescale left the word unchanged (%d)", tat)
		}
		if tat <= now {
			if got > now {
				rt.Fatalf("idle limiter (TAT %d ≤ now %d) got a backlog: %d", tat, now, got)
			}
			return
		}
		// ⌈(tat−now)·new/old⌉ ≤ got−now ≤ that + 1ns, computed exactly.
		num := new(big.Int).Mul(big.NewInt(tat-now), big.NewInt(newIv))
		ceil := new(big.Int).Div(num.Add(num, big.NewInt(oldIv-1)), big.NewInt(oldIv))
		if !ceil.IsInt64() || satAdd(now, ceil.Int64()) == math.MaxInt64 {
			if got != satAdd(now, math.MaxInt64) {
				rt.Fatalf("backlog %v ns × %d/%d should saturate, got %d", tat-now, newIv, oldIv, got)
			}
			return
		}
		if b := got - now; b != ceil.Int64() && b != ceil.Int64()+1 {
			rt.Fatalf("backlog %d ns × %d/%d rescaled to %d ns, want ⌈%v⌉ (+1ns at most)", tat-now, newIv, oldIv, b, ceil)
		}
	})
}

// TestPauseAndUnreserve pins the two small state updates.
func TestPauseAndUnreserve(t *testing.T) {
	t.Parallel()
	const iv, burst = 10 * ms, 4
	if got := pause(0, 100*ms, iv, burst); got != 130*ms {
		t.Fatalf("pause(idle, 100ms) = %v, want until + L = 130ms", time.Duration(got))
	}
	if got := pause(500*ms, 100*ms, iv, burst); got != 500*ms {
		t.Fatalf("pause moved TAT back: %v", time.Duration(got))
	}
	if got := unreserve(100*ms, 50*ms, iv, 2); got != 80*ms {
		t.Fatalf("unreserve(100ms, now 50ms, 2) = %v, want 80ms", time.Duration(got))
	}
	if got := unreserve(100*ms, 95*ms, iv, 2); got != 95*ms {
		t.Fatalf("unreserve below now = %v, want now (95ms)", time.Duration(got))
	}
	if got := unreserve(40*ms, 95*ms, iv, 2); got != 40*ms {
		t.Fatalf("unreserve on an idle limiter changed TAT: %v", time.Duration(got))
	}
}
