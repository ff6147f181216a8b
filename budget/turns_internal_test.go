package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
	"pgregory.net/rapid"
)

// TestTurnsNeverOverlap renews random holders at random times, each at
// least once a shareEvery while it lives, with joins and deaths, through
// the document as a store keeps it (JSON): at no instant do two holders'
// views let both send while either is in turns, so a provider that allows
// no burst sees one sender at a time; and a holder that keeps renewing
// gets a window before long.
func TestTurnsNeverOverlap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type view struct {
			at    time.Time
			turns *shareTurns
		}
		t0 := time.Unix(1e9, 0)
		now := t0
		rate := rapid.Float64Range(0.5, 300).Draw(t, "rate")
		doc := shareDoc{Rate: rate}
		views := map[string][]view{}
		last := map[string]time.Time{} // the live holders' last renewals
		died := map[string]time.Time{}
		next := 0
		join := func() {
			h := fmt.Sprintf("h%d", next)
			next++
			last[h] = time.Time{}
		}
		for range rapid.IntRange(2, 5).Draw(t, "holders") {
			join()
		}
		renew := func(h string, refused float64) {
			mergeShares(&doc, claim{holder: h, now: now, st: aimd.State{Rate: rate}, epoch: doc.Epoch, demand: 1, hungry: true})
			takeTurns(&doc, now, 10, refused, turnLead)
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			doc = shareDoc{}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			var v shareDoc // the holder's own copy, as a renewal leaves it
			_ = json.Unmarshal(b, &v)
			views[h] = append(views[h], view{now, v.Turns})
			last[h] = now
		}
		for i := range rapid.IntRange(1, 80).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 400).Draw(t, fmt.Sprint("dt", i))) * time.Millisecond)
			// Every live holder renews at least once a shareEvery.
			for _, h := range slices.Sorted(mapKeys(last)) {
				if !last[h].IsZero() && now.Sub(last[h]) >= shareEvery {
					renew(h, 0)
				}
			}
			switch rapid.IntRange(0, 9).Draw(t, fmt.Sprint("event", i)) {
			case 0:
				join()
			case 1:
				if len(last) > 1 {
					h := rapid.SampledFrom(slices.Sorted(mapKeys(last))).Draw(t, fmt.Sprint("dies", i))
					delete(last, h)
					died[h] = now
				}
			default:
				h := rapid.SampledFrom(slices.Sorted(mapKeys(last))).Draw(t, fmt.Sprint("renews", i))
				refused := 0.0
				if rapid.IntRange(0, 3).Draw(t, fmt.Sprint("collides", i)) == 0 {
					refused = 5
				}
				renew(h, refused)
			}
		}
		// Probe the timeline: each holder acts on its latest view, if it is
		// fresh (waitShare waits for a renewal otherwise) and it lives.
		for i := range 400 {
			at := t0.Add(time.Duration(rapid.Int64Range(0, int64(now.Sub(t0))).Draw(t, fmt.Sprint("probe", i))))
			var free, turns []string
			for h, vs := range views {
				k := -1
				for j, v := range vs {
					if !v.at.After(at) {
						k = j
					}
				}
				if k < 0 || at.Sub(vs[k].at) > shareEvery+shareSoon {
					continue
				}
				if d, ok := died[h]; ok && !at.Before(d) {
					continue
				}
				wait, on := turnWait(vs[k].turns, h, at, turnGuard(rate))
				if wait == 0 {
					free = append(free, h)
					if on {
						turns = append(turns, h)
					}
				}
			}
			if len(turns) > 0 && len(free) > 1 {
				t.Fatalf("at %v, %v may send, %v of them in turns", at.Sub(t0), free, turns)
			}
		}
	})
}

