package budget

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
	"pgregory.net/rapid"
)

// TestSharesNeverAddUpToMoreThanTheWhole renews random leases in random
// order, with random demands, deaths and cuts: the shares in force never add
// up to more than the whole; nobody holds more than it asked for unless
// everyone else has what they asked for; a process that has not seen the
// latest cut never raises the rate; a cut is always taken in from a
// process that has seen every cut before it; and so is a ceiling such a
// process lowered without a cut (the bucket fit refining its last cut), in
// a new epoch, or the next renewal would undo it.
func TestSharesNeverAddUpToMoreThanTheWhole(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var doc shareDoc
		now := time.Unix(1e9, 0)
		epochs := map[string]uint64{}
		holders := rapid.SliceOfNDistinct(rapid.StringMatching(`p[0-9]`), 1, 6, rapid.ID[string]).Draw(t, "holders")
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 2000).Draw(t, fmt.Sprint("dt", i))) * time.Millisecond)
			h := rapid.SampledFrom(holders).Draw(t, fmt.Sprint("holder", i))
			st := aimd.State{Rate: rapid.Float64Range(0.1, 500).Draw(t, fmt.Sprint("rate", i))}
			st.Ceiling = st.Rate * rapid.Float64Range(0, 1.5).Draw(t, fmt.Sprint("ceiling", i))
			cut := rapid.Bool().Draw(t, fmt.Sprint("cut", i))
			demand := rapid.Float64Range(0, 300).Draw(t, fmt.Sprint("demand", i))
			hungry := rapid.Bool().Draw(t, fmt.Sprint("hungry", i))
			before, beforeEpoch, beforeCeiling := doc.Rate, doc.Epoch, doc.Ceiling
			mergeShares(&doc, claim{holder: h, now: now, st: st, cut: cut, epoch: epochs[h], demand: demand, hungry: hungry})
			stale := epochs[h] != beforeEpoch
			epochs[h] = doc.Epoch
			if stale && doc.Rate > before && before > 0 {
				t.Fatalf("a process that missed a cut raised the rate %v -> %v", before, doc.Rate)
			}
			if cut && !stale && before > 0 && doc.Rate != st.Rate {
				t.Fatalf("a cut by a process that saw every cut was not taken in: %v, want %v", doc.Rate, st.Rate)
			}
			if !cut && !stale && before > 0 && st.Ceiling > 0 && st.Ceiling < beforeCeiling*(1-rejoinShare) &&
				(doc.Ceiling != st.Ceiling || doc.Rate > before || doc.Epoch == beforeEpoch) {
				t.Fatalf("a ceiling lowered %v -> %v without a cut was not taken in: ceiling %v, rate %v -> %v, epoch %d -> %d",
					beforeCeiling, st.Ceiling, doc.Ceiling, before, doc.Rate, beforeEpoch, doc.Epoch)
			}
			sum := 0.0
			for _, l := range doc.Leases {
				if l.Share < 0 || l.Share > 1 {
					t.Fatalf("share %v out of [0, 1]", l.Share)
				}
				if l.Expires.After(now) {
					sum += l.Share
				}
			}
			if sum > 1+1e-9 {
				t.Fatalf("live shares add up to %v > 1: %+v", sum, doc.Leases)
			}
			var slots uint64
			for h, l := range doc.Leases {
				if slots&l.Slots != 0 {
					t.Fatalf("%s holds slots %x another lease holds (%x): %+v", h, l.Slots, slots, doc.Leases)
				}
				slots |= l.Slots
				if n := bits.OnesCount64(l.Slots); n > slotsFor(l.Share) {
					t.Fatalf("%s holds %d slots at share %v; want at most %d", h, n, l.Share, slotsFor(l.Share))
				}
				if l.Share > 0 && l.Share < minShare {
					t.Fatalf("%s holds a share of %v: rounding", h, l.Share)
				}
			}
		}
	})
}

