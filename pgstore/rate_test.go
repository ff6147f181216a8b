package pgstore_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"
)

// intervalOf is the interval gcra rounds a rate to.
func intervalOf(rate float64) int64 { return int64(math.Round(1e9 / rate)) }

// ceilMulDiv is ⌈a·b/c⌉ for positive values, without overflow.
func ceilMulDiv(a, b, c int64) float64 {
	return math.Ceil(float64(a) / float64(c) * float64(b))
}

// TestSharedRateCutReachesEveryProcess: two processes (two pools) share a
// key. A cut proposed by one slows the other's WaitN admissions to the new
// interval at once; a climb the other proposes right after is ignored
// within the cool-off, and the first's own climb is not.
func TestSharedRateCutReachesEveryProcess(t *testing.T) {
	t.Parallel()
	a := newStore(t, nil)
	pool, err := pgxpool.New(t.Context(), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := pgstore.New(pool, pgstore.Config{Schema: a.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cfg := pgstore.PacerConfig{Burst: 1, HoldAfterCut: time.Hour} // no wall-clock race with the cool-off
	pa := newPacer(t, a, cfg)
	pb, err := b.NewPacer(pa.Key(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		slots []int64
	)
	pgstore.OnAdmit(pb, func(slot int64) { mu.Lock(); slots = append(slots, slot); mu.Unlock() })
	rate := func(want float64) {
		t.Helper()
		if got, err := pb.Rate(ctx); err != nil || math.Abs(got-want) > 1e-6*want {
			t.Fatalf("shared rate %v (%v), want %v", got, err, want)
		}
	}

	for _, p := range []*pgstore.Pacer{pa, pb} { // both controllers start at 400/s
		if err := p.SetRate(400); err != nil {
			t.Fatal(err)
		}
	}
	rate(400)
	if err := pa.SetRate(40); err != nil { // a's controller cuts by 10×
		t.Fatal(err)
	}
	rate(40)
	const n = 5
	for range n {
		if err := pb.WaitN(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < n; i++ {
		if gap := time.Duration(slots[i] - slots[i-1]); gap != 25*time.Millisecond {
			t.Fatalf("b's admissions %d and %d are %v apart after a's cut to 40/s, want 25ms: slots %v", i-1, i, gap, slots)
		}
	}

	if err := pb.SetRate(800); err != nil { // b's controller climbs, unaware of the cut
		t.Fatal(err)
	}
	rate(40)
	if err := pa.SetRate(44); err != nil { // the cutter's own recovery goes on
		t.Fatal(err)
	}
	rate(44)
}

// TestSharedRatePolicy is the rate policy's property test: three pacers
// on one key propose random cuts and climbs at explicit times, and every
// answer follows the rules of SetRate:
//
//   - the first proposal of a pacer creates the row or leaves it alone;
//   - a cut applies the proposer's factor at once, except that a cut by
//     another pacer within the cool-off of an episode's first cut takes
//     the deepest cut of the episode instead of compounding;
//   - a climb by any pacer but the last cutter within the cool-off of a
//     cut changes nothing; a climb never speeds the rate up by more than
//     the proposer's factor, nor above the proposal;
//   - across all pacers, the shared rate never grows faster than
//     MaxGrowth per second, with at most one second banked.
func TestSharedRatePolicy(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	const (
		pacers  = 3
		coolOff = time.Second
		growth  = 2.0
	)
	rapid.Check(t, func(rt *rapid.T) {
		cfg := pgstore.PacerConfig{Burst: 1, HoldAfterCut: coolOff, MaxGrowth: growth}
		ps := []*pgstore.Pacer{newPacer(rt, s, cfg)}
		for range pacers - 1 {
			p, err := s.NewPacer(ps[0].Key(), cfg)
			if err != nil {
				rt.Fatal(err)
			}
			ps = append(ps, p)
		}
		type obs struct {
			at time.Time
			iv int64
		}
		var (
			now      = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
			prop     [pacers]float64 // each controller's rate
			sent     [pacers]int64   // the interval each pacer last sent, 0 before
			history  []obs
			shared   int64 // the shared interval; 0 before the row exists
			cutAt    time.Time
			cutBy    = -1
			cutBase  int64
			calmTill time.Time
		)
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for step := range steps {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(3*coolOff)).Draw(rt, "advance")))
			i := rapid.IntRange(0, pacers-1).Draw(rt, "pacer")
			if prop[i] == 0 {
				prop[i] = rapid.SampledFrom([]float64{1, 10, 50, 1000}).Draw(rt, "initial rate")
			} else {
				f := rapid.OneOf(rapid.Float64Range(0.2, 1), rapid.Float64Range(1, 1.02), rapid.Float64Range(1, 4)).Draw(rt, "factor")
				prop[i] = min(max(prop[i]*f, 1e-3), 1e6)
			}
			iv := intervalOf(prop[i])
			verdict, err := pgstore.AdjustAt(ctx, ps[i], now, prop[i])
			if err != nil {
				rt.Fatalf("step %d: pacer %d proposes %v: %v", step, i, prop[i], err)
			}
			st, err := ps[i].State(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			before, after, last := shared, int64(st.Interval), sent[i]
			fail := func(format string, args ...any) {
				rt.Helper()
				rt.Fatalf("step %d at %v: pacer %d, last sent %d, proposes %d (%v): shared %d → %d: %s: "+format,
					append([]any{step, now, i, last, iv, verdict, before, after, verdict}, args...)...)
			}
			episode := !cutAt.IsZero() && now.Sub(cutAt) < coolOff && cutBy != i
			switch verdict {
			case "":
				if last == 0 || iv < last && float64(last) >= pgstore.MinClimb*float64(iv) || iv > last {
					fail("a proposal that must be sent was not")
				}
			case "created", "joined":
				if last != 0 || (verdict == "created") != (before == 0) {
					fail("only a first proposal joins, and only on a new key creates")
				}
				want := before
				if before == 0 {
					want = iv
				}
				if after != want {
					fail("want %d", want)
				}
			case "cut", "merged":
				if iv <= last || last == 0 {
					fail("not a cut")
				}
				if (verdict == "merged") != episode {
					fail("merged iff another pacer's episode is cooling off (episode %v by %d)", cutAt, cutBy)
				}
				want := min(ceilMulDiv(before, iv, last), math.MaxInt64)
				if verdict == "merged" {
					want = max(float64(before), min(ceilMulDiv(cutBase, iv, last), math.MaxInt64))
				} else {
					cutAt, cutBy, cutBase = now, i, before
				}
				if math.Abs(float64(after)-want) > 1e-12*want+1 {
					fail("want %.0f", want)
				}
				calmTill = maxTime(calmTill, now.Add(coolOff))
			case "calm":
				if iv >= last || !now.Before(calmTill) || cutBy == i || after != before {
					fail("only another pacer's climb within a cool-off (until %v, cutter %d) is held, unchanged", calmTill, cutBy)
				}
			case "capped", "climbed":
				if iv >= last || now.Before(calmTill) && cutBy != i {
					fail("not a climb outside another pacer's cool-off (until %v, cutter %d)", calmTill, cutBy)
				}
				if floor := max(ceilMulDiv(before, iv, last), float64(min(before, iv)), 1); float64(after) < floor-1e-12*floor || after > before {
					fail("want in [%.0f, %d]: never faster than the proposer's step or the proposal", floor, before)
				}
				if (verdict == "capped") != (after == before) {
					fail("capped iff unchanged")
				}
			default:
				fail("unknown verdict")
			}
			if verdict != "" {
				sent[i] = iv
			}
			shared = after
			history = append(history, obs{now, after})
			for k, h := range history { // the growth bound, over every span
				span := now.Sub(h.at).Seconds() + 1
				if r := float64(h.iv) / float64(after); r > math.Pow(growth, span)*(1+1e-9) {
					fail("the rate grew %.4g× since step %d, %v earlier: more than %v^%.3f", r, k, now.Sub(h.at), growth, span)
				}
			}
		}
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestSharedRateFollowsALoneController: with one process, the shared rate
// is its controller's rate, step for step, up to interval rounding and the
// climbs kept back until they reach 1%, as long as the controller climbs no
// faster than MaxGrowth; so the policy costs a lone process nothing, its
// cool-off included.
func TestSharedRateFollowsALoneController(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	rapid.Check(t, func(rt *rapid.T) {
		p := newPacer(rt, s, pgstore.PacerConfig{HoldAfterCut: time.Minute})
		now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
		rate := rapid.Float64Range(0.1, 1000).Draw(rt, "initial rate")
		var sent, minIV int64 = 0, math.MaxInt64
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for step := range steps {
			if step > 0 {
				dt := rapid.Float64Range(0.01, 2).Draw(rt, "advance (s)")
				now = now.Add(time.Duration(dt * 1e9))
				// At most a second of growth is banked; 2% is left for a
				// climb kept back below 1%.
				up := math.Pow(2.0 /* the default MaxGrowth */, min(dt, 1)) * 0.98
				rate = min(max(rate*rapid.Float64Range(0.3, up).Draw(rt, "factor"), 0.1), 1e4)
			}
			verdict, err := pgstore.AdjustAt(ctx, p, now, rate)
			if err != nil {
				rt.Fatalf("step %d: SetRateAt(%v): %v", step, rate, err)
			}
			if verdict != "" {
				sent = intervalOf(rate)
				minIV = min(minIV, sent)
			}
			st, err := p.State(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			// Each step rounds up by at most 1ns, carried forward in
			// proportion: relative drift at most steps/minIV.
			if tol := float64(step+1) / float64(minIV); math.Abs(float64(st.Interval)/float64(sent)-1) > tol+1e-12 {
				rt.Fatalf("step %d (%s): shared interval %v, the controller's last sent %v: off by more than %.3g",
					step, verdict, st.Interval, time.Duration(sent), tol)
			}
		}
	})
}
