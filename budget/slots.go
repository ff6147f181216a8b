package budget

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// Slots. Processes that split a known limit by shares each pace their
// share of its rate with their share of its burst, at least one unit: a
// process that holds less than a unit of the burst could otherwise never
// send. When those units add up to more than the limit's burst (more
// processes than Burst, or one that holds most of it while the others hold
// a unit each), the processes, each idle for one interval of its own pace,
// could send a unit each in the same instant: N − Burst over the limit in
// a window. The limit is then slotted: time is cut into slots of one
// interval of the limit's whole pace, counted from the Unix epoch on every
// process's clock, and slot j belongs to the holder whose lease holds its
// residue j mod slotCycle (see shareLease.Slots; the document gives each
// residue to one lease at most, as it grants shares). A process sends at
// most one call per slot of its own, within slotOpen of the slot's start,
// on top of pacing its share as before. Any window of length d then holds
// calls of slots j..j+m with m·I − open < d: at most ⌊(d+open)/I⌋ + 1, which
// open < Count·I − Per keeps within Count for a window of Per. No process
// waits for another, and the store is met only at renewals, as before.
//
// A call of weight w uses w slots of its own, sent at the last: it may
// carry w − 1 units of slots before a window into it, which Burst covers
// while w ≤ Burst (a heavier call may put its excess over Burst more in a
// window, as it would alone after an idle spell shorter than that excess).
// Slots are read on each process's clock, as turns are: processes on
// different machines need clocks that agree to well under slotOpen.
const slotCycle = 64

// slotOrder is the order in which residues are handed out: bit-reversed,
// so that the residues of a lease, a run of this order, are spread over
// the cycle, and a process's slots come about evenly spaced at its pace.
var slotOrder = func() (o [slotCycle]uint8) {
	for i := range o {
		o[i] = uint8(bits.Reverse8(uint8(i)) >> 2)
	}
	return o
}()

// slotsFor is how many residues a lease of share holds: its share of the
// cycle, at least one (more than slotCycle holders leave some with none
// until one goes: their calls wait).
func slotsFor(share float64) int {
	if share <= 0 {
		return 0
	}
	return max(1, min(slotCycle, int(math.Floor(share*slotCycle+1e-9))))
}

// trimSlots keeps the first want residues of mask, in slotOrder: a lease
// whose share shrank, or lapsed to its safe share, keeps these, read the
// same way by its holder and by the document.
func trimSlots(mask uint64, want int) uint64 {
	var out uint64
	for _, r := range slotOrder {
		if want <= 0 {
			break
		}
		if mask&(1<<r) != 0 {
			out |= 1 << r
			want--
		}
	}
	return out
}

// allotSlots returns the residues holder may hold in doc at share: those
// its lease holds that no other lease holds, trimmed to its share, then
// free ones in slotOrder. Other leases' residues are never taken (a
// residue one gives back is taken up once the document shows it gone), so
// no two leases hold one; and since the shares never add up to more than
// the whole, the free ones are always enough.
func allotSlots(doc *shareDoc, holder string, share float64) uint64 {
	var others uint64
	for h, l := range doc.Leases {
		if h != holder {
			others |= l.Slots
		}
	}
	want := slotsFor(share)
	mask := trimSlots(doc.Leases[holder].Slots&^others, want)
	for _, r := range slotOrder {
		if bits.OnesCount64(mask) >= want {
			break
		}
		if (others|mask)&(1<<r) == 0 {
			mask |= 1 << r
		}
	}
	return mask
}

// tightLimit reports whether the leases of doc, each pacing its share of
// a limit of burst with at least one unit of it, hold more than burst
// units together: the limit must be slotted.
func tightLimit(doc *shareDoc, burst int) bool {
	units := 0
	for _, l := range doc.Leases {
		if l.Share > 0 {
			units += max(1, int(l.Share*float64(burst)))
		}
	}
	return units > burst
}

// slotShape returns the length of l's slots (one interval of its whole
// pace) and how long after its start a slot is open, in nanoseconds.
func slotShape(l Limit) (length, open int64) {
	_, rate := l.shape()
	iv := 1 / rate
	openSec := min(iv, float64(l.Count)*iv-l.Per.Seconds()) / 2
	return int64(math.Ceil(iv * 1e9)), max(1, int64(openSec*1e9))
}

// slotAt returns the first time at or after t at which the i-th known
// limit, slotted, lets this process send a call of cost n: the start of
// the n-th slot of its own after the last it used (or t, when that slot is
// open then), and that slot. ok is false when it holds no slot. p.limMu is
// held.
func (p *local) slotAt(i int, t time.Time, n int) (at time.Time, slot int64, ok bool) {
	mask := p.slot.mask
	if mask == 0 {
		return t, 0, false
	}
	length, open := slotShape(p.cfg.Limits[i])
	tn := t.UnixNano()
	j := tn / length
	if tn-j*length >= open {
		j++ // this slot has closed: the next
	}
	last := p.slot.last[i]
	have := 0 // own unused slots after last, before j: a heavy call's first units
	for k := max(last+1, j-int64(n)*slotCycle); k < j && have < n-1; k++ {
		if owns(mask, k) {
			have++
		}
	}
	for j = max(j, last+1); !owns(mask, j) || have < n-1; j++ {
		if owns(mask, j) {
			have++
		}
	}
	return time.Unix(0, max(tn, j*length)), j, true
}

// owns reports whether mask holds slot j's residue.
func owns(mask uint64, j int64) bool { return mask&(1<<uint(j%slotCycle)) != 0 }

// slotState is what a shared provider knows of its slots; guarded by
// local.limMu.
type slotState struct {
	mask uint64  // the residues this process holds
	on   []bool  // per known limit: slotted (see tightLimit)
	last []int64 // per known limit: the last slot used
	// off, per known limit, says it stopped being slotted since the
	// limits were last made: made again, it starts with nothing of its
	// burst (see splitLimits).
	off []bool
}

// setSlots makes this process send in the slots of mask, for the known
// limits that doc's leases hold too tightly (doc nil: as they were). It
// reports whether the known limits must be made again (see splitLimits):
// a limit became slotted or stopped being (its burst changes, see
// Limit.shareBurst, and calls booked out of slots must book again in
// them), or this process's slots moved while one is (calls booked in a
// slot it gave up must book again).
func (p *local) setSlots(mask uint64, doc *shareDoc) (remake bool) {
	if len(p.cfg.Limits) == 0 {
		return false
	}
	p.limMu.Lock()
	defer p.limMu.Unlock()
	s := &p.slot
	if s.on == nil {
		s.on, s.off, s.last = make([]bool, len(p.cfg.Limits)), make([]bool, len(p.cfg.Limits)), make([]int64, len(p.cfg.Limits))
		for i := range s.last {
			s.last[i] = math.MinInt64 / 2
		}
	}
	moved, turned := mask != s.mask, false
	if doc != nil {
		for i, l := range p.cfg.Limits {
			burst, _ := l.shape()
			if on := tightLimit(doc, burst); on != s.on[i] {
				s.on[i], s.off[i], turned = on, !on, true
			}
		}
	}
	s.mask = mask
	return turned || moved && slices.Contains(s.on, true)
}