// TestFairShareSplitsByDemand checks the water-filling: shares add up to at
// most the whole, nobody gets more than it asked for, and what is left
// after the modest ones goes in equal parts to the hungry ones.
func TestFairShareSplitsByDemand(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		doc := shareDoc{Rate: rapid.Float64Range(1, 1000).Draw(t, "rate"), Leases: map[string]shareLease{}}
		n := rapid.IntRange(1, 8).Draw(t, "n")
		for i := range n {
			doc.Leases[fmt.Sprint("p", i)] = shareLease{
				Demand: rapid.Float64Range(0, 2000).Draw(t, fmt.Sprint("demand", i)),
				Hungry: rapid.Bool().Draw(t, fmt.Sprint("hungry", i)),
			}
		}
		sum, hungryShare := 0.0, -1.0
		for h, l := range doc.Leases {
			f := fairShare(doc, h)
			sum += f
			if !l.Hungry && f > l.Demand/doc.Rate+1e-9 {
				t.Fatalf("%s asked for %v of %v and got %v", h, l.Demand, doc.Rate, f)
			}
			if l.Hungry {
				if hungryShare >= 0 && abs(f-hungryShare) > 1e-9 {
					t.Fatalf("hungry leases got %v and %v", hungryShare, f)
				}
				hungryShare = f
			}
		}
		if sum > 1+1e-9 {
			t.Fatalf("fair shares add up to %v", sum)
		}
	})
}

func abs(x float64) float64 { return max(x, -x) }

// TestGoneHereSeesDeadProcesses: a holder of this machine whose process no
// longer runs is gone; this process, another machine's holder, and names
// that are not holder names are not.
func TestGoneHereSeesDeadProcesses(t *testing.T) {
	if goneHere(holderID()) {
		t.Fatal("this process reads as gone")
	}
	for _, h := range []string{"other-host-1-ab", "x", "", hostname + "-notapid-ab", hostname + "-0-ab"} {
		if goneHere(h) {
			t.Errorf("goneHere(%q) = true; want false", h)
		}
	}
	if processGone(os.Getpid()) {
		t.Fatal("processGone(own pid) = true")
	}
	if runtime.GOOS != "windows" && !goneHere(fmt.Sprintf("%s-%d-ab", hostname, 1<<22+12345)) {
		t.Error("a pid no process has reads as alive")
	}
}

// TestSharesHoldThroughOutages runs the lease protocol against a store
// that goes away for random spells (each longer than a renewal period, as
// a database restart is: every process sees it), with processes that renew
// about every second (a renewal taking up to half a second; soon after one
// that failed), die at random, and pace at
// half their last share from the moment a lease ends without renewal (as
// Local.lapse does): what the live processes pace at never adds up to more
// than the whole, however long the spells and in whatever order the
// processes come back; and once the store is back and the dead processes'
// leases have ended, the living are granted the whole again within a few
// leases.
func TestSharesHoldThroughOutages(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type proc struct {
			share   float64   // what it paces at
			expires time.Time // the end of its lease
			next    time.Time // its next renewal
			failed  time.Time // its first failed renewal since the last that did not fail
			dead    bool
		}
		start := time.Unix(1e9, 0)
		n := rapid.IntRange(2, 6).Draw(t, "n")
		procs := make([]proc, n)
		for i := range procs {
			procs[i] = proc{next: start.Add(time.Duration(rapid.IntRange(0, 1000).Draw(t, fmt.Sprint("first", i))) * time.Millisecond)}
		}
		// The store is down in [downs[2k], downs[2k+1]), after every
		// process joined (one that starts while the store is down paces
		// at startShare, a guess).
		var downs []time.Time
		at := start.Add(time.Second)
		for i := range rapid.IntRange(0, 3).Draw(t, "outages") {
			at = at.Add(time.Duration(rapid.IntRange(0, 10000).Draw(t, fmt.Sprint("up", i))) * time.Millisecond)
			downs = append(downs, at)
			at = at.Add(time.Duration(rapid.IntRange(int(shareSilence/time.Millisecond)+100, 10000).Draw(t, fmt.Sprint("down", i))) * time.Millisecond)
			downs = append(downs, at)
		}
		down := func(now time.Time) bool {
			for k := 0; k+1 < len(downs); k += 2 {
				if !now.Before(downs[k]) && now.Before(downs[k+1]) {
					return true
				}
			}
			return false
		}
		// The horizon: a few leases after the last outage, and after the
		// first process's time learning the provider alone (see learn),
		// which holds the others at nothing; the learner hands on at its
		// renewal after learnFor, the others take their part at theirs.
		// (Counted from the last outage alone, two renewals of 1.2 s
		// after a learner's 10 s left the other process at nothing when
		// the run ended, 13 s in.)
		end := at.Add(4 * shareTTL)
		if learnt := start.Add(time.Second + learnFor + 4*shareTTL); learnt.After(end) {
			end = learnt
		}
		var doc shareDoc
		for step := 0; ; step++ {
			i := -1
			for k, pr := range procs {
				if !pr.dead && (i < 0 || pr.next.Before(procs[i].next)) {
					i = k
				}
			}
			if i < 0 || procs[i].next.After(end) {
				break
			}
			now := procs[i].next
			for k := range procs {
				if pr := &procs[k]; !pr.expires.IsZero() && !now.Before(pr.expires) {
					pr.share *= safeShare // lapse, once
					pr.expires = time.Time{}
				}
			}
			if down(now) && procs[i].failed.IsZero() {
				procs[i].failed = now
			}
			if !down(now) {
				mergeShares(&doc, claim{holder: fmt.Sprint("p", i), now: now, st: aimd.State{Rate: 10}, epoch: doc.Epoch,
					demand: minDemand, hungry: true, failed: procs[i].failed})
				l := doc.Leases[fmt.Sprint("p", i)]
				procs[i].share, procs[i].expires, procs[i].failed = l.Share, l.Expires, time.Time{}
			}
			sum := 0.0
			for _, pr := range procs {
				if !pr.dead {
					sum += pr.share
				}
			}
			if sum > 1+1e-9 {
				t.Fatalf("at %v the live processes pace at %v in all (store down in %v): %+v; doc %+v",
					now.Sub(start), sum, downs, procs, doc.Leases)
			}
			latency := time.Duration(rapid.IntRange(0, 500).Draw(t, fmt.Sprint("latency", step))) * time.Millisecond
			procs[i].next = now.Add(shareEvery + latency)
			if !procs[i].failed.IsZero() {
				procs[i].next = now.Add(shareSoon + latency)
			}
			if now.Before(at.Add(shareTTL)) && rapid.IntRange(0, 40).Draw(t, fmt.Sprint("dies", step)) == 0 {
				procs[i].dead = true
			}
		}
		sum, live := 0.0, 0
		for _, pr := range procs {
			if !pr.dead {
				sum += pr.share
				live++
			}
		}
		if live > 0 && sum < 0.9 {
			t.Fatalf("%d live processes pace at %v in all, %v after the last outage (%v after the start); want about the whole: %+v",
				live, sum, end.Sub(at), end.Sub(start), procs)
		}
	})
}