// mapKeys yields the keys of m.
func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestTurnsStartOnCollisionsOnly: hungry holders take turns when 15%
// of their requests are refused, not for the few refusals of a climb's
// overshoot, and not for a lone holder; once the first plan is in force,
// the ceiling the collisions taught is forgotten for the highest one learned
// before them, unconfirmed; turns end after turnHold.
func TestTurnsStartOnCollisionsOnly(t *testing.T) {
	now := time.Unix(1e9, 0)
	doc := shareDoc{}
	ceiling := 20.0 // a's overshoot before the collisions
	renew := func(h string, sent, refused float64) {
		mergeShares(&doc, claim{holder: h, now: now, st: aimd.State{Rate: 10, Ceiling: ceiling, Confirmed: true}, cut: refused > 0, epoch: doc.Epoch, demand: 1, hungry: true})
		takeTurns(&doc, now, sent, refused, turnLead)
	}
	renew("a", 10, 10)
	if doc.Turns != nil {
		t.Fatal("a lone holder takes turns")
	}
	renew("b", 100, 0)
	if doc.Turns != nil {
		t.Fatalf("turns for 10 refused of 110 (9%%): %+v", doc.Turns)
	}
	now = now.Add(time.Second)
	ceiling = 12 // what the collisions taught
	renew("a", 60, 40)
	if doc.Turns == nil || len(doc.Turns.Plans) != 1 {
		t.Fatalf("no turns after a quarter of the requests were refused: %+v", doc)
	}
	p := doc.Turns.Plans[0]
	if !slices.Equal(p.Holders, []string{"a", "b"}) || p.From.Before(now.Add(turnLead)) || p.Window < turnWindow {
		t.Fatalf("plan %+v: want a and b in turn, from %v on, windows of %v at least", p, now.Add(turnLead), turnWindow)
	}
	if doc.Ceiling != 12 {
		t.Fatalf("the ceiling moved before the turns are in force: %v", doc.Ceiling)
	}
	epoch := doc.Epoch
	now = p.From
	renew("b", 10, 0)
	if doc.Ceiling != 20 || doc.Confirmed || doc.Epoch != epoch+1 {
		t.Fatalf("turns in force: ceiling %v confirmed %v epoch %d; want 20 (the highest before the collisions), false, %d", doc.Ceiling, doc.Confirmed, doc.Epoch, epoch+1)
	}
	if a, b := fairShare(doc, "a"), fairShare(doc, "b"); a != 0.5 || b != 0.5 {
		t.Fatalf("shares in turns %v, %v; want even", a, b)
	}
	now = now.Add(turnHold)
	renew("a", 10, 0)
	if doc.Turns != nil {
		t.Fatalf("turns outlast turnHold: %+v", doc.Turns)
	}
}

// TestTurnWaitWalksTheWindows checks turnWait against a plan of three
// holders: each may send in its own window until the guard, and waits for
// its next window otherwise; a holder in no plan waits until turns end.
func TestTurnWaitWalksTheWindows(t *testing.T) {
	from := time.Unix(1e9, 0)
	tr := &shareTurns{Until: from.Add(time.Minute), Plans: []turnPlan{
		{From: from, Window: 2 * time.Second, Holders: []string{"a", "b", "c"}},
	}}
	for _, c := range []struct {
		holder string
		at     time.Duration
		wait   time.Duration
		on     bool
	}{
		{"a", -time.Second, 0, false}, // before the plan: not in force
		{"b", -time.Second, 0, false},
		{"b", -50 * time.Millisecond, 50 * time.Millisecond, false}, // the guard before the plan: a's window comes first
		{"a", -50 * time.Millisecond, 0, false},                     // a's own
		{"a", 0, 0, true},
		{"a", 1899 * time.Millisecond, 0, true},
		{"a", 1900 * time.Millisecond, 4100 * time.Millisecond, true}, // the guard: next window at 6 s
		{"b", 0, 2 * time.Second, true},
		{"c", 5 * time.Second, 0, true},
		{"b", 5 * time.Second, 3 * time.Second, true},
		{"z", 0, shareSoon, true},    // in no plan: ask again after a renewal
		{"a", time.Minute, 0, false}, // turns over
	} {
		wait, on := turnWait(tr, c.holder, from.Add(c.at), 100*time.Millisecond)
		if wait != c.wait || on != c.on {
			t.Errorf("turnWait(%s at %v) = %v, %v; want %v, %v", c.holder, c.at, wait, on, c.wait, c.on)
		}
	}
}

