package budget

import (
	"fmt"
	"math"
	"math/bits"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
)

// TestRoundingIsNoShare: five leases of a fifth each, as the water-filling
// computes them, leave 1e-16 of the whole by rounding; a sixth holder is
// granted none of it. (Granted it, it could not pace its known limits at
// so little, kept its last limiters, the whole, and six processes sent 22
// units in a second against a limit of 21.)
func TestRoundingIsNoShare(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0)
	fifth := math.Nextafter(0.2, 0)
	doc := shareDoc{Rate: 10, LearnUntil: now.Add(-time.Minute), Leases: map[string]shareLease{}}
	for i := range 5 {
		doc.Leases[fmt.Sprint("p", i)] = shareLease{Share: fifth, Hungry: true, Expires: now.Add(shareTTL)}
	}
	mergeShares(&doc, claim{holder: "q", now: now, st: aimd.State{Rate: 10}, hungry: true})
	if got := doc.Leases["q"].Share; got != 0 {
		t.Errorf("a holder the others leave %v of the whole was granted %v; want 0", 1-5*fifth, got)
	}
}

// TestSlotsSpreadAndTrim: residues are handed out bit-reversed, so a
// lease's residues are spread over the cycle (no two of a lease of a
// quarter closer than four slots apart), and a lease trimmed to its safe
// share keeps the same ones on both sides (see lapse and mergeShares).
func TestSlotsSpreadAndTrim(t *testing.T) {
	t.Parallel()
	doc := shareDoc{Leases: map[string]shareLease{"a": {Share: 0.25}}}
	mask := allotSlots(&doc, "a", 0.25)
	if n := bits.OnesCount64(mask); n != 16 {
		t.Fatalf("a quarter holds %d slots; want 16", n)
	}
	last := -1
	for r := range slotCycle {
		if mask&(1<<r) != 0 {
			if last >= 0 && r-last < 4 {
				t.Errorf("slots %d and %d of a quarter are %d apart; want at least 4 (mask %x)", last, r, r-last, mask)
			}
			last = r
		}
	}
	if got := trimSlots(mask, 8); bits.OnesCount64(got) != 8 || got&^mask != 0 {
		t.Errorf("trimSlots(%x, 8) = %x; want 8 of its slots", mask, got)
	}
	doc.Leases["a"] = shareLease{Share: 0.25, Slots: mask}
	other := allotSlots(&doc, "b", 0.75)
	if other&mask != 0 || bits.OnesCount64(other) != 48 {
		t.Errorf("b at three quarters holds %x with a's %x; want the other 48", other, mask)
	}
}

// TestTightLimit: a limit is slotted when the units its holders pace at
// least one each of add up to more than its burst: more holders than
// burst, or one that holds most of it beside others that hold a unit.
func TestTightLimit(t *testing.T) {
	t.Parallel()
	doc := func(shares ...float64) *shareDoc {
		d := &shareDoc{Leases: map[string]shareLease{}}
		for i, s := range shares {
			d.Leases[fmt.Sprint("p", i)] = shareLease{Share: s}
		}
		return d
	}
	for _, c := range []struct {
		doc   *shareDoc
		burst int
		want  bool
	}{
		{doc(1), 1, false},
		{doc(0.5, 0.5), 1, true},
		{doc(0.5, 0.5), 2, false},
		{doc(1.0/3, 1.0/3, 1.0/3), 2, true},
		{doc(0.25, 0.25, 0.25, 0.25), 4, false},
		{doc(0.9, 0.05, 0.05), 4, true},      // 3 + 1 + 1
		{doc(0.9, 0.05, 0.05, 0), 20, false}, // 18 + 1 + 1
	} {
		if got := tightLimit(c.doc, c.burst); got != c.want {
			t.Errorf("tightLimit(%+v, %d) = %v; want %v", c.doc.Leases, c.burst, got, c.want)
		}
	}
}

// TestALimitThatStopsBeingSlottedStartsEmpty: a process whose limit was
// slotted (its burst and the others' added up to more than the limit's)
// and is left alone with it starts with nothing of its burst: what it
// banked while slotted is not its own, and the others may have spent it
// in their slots just before. (Carried over, a process left alone by
// seven sent 9.8 s after another's slot against 1 per 10 s.)
func TestALimitThatStopsBeingSlottedStartsEmpty(t *testing.T) {
	t.Parallel()
	p, err := newLocal("k", Config{Limits: []Limit{{Count: 1, Per: 10 * time.Second, Burst: 1}}}, "Config")
	if err != nil {
		t.Fatal(err)
	}
	p.sh.id = "a"
	now := time.Unix(1e9, 0)
	two := &shareDoc{Leases: map[string]shareLease{"a": {Share: 0.5}, "b": {Share: 0.5}}}
	two.Leases["a"] = shareLease{Share: 0.5, Slots: allotSlots(two, "a", 0.5)}
	p.splitLimits(now, 0.5, p.setSlots(two.Leases["a"].Slots, two))
	if !p.slot.on[0] {
		t.Fatalf("two holders of a limit of burst 1: not slotted")
	}
	now = now.Add(10 * time.Minute) // idle: its limiter banks its whole burst
	if w := waitAt(p.lims()[0], now, 1); w > 0 {
		t.Fatalf("slotted, idle for 10 minutes: waits %v", w)
	}
	alone := &shareDoc{Leases: map[string]shareLease{"a": {Share: 1}}}
	p.splitLimits(now, 1, p.setSlots(allotSlots(alone, "a", 1), alone))
	if p.slot.on[0] {
		t.Fatalf("one holder of a limit of burst 1: still slotted")
	}
	if w := waitAt(p.lims()[0], now, 1); w <= 0 {
		t.Errorf("left alone with a limit that was slotted, it may send at once; want a wait of one interval")
	}
}

// TestAShareAfterNoneStartsEmpty: a process granted a share again after
// holding none starts with nothing of its burst, even when the burst of
// its share is the one it had: kept, its limiter had banked the burst
// while the others held the whole and spent it. (Granted the whole after
// the learner left, a process sent 0.75 s after the learner's last
// request against 1 a second.)
func TestAShareAfterNoneStartsEmpty(t *testing.T) {
	t.Parallel()
	p, err := newLocal("k", Config{Limits: []Limit{{Count: 1, Per: time.Second, Burst: 1}}}, "Config")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	p.splitLimits(now, 0.5, false)
	p.splitLimits(now, 0, false) // the others hold it all
	now = now.Add(10 * time.Minute)
	p.splitLimits(now, 1, false) // the same burst, 1
	if w := waitAt(p.lims()[0], now, 1); w <= 0 {
		t.Errorf("granted the whole after none, it may send at once; want a wait of one interval")
	}
}