// TestDeadShareGoesUnderAFlakyStore: a store that fails one renewal in two
// (each retried a quarter of a second later) is in trouble all the time,
// so a dead holder's lease keeps half its share for one more lease; but
// not for good: the living holder has the whole within two leases of the
// death.
func TestDeadShareGoesUnderAFlakyStore(t *testing.T) {
	var doc shareDoc
	start := time.Unix(1e9, 0)
	renew := func(h string, now, failed time.Time) float64 {
		mergeShares(&doc, claim{holder: h, now: now, st: aimd.State{Rate: 10}, epoch: doc.Epoch,
			demand: minDemand, hungry: true, failed: failed})
		return doc.Leases[h].Share
	}
	renew("dead", start, time.Time{})
	renew("alive", start.Add(100*time.Millisecond), time.Time{})
	var share float64
	for i := range 12 {
		at := start.Add(time.Duration(i+1) * time.Second)
		var failed time.Time
		if i%2 == 0 {
			failed, at = at, at.Add(shareSoon) // this renewal failed; the retry did not
		}
		share = renew("alive", at, failed)
		if at.Sub(start) > 2*shareTTL+shareEvery && share < 1-1e-9 {
			t.Fatalf("%v after the death, the living holder has %v; want the whole: %+v", at.Sub(start), share, doc.Leases)
		}
	}
	if share < 1-1e-9 {
		t.Fatalf("the living holder ends with %v; want the whole", share)
	}
}