// TestTurnEdgesHandOnTheClimb checks when a holder renews in turns: at
// the start of its next window (to take up the rate the holder before it
// left) and half a guard before the end of its own (to leave its own);
// and that the guard is one interval at the holder's rate now, however
// fast the plan was made: a rate cut since widens it.
func TestTurnEdgesHandOnTheClimb(t *testing.T) {
	from := time.Unix(1e9, 0)
	tr := &shareTurns{Until: from.Add(time.Minute), Plans: []turnPlan{planTurns(from, 50, []string{"a", "b", "c"})}}
	guard := 100 * time.Millisecond
	for _, c := range []struct {
		holder string
		at     time.Duration
		edge   time.Duration
	}{
		{"a", 500 * time.Millisecond, 1450 * time.Millisecond}, // its own window ends at 2 s
		{"b", 500 * time.Millisecond, 1500 * time.Millisecond}, // its window starts at 2 s
		{"c", 5 * time.Second, 950 * time.Millisecond},
		{"a", 1960 * time.Millisecond, 4040 * time.Millisecond}, // past its guard: its next window
		{"a", -time.Second, 0},                                  // not in force
	} {
		if got := turnEdge(tr, c.holder, from.Add(c.at), guard); got != c.edge {
			t.Errorf("turnEdge(%s at %v) = %v, want %v", c.holder, c.at, got, c.edge)
		}
	}
	if g := turnGuard(5); g != 200*time.Millisecond+turnMargin {
		t.Errorf("turnGuard(5/s) = %v in a plan made at 50/s; want one interval at 5/s and the margin", g)
	}
	if w, _ := turnWait(tr, "a", from.Add(1850*time.Millisecond), turnGuard(5)); w == 0 {
		t.Error("a holder cut to 5/s may send 150 ms before its window ends: its last request's interval would reach into the next window")
	}
	// Cut to 0.1/s, an interval of 10 s in windows of 2 s: the guard is
	// half the window, not the whole of it, or more (no holder would send
	// again until the turns end).
	if w, _ := turnWait(tr, "a", from.Add(900*time.Millisecond), turnGuard(0.1)); w != 0 {
		t.Errorf("a holder cut to 0.1/s waits %v in the first half of its window; want 0", w)
	}
}

// TestTurnsTellWhenTheNextWindowComes: in turns, a provider's readiness
// (Registry.ReadyAt, the crawler's frontier) and the time a stop for its
// run's deadline names (when the scheduler runs the job again) are its next
// window, not its pacer's next slot: a job whose turn is seconds away is not
// run again at once.
func TestTurnsTellWhenTheNextWindowComes(t *testing.T) {
	p, err := newLocal("sim", Config{Shares: &docStore{}}, "Config")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	from := now.Add(-time.Second)
	p.sh.turns.Store(&shareTurns{Until: now.Add(time.Minute), Plans: []turnPlan{
		{From: from, Window: 2 * time.Second, Holders: []string{"other", p.sh.id}},
	}})
	want := from.Add(2 * time.Second) // the second window is this process's
	if got := p.readyAt(now, 1); !got.Equal(want) {
		t.Errorf("readyAt = %v after now, want %v (its window)", got.Sub(now), want.Sub(now))
	}
	if got := p.nextSlot(now, 1); !got.Equal(want) {
		t.Errorf("nextSlot = %v after now, want %v (its window)", got.Sub(now), want.Sub(now))
	}
}

// TestTurnsKeepTheRotation: when the holders change, the next plan goes on
// with the turn where the last plan would have gone on, newcomers last: a
// holder about to have its turn is not sent to the back of the line (with 8
// holders and 2 s windows, one lost its only window of a 30 s run). A plan
// is made again only when the holders change, not when their order does.
func TestTurnsKeepTheRotation(t *testing.T) {
	from := time.Unix(1e9, 0)
	last := &turnPlan{From: from, Window: 2 * time.Second, Holders: []string{"c", "a", "d", "b"}}
	// At 8 s the last plan is at window 4 (c a d b c): c goes on; d left, e came.
	got := rotation(last, from.Add(8*time.Second), []string{"a", "b", "c", "e"})
	if want := []string{"c", "a", "b", "e"}; !slices.Equal(got, want) {
		t.Errorf("rotation at window 4 = %v, want %v", got, want)
	}
	got = rotation(last, from.Add(6*time.Second), []string{"a", "b", "c", "e"})
	if want := []string{"b", "c", "a", "e"}; !slices.Equal(got, want) {
		t.Errorf("rotation at window 3 = %v, want %v", got, want)
	}
	now := from
	doc := shareDoc{Rate: 10, Turns: &shareTurns{Until: from.Add(time.Minute), Plans: []turnPlan{*last}}}
	doc.Leases = map[string]shareLease{}
	for _, h := range []string{"a", "b", "c", "d"} {
		doc.Leases[h] = shareLease{Share: 0.25, Expires: now.Add(shareTTL)}
	}
	takeTurns(&doc, now, 10, 0, turnLead)
	if len(doc.Turns.Plans) != 1 {
		t.Fatalf("same holders in another order made a new plan: %+v", doc.Turns.Plans)
	}
}

// docStore is a [ShareStore] of one process, for the tests inside the
// package, which cannot import budgettest (it imports this package): the
// documents in a map.
type docStore struct {
	mu   sync.Mutex
	docs map[string][]byte
}

func (s *docStore) UpdateShares(ctx context.Context, key string, f func(doc []byte) ([]byte, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := f(slices.Clone(s.docs[key]))
	if err != nil {
		return err
	}
	if s.docs == nil {
		s.docs = map[string][]byte{}
	}
	s.docs[key] = slices.Clone(next)
	return nil
}