// TestLearnerLearnsAlone: the first holder of a provider nobody has learned
// yet holds all of it while the others wait; learning ends for good after
// learnCuts cuts (or at LearnUntil), and then a provider the learner found
// an allowance at is split by rate, one that refused it and showed none
// goes to turns, the learner holding it until the first plan is in force;
// a learner whose lease ends stops learning at once.
func TestLearnerLearnsAlone(t *testing.T) {
	now := time.Unix(1e9, 0)
	renew := func(doc *shareDoc, h string, epoch uint64, cut bool, allowance float64) float64 {
		mergeShares(doc, claim{holder: h, now: now, st: aimd.State{Rate: 40, Ceiling: 50}, cut: cut, epoch: epoch,
			demand: 40, hungry: true, allowance: allowance})
		takeTurns(doc, now, 0, 0, turnLeadWatched)
		return doc.Leases[h].Share
	}
	for _, c := range []struct {
		name      string
		allowance float64
		turns     bool
	}{{"allowance: split by rate", 10, false}, {"none: turns", 0, true}} {
		t.Run(c.name, func(t *testing.T) {
			var doc shareDoc
			if sh := renew(&doc, "a", 0, false, 0); sh != 1 || doc.Learner != "a" {
				t.Fatalf("first holder: share %v, learner %q; want 1, a", sh, doc.Learner)
			}
			if sh := renew(&doc, "b", doc.Epoch, false, 0); sh != 0 {
				t.Fatalf("second holder while a learns: share %v; want 0", sh)
			}
			for range learnCuts {
				now = now.Add(time.Second)
				if sh := renew(&doc, "b", doc.Epoch, false, 0); sh != 0 && doc.Learner != "" {
					t.Fatalf("b holds %v while a learns; want 0", sh)
				}
				renew(&doc, "a", doc.Epoch, true, c.allowance)
			}
			if c.turns {
				if doc.Turns == nil || doc.Learner != "a" {
					t.Fatalf("after %d cuts, no allowance: turns %v, learner %q; want turns planned, a still learning", learnCuts, doc.Turns, doc.Learner)
				}
				now = doc.Turns.Plans[0].From
				renew(&doc, "b", doc.Epoch, false, 0)
			}
			if doc.Learner != "" {
				t.Fatalf("learning did not end: learner %q", doc.Learner)
			}
			now = now.Add(time.Second)
			renew(&doc, "b", doc.Epoch, false, 0)
			renew(&doc, "a", doc.Epoch, false, c.allowance) // gives back what b is owed
			if sh := renew(&doc, "b", doc.Epoch, false, 0); sh < 0.4 {
				t.Errorf("after learning, b holds %v; want about half", sh)
			}
			if (doc.Turns != nil) != c.turns {
				t.Errorf("turns %v; want %v", doc.Turns != nil, c.turns)
			}
			delete(doc.Leases, "b")
			renew(&doc, "c", doc.Epoch, false, 0)
			if doc.Learner != "" {
				t.Errorf("learning started again: learner %q", doc.Learner)
			}
		})
	}
	t.Run("learner gone", func(t *testing.T) {
		var doc shareDoc
		renew(&doc, "a", 0, false, 0)
		renew(&doc, "b", doc.Epoch, false, 0)
		now = now.Add(2 * shareTTL)
		if sh := renew(&doc, "b", doc.Epoch, false, 0); doc.Learner != "" || sh == 0 {
			t.Errorf("learner's lease ended: learner %q, b holds %v; want none, the whole", doc.Learner, sh)
		}
	})
}

// TestMergeRefusals: the shared document keeps each refusal of the last
// minute once, oldest first, the latest shareRefusals of all the holders
// told it, whatever a document held (one from a fault may hold any number:
// the merge looks at the latest of each only, not every pair; refusals
// dated far ahead, which every process ignores, pushed the real ones out
// for good, found by a hostile review).
func TestMergeRefusals(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	rapid.Check(t, func(rt *rapid.T) {
		draw := func(label string) []time.Time {
			offs := rapid.SliceOfN(rapid.IntRange(0, 40), 0, 20).Draw(rt, label)
			ts := make([]time.Time, len(offs))
			for i, o := range offs {
				ts[i] = t0.Add(time.Duration(o) * time.Second)
			}
			return ts
		}
		a, b := draw("a"), draw("b")
		got := mergeRefusals(t0.Add(40*time.Second), a, b)
		var want []time.Time
		for _, x := range slices.Concat(a, b) {
			if !slices.ContainsFunc(want, x.Equal) {
				want = append(want, x)
			}
		}
		slices.SortFunc(want, time.Time.Compare)
		want = want[max(0, len(want)-shareRefusals):]
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			rt.Fatalf("mergeRefusals(%v, %v) = %v; want %v", a, b, got, want)
		}
	})
	// Dated an hour ahead (a clock far off, garbage) or over a minute ago:
	// dropped, or they would push the real ones out for good.
	now := t0.Add(time.Minute)
	var odd []time.Time
	for i := range 8 {
		odd = append(odd, now.Add(time.Hour+time.Duration(i)), now.Add(-2*time.Minute+time.Duration(i)))
	}
	real := []time.Time{now.Add(-30 * time.Second), now.Add(-time.Second), now.Add(500 * time.Millisecond)}
	if got := mergeRefusals(now, odd, real); !slices.EqualFunc(got, real, time.Time.Equal) {
		t.Errorf("mergeRefusals(far ahead and long ago, %v) = %v; want only these", real, got)
	}
	huge := make([]time.Time, 200000)
	for i := range huge {
		huge[i] = t0.Add(time.Duration(i) * time.Millisecond)
	}
	if got := mergeRefusals(huge[len(huge)-1], huge, huge); len(got) != shareRefusals || !got[len(got)-1].Equal(huge[len(huge)-1]) {
		t.Errorf("mergeRefusals of 200000 refusals kept %d, the last %v; want the latest %d", len(got), got[len(got)-1], shareRefusals)
	}
}

// TestStaggerIsBounded: a holder's stagger after a pause lies within a
// second whatever the rate: a tiny rate (from a document a fault wrote)
// overflowed the Duration to minus 292 years, which unpaused the pacer.
func TestStaggerIsBounded(t *testing.T) {
	t.Parallel()
	s := &sharer{id: "b"}
	for _, rate := range []float64{1e-300, 1e-12, 0.5, 3, 1e9} {
		for _, holders := range [][]string{{"a", "b"}, {"a", "c"}, {"a", "b", "c", "d"}} {
			if d := s.stagger(rate, holders); d < 0 || d > time.Second {
				t.Errorf("stagger(%v, %v) = %v; want within [0, 1s]", rate, holders, d)
			}
		}
	}
}

// TestFirstTurnIsTheLearners: when learning hands a provider on to turns,
// the first window is the learner's (it sends at the whole rate until the
// plan is in force), and every other holder that sends stops a guard
// before the plan: each hand-over from the learner to another holder at
// the plan's start drew a refusal from a real provider that allows no
// burst.
func TestFirstTurnIsTheLearners(t *testing.T) {
	now := time.Unix(1e9, 0)
	renew := func(doc *shareDoc, h string, cut bool) {
		mergeShares(doc, claim{holder: h, now: now, st: aimd.State{Rate: 15, Ceiling: 15}, cut: cut, epoch: doc.Epoch,
			demand: 15, hungry: true})
		takeTurns(doc, now, 0, 0, turnLeadWatched)
	}
	var doc shareDoc
	renew(&doc, "m", false) // the learner
	renew(&doc, "a", false)
	renew(&doc, "z", false)
	for range learnCuts {
		now = now.Add(time.Second)
		renew(&doc, "a", false)
		renew(&doc, "z", false)
		renew(&doc, "m", true)
	}
	if doc.Turns == nil || len(doc.Turns.Plans) == 0 {
		t.Fatalf("no turns planned after %d cuts: %+v", learnCuts, doc.Turns)
	}
	p := doc.Turns.Plans[0]
	if p.Holders[0] != "m" {
		t.Fatalf("the first plan's holders %v; want the learner m first", p.Holders)
	}
	guard := turnGuard(15)
	if w, on := turnWait(doc.Turns, "a", p.From.Add(-guard/2), guard); w == 0 || on {
		t.Errorf("a, whose window is not the first, may send %v before the plan: wait %v, in force %v", guard/2, w, on)
	}
	if w, _ := turnWait(doc.Turns, "m", p.From.Add(-guard/2), guard); w != 0 {
		t.Errorf("the learner waits %v before its own first window", w)
	}
}

// TestASharedPauseIsKeptUnderAMaxPauseWithNoEnd: a host that sets MaxPause
// to the longest Duration (no cap: a provider known to ban for days) keeps
// the pause other processes shared: the bound a pause is checked against
// saturates (MaxPause plus the clock skew allowed overflowed to the past,
// and every shared pause was dropped as one no answer could have set).
func TestASharedPauseIsKeptUnderAMaxPauseWithNoEnd(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	doc := shareDoc{PausedUntil: now.Add(time.Hour)}
	doc.sane(now, time.Duration(math.MaxInt64))
	if !doc.PausedUntil.Equal(now.Add(time.Hour)) {
		t.Fatalf("a shared pause of an hour under MaxPause = MaxInt64 became %v", doc.PausedUntil)
	}
}
