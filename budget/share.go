package budget

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/gcra"
)

// ShareStore is where the processes that call one provider meet, so that
// together they stay under its limit without a database round trip per
// request (see [Config.Shares]). Each process holds a lease on a share of
// the provider's rate, renews it about every second, and paces locally at
// its share: a refusal any process sees cuts the rate of every process
// within one renewal, and a process that dies loses its share when its
// lease ends. The store only keeps one small document per provider key and
// updates it atomically; the policy (how the rate moves, how it is split)
// is the budget package's, written in Go, so every store behaves the same.
// The PostgreSQL store implements it, and so does
// [github.com/forage-go/forage/budget/budgettest.NewShareStore] (for
// processes simulated in one test);
// [github.com/forage-go/forage/budget/budgettest.RunShareStore] is the
// contract as a test suite.
//
// Implementations must be safe for concurrent use.
type ShareStore interface {
	// UpdateShares reads the document saved under key (nil when none is),
	// calls f with it, and saves what f returns, atomically: no other
	// UpdateShares of key, in any process, saves between the read and the
	// save. f may be called more than once (a store that detects a
	// conflicting save retries), so it must depend on its argument only. An
	// error from f is returned as is and nothing is saved; so is the error
	// of a ctx that has ended. A key that is not a valid name
	// ([github.com/forage-go/forage/checkpoint.CheckName]) is an error.
	UpdateShares(ctx context.Context, key string, f func(doc []byte) ([]byte, error)) error
}

// ShareWatcher is a [ShareStore] through which the processes sharing a
// key also tell each other news as it happens. Without it, what one
// process learned (a pause the provider asked for, a cut of the rate,
// turns starting or ending) reaches the others at their next renewal, up to
// a second later, and each of them may draw a refusal of its own
// meanwhile: a fixed window that is spent refuses every process once. With
// it, a process holding a lease watches its key; the renewal that saved
// news announces the document it saved, and every watcher takes a pause in
// force at once, and renews at once on a cut or a change of turns. The
// others hear within a few milliseconds, at one round trip for the
// announcing process and none of their own (a renewal on news excepted);
// renewals without news announce nothing. The PostgreSQL store implements
// it with LISTEN and NOTIFY; so does budgettest.NewShareStore.
type ShareWatcher interface {
	ShareStore
	// AnnounceShares delivers doc, just saved under key, to the watchers
	// of key in every process (this one included). It saves nothing.
	AnnounceShares(ctx context.Context, key string, doc []byte) error
	// WatchShares calls f with each document announced under key from now
	// on, until stop is called; after stop returns, f is not called
	// again. Delivery is best-effort: a document may be missed (its
	// process renews about every second anyway) or come as nil (too large
	// to send), and f may be called from another goroutine than the
	// announcer's. f must return quickly, and must not call stop.
	WatchShares(key string, f func(doc []byte)) (stop func())
}

// The lease policy. A process renews its lease every shareEvery, or after
// shareSoon while a share it is owed is still held by others, after its
// controller cut the rate or after a renewal failed; a lease not renewed
// for shareTTL ends, and its share goes to the others at their next
// renewal (but see mergeShares for a store in trouble).
const (
	shareEvery = time.Second
	shareSoon  = 250 * time.Millisecond
	shareTTL   = 3 * time.Second
	// shareTimeout bounds one renewal.
	shareTimeout = 2 * time.Second
	// shareSilence is how long the document must have gone unwritten for
	// its next writer to take it that no process could reach the store: a
	// busy process writes it about every shareEvery, so a longer silence
	// is trouble (or every holder was idle or died).
	shareSilence = shareEvery + 2*shareSoon
	// safeShare is the part of its last share a process keeps once its
	// lease has ended without renewal (the store is unreachable): the
	// others may have taken what it held, so it steps back rather than
	// guess. startShare is the share of a process that never reached the
	// store.
	safeShare  = 0.5
	startShare = 0.25
	// hungry is the share of its grant a process must have used over a
	// renewal period to ask for more; under it, it asks for what it used,
	// with headroom, and gives the rest back.
	hungryUse    = 0.8
	hungryWaited = 0.1 // or had a tenth of its calls held back by the pacer
	demandMargin = 1.25
	// minDemand is the least a live process asks for, requests/s, so one
	// that was idle starts again without waiting a renewal for a share.
	minDemand = 1.0
	// rejoinShare is how far a share must move before the process's
	// controller is moved with it (smaller moves are left to the next
	// renewal), so the climb is not refitted every second.
	rejoinShare = 0.05
	// learnFor is the longest a learner learns a provider alone, and
	// learnCuts the cuts that end it sooner (see learn).
	learnFor  = 10 * time.Second
	learnCuts = 3
	// shareRefusals is how many of the latest refusals the document keeps
	// (more than the refusal budget of a minute spends), and shareAhead how
	// far after now one may lie (another machine's clock).
	shareRefusals = 8
	shareAhead    = time.Second
	// minShare is the least share a lease is granted: less is rounding.
	minShare = 1e-9
)

// shareDoc is the document kept per provider key: the provider's rate as
// the processes together learned it, and the leases.
type shareDoc struct {
	// Epoch counts the cuts taken in: a process whose view of the rate
	// predates the latest cut may not raise it.
	Epoch     uint64  `json:"epoch"`
	Rate      float64 `json:"rate,omitempty"`
	Ceiling   float64 `json:"ceiling,omitempty"`
	Confirmed bool    `json:"confirmed,omitempty"`
	// Top is the highest ceiling the holders learned while they did not
	// take turns: where turns, once in force, begin (see takeTurns).
	Top         float64   `json:"top,omitempty"`
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Refusals are the requests refused to the holders in the minute
	// before the last renewal, the latest shareRefusals (see
	// aimd.State.Refusals): the refusal budget is the provider's, spent by
	// all.
	Refusals []time.Time `json:"refusals,omitempty"`
	// Leases are the live leases, by holder.
	Leases map[string]shareLease `json:"leases,omitempty"`
	// Sent and Refused are the requests the holders sent and had refused,
	// decayed with tallyTau as of Tally; Turns are the turns in force, if
	// any (see takeTurns).
	Sent    float64     `json:"sent,omitempty"`
	Refused float64     `json:"refused,omitempty"`
	Tally   time.Time   `json:"tally,omitzero"`
	Turns   *shareTurns `json:"turns,omitempty"`
	// Learner is the holder that learns the provider alone, and
	// LearnUntil when it stops at the latest (see learn).
	Learner    string    `json:"learner,omitempty"`
	LearnUntil time.Time `json:"learn_until,omitzero"`
	// Written is when a holder last renewed. Trouble is the latest spell
	// in which processes could not reach the store (renewals failed, or
	// none was written), Silent the latest in which none was written (see
	// mergeShares).
	Written time.Time `json:"written,omitzero"`
	Trouble spell     `json:"trouble,omitzero"`
	Silent  spell     `json:"silent,omitzero"`
}

// sane makes doc, as read from the store at now, one this process can act
// on: the document is another process's word (another version, another
// machine's clock, a hand edit), and one bad value must not stall every
// process. A pause that ends more than maxPause (and the clock skew
// shareAhead allows) after now is no pause any process could have been
// given (one answer imposes at most MaxPause): it is dropped (a day-ahead
// pause held every process for the day). A lease that ends more than a
// lease after now ends a lease after now (a dead process's lease dated a
// day ahead held its share for the day), and a share outside [0, 1] is
// brought into it. Rates and ceilings that are negative or not finite
// are none.
func (doc *shareDoc) sane(now time.Time, maxPause time.Duration) {
	if doc.PausedUntil.After(now.Add(maxPause).Add(shareAhead)) { // Add saturates; the sum overflowed
		doc.PausedUntil = time.Time{}
	}
	for _, f := range []*float64{&doc.Rate, &doc.Ceiling, &doc.Top} {
		if !finite(*f) {
			*f = 0
		}
	}
	for h, l := range doc.Leases {
		if l.Expires.After(now.Add(shareTTL + shareAhead)) {
			l.Expires = now.Add(shareTTL)
		}
		if !(l.Share >= minShare) {
			l.Share = 0
		}
		l.Share = min(l.Share, 1)
		doc.Leases[h] = l
	}
}

// spell is a span of time.
type spell struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// add makes s cover [from, to] too when the two overlap or touch within
// shareTTL; otherwise [from, to] replaces it (the latest spell is what
// matters: the leases it can explain end within shareTTL of it).
func (s *spell) add(from, to time.Time) {
	if s.To.IsZero() || from.After(s.To.Add(shareTTL)) {
		*s = spell{from, to}
		return
	}
	if from.Before(s.From) {
		s.From = from
	}
	if to.After(s.To) {
		s.To = to
	}
}

// overlaps reports whether s and [from, to] share an instant.
func (s spell) overlaps(from, to time.Time) bool {
	return !s.To.IsZero() && !from.After(s.To) && !s.From.After(to)
}

// shareLease is one process's lease.
type shareLease struct {
	// Share is the fraction of the provider's rate the holder may use.
	Share float64 `json:"share"`
	// Demand is what the holder would use, requests/s; Hungry says it
	// would use more than it holds.
	Demand float64 `json:"demand,omitempty"`
	Hungry bool    `json:"hungry,omitempty"`
	// Expires is when the lease ends unless renewed.
	Expires time.Time `json:"expires"`
	// Lapsed says the lease ended while processes could not reach the
	// store: its holder may still be alive, pacing at its safe share
	// (Share), so that much is kept for it until it renews or Expires (one
	// more lease).
	Lapsed bool `json:"lapsed,omitempty"`
	// Slots are the residues, modulo slotCycle, of the known limits'
	// slots the holder sends in while a limit is slotted (see slotAt): a
	// bit each, held by one lease at most, as many as its share.
	Slots uint64 `json:"slots,omitempty"`
}

// Share is one process's lease on a provider shared through a
// [ShareStore], as [Snapshot.Shares] reports it.
type Share struct {
	// Holder names the process: host, process id and a random suffix.
	Holder string
	// Share is the fraction of the provider's rate it holds.
	Share float64
	// Expires is when its lease ends unless renewed.
	Expires time.Time
}

// sharer is a provider's side of its lease.
type sharer struct {
	id     string
	share  atomic.Uint64 // math.Float64bits of the fraction this process paces at; 1 with no ShareStore
	next   atomic.Int64  // unix nanoseconds: when the next renewal is due
	active atomic.Bool   // a renewal is under way
	used   atomic.Int64  // calls admitted by the pacer since the last renewal
	waited atomic.Int64  // calls of those the pacer or a pause held back
	timer  *time.Timer   // the next renewal while calls keep coming; guarded by mu
	// toldTil (unix nanoseconds) and toldCuts are the pause and the
	// controller's decreases the document already has (see shareNews).
	toldTil  atomic.Int64
	toldCuts atomic.Uint64
	// gate, while this process holds no share (the others still hold it
	// all), is a channel closed when a renewal grants one: calls wait on
	// it before the pacer. Nil while it holds a share.
	gate atomic.Pointer[chan struct{}]
	// turns are the document's turns as of the last renewal; turnOn says
	// whether the pacer runs at the provider's whole rate (turns in
	// force) or at the share.
	turns  atomic.Pointer[shareTurns]
	turnOn atomic.Bool
	// renewed (unix nanoseconds) is when the store last answered; down
	// says the last renewal failed; done, while a renewal is under way, is
	// closed when it ends.
	renewed atomic.Int64
	down    atomic.Bool
	done    atomic.Pointer[chan struct{}]
	// lapse (unix nanoseconds) is when the lease last granted ends: a call
	// that comes later, with no renewal since, drops this process to its
	// safe share first (see local.lapse). Zero once it has.
	lapse atomic.Int64
	split sync.Mutex // serializes splitLimits: a renewal's and a call's lapse
	// held says this process has held a share since its known limits were
	// last split, so what they hold is its own (see splitLimits). Guarded
	// by split.
	held bool
	// seen is the document's epoch and turnsSeen whether it had turns, as
	// of the last renewal; unwatch, while this process watches its key
	// (see ShareWatcher), stops the watch. unwatch is guarded by mu.
	seen      atomic.Uint64
	turnsSeen atomic.Bool
	unwatch   func()
	watcher   ShareWatcher // Config.Shares, if it is one; set at joinShares
	// again says an announcement asked for a renewal since the last one
	// began (see pushed).
	again atomic.Bool
	// usedAt is when the last call was admitted, and staggered the end of
	// the last pause pushed staggered the pacer for, in Unix nanoseconds.
	usedAt, staggered atomic.Int64

	mu      sync.Mutex              // held by the renewal; guards the rest
	epoch   uint64                  // the document's epoch when last renewed
	cuts    uint64                  // the controller's decreases when last renewed
	since   time.Time               // the start of the period used counts
	busyAt  time.Time               // when the last call was admitted, or the last renewal found calls in flight
	sent    uint64                  // requests sent, as of the last renewal
	refused uint64                  // of those, refused (throttled)
	failed  time.Time               // the first of the renewals that failed since the last that did not
	leases  atomic.Pointer[[]Share] // every lease, as of the last renewal
}

// setGate closes the gate when shut is false, and makes one when it is
// true; s.mu is held.
func (s *sharer) setGate(shut bool) {
	g := s.gate.Load()
	switch {
	case shut && g == nil:
		c := make(chan struct{})
		s.gate.Store(&c)
	case !shut && g != nil:
		s.gate.Store(nil)
		close(*g)
	}
}

// waitShare renews the lease if due, and waits until this process holds a
// share of the provider, or ctx ends. A pause learned from the others
// while it waits (the provider asked one of them to back off) stops the
// call as acquire stops it for its own pauses: at once, with the pause's
// end, when the call may not wait that long.
func (p *local) waitShare(ctx context.Context, run *Run, start time.Time) error {
	p.shareTick(start)
	p.lapse(start)
	if d := p.sh.done.Load(); d != nil && !p.sh.down.Load() && start.UnixNano()-p.sh.renewed.Load() > int64(shareEvery+shareSoon) {
		// What this process knows of the others is stale (it was idle):
		// the call waits for the renewal under way, so it does not go out
		// of turn. While the store fails (down), calls do not wait for it:
		// they go on at the safe share with what they know.
		select {
		case <-*d:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		if g := p.sh.gate.Load(); g != nil {
			// Wait for a renewal to grant a share, asking for one again
			// every shareSoon: the renewal that shut the gate may have
			// found the process idle and armed no timer, and this call's
			// own shareTick may have come while it was still under way.
			t := time.NewTimer(shareSoon)
			select {
			case <-*g:
				t.Stop()
			case <-t.C:
				p.shareTick(time.Now())
				continue
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		now := time.Now()
		if pu := p.ctl.Snapshot().PausedUntil; pu.After(now) && p.outlasts(ctx, run, pu, start) {
			return &Error{Provider: p.key, Reason: p.pauseReason(now), Until: pu}
		}
		wait := shareSoon // let through by a pause, with no share yet: wait for a renewal
		if p.sh.fraction() > 0 {
			w, on := p.turnWait(now)
			if on != p.sh.turnOn.Load() {
				p.sh.turnOn.Store(on)
				p.follow(now) // the pacer at the whole rate in turns, at the share otherwise
			}
			if w <= 0 {
				return nil
			}
			p.sh.waited.Add(1)
			wait = min(w, shareSoon) // a renewal may bring another plan
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			p.shareTick(time.Now()) // the renewal that set this wait may have armed no timer
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// turnsUntil returns when the turns in force end, or the zero time.
func (s *sharer) turnsUntil() time.Time {
	if t := s.turns.Load(); t != nil {
		return t.Until
	}
	return time.Time{}
}

// inTurn reports whether this process may send at now as far as turns go:
// no turns are in force, or it is in its own window.
func (p *local) inTurn(now time.Time) bool {
	w, _ := p.turnWait(now)
	return w == 0
}

// turnWait is [turnWait] for this process at now, with the guard of its
// rate at now: in turns, it paces at the provider's whole rate.
func (p *local) turnWait(now time.Time) (wait time.Duration, inForce bool) {
	t := p.sh.turns.Load()
	if t == nil {
		return 0, false
	}
	return turnWait(t, p.sh.id, now, turnGuard(p.ctl.Snapshot().Rate))
}

// snapshot returns a copy of the leases as of the last renewal.
func (s *sharer) snapshot() []Share {
	if l := s.leases.Load(); l != nil {
		return slices.Clone(*l)
	}
	return nil
}

// stagger is how long after a pause ends this process's pacer resumes,
// when it shares the provider at rate (the provider's, requests/s) with
// others and they do not take turns. The holders, in the order of their
// names, resume one interval of the provider's rate apart, rather than all
// at the instant it ends: paced alike from the same instant, they would
// send in step, each with a request it held back, and a provider that
// allows little burst (a Retry-After of a second) or a quota window spent
// again would refuse all but one of them in the same instant, before any
// could hear of the others' (see ShareWatcher): eight holders drew seven
// refusals at once, a ban where five a minute are punished. The holder
// k-th by name among holders (the document's latest leases; nil for those
// of this process's last renewal) waits k intervals of the provider's rate
// (with even shares, less than one interval of its own), never more than a
// second. A holder not among them (it joined since) draws its place at
// random, after theirs: several that joined together each took the first
// place, and resumed in the same instant.
func (s *sharer) stagger(rate float64, holders []string) time.Duration {
	if holders == nil {
		if l := s.leases.Load(); l != nil {
			for _, x := range *l {
				holders = append(holders, x.Holder)
			}
		}
	}
	n := len(holders)
	if rate <= 0 || s.turnOn.Load() || n == 0 || n == 1 && holders[0] == s.id {
		return 0
	}
	k := slices.Index(holders, s.id)
	if k < 0 {
		k = n + mrand.IntN(n+1)
	}
	if d := float64(k) / rate; d < 1 { // in seconds; compared before converting: a tiny rate overflows a Duration
		return time.Duration(d * float64(time.Second))
	}
	return time.Second
}

// pausePacer holds the pacer until pu, and then for this process's
// stagger at rate, the provider's, among holders (see stagger).
func (p *local) pausePacer(pu time.Time, rate float64, holders []string) {
	p.pacer.PauseUntil(pu.Add(p.sh.stagger(rate, holders)))
}

// holderID names this process's lease of key: host-pid-random.
func holderID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", hostname, os.Getpid(), hex.EncodeToString(b[:]))
}

// hostname is this machine's name, as holder names carry it.
var hostname, _ = os.Hostname()

// goneHere reports whether holder names a process of this machine that no
// longer runs: a collector restarted after a crash takes its share at once
// rather than after the dead process's lease ends. (A process id reused
// since is taken for the holder alive: its lease then ends with its time.)
func goneHere(holder string) bool {
	i := strings.LastIndexByte(holder, '-')
	if i < 0 {
		return false
	}
	j := strings.LastIndexByte(holder[:i], '-')
	if j < 0 || holder[:j] != hostname || hostname == "" {
		return false
	}
	pid, err := strconv.Atoi(holder[j+1 : i])
	return err == nil && pid > 0 && processGone(pid)
}

// fraction returns the share of the provider's rate this process paces at.
func (s *sharer) fraction() float64 { return math.Float64frombits(s.share.Load()) }

// joinShares makes the provider's first renewal, in its constructor, so a
// provider starts at its share. A store that cannot be reached leaves it
// at startShare until a later renewal succeeds.
func (p *local) joinShares(now time.Time) {
	p.sh.id = holderID()
	p.sh.share.Store(math.Float64bits(1))
	if p.cfg.Shares == nil {
		return
	}
	p.sh.watcher, _ = p.cfg.Shares.(ShareWatcher)
	if !p.renew(now) {
		// Its known limits too: the pacer's quarter alone does not bound
		// a weighted limit (4 processes started during an outage sent 400
		// units in a second against a limit of 100).
		p.sh.share.Store(math.Float64bits(startShare))
		p.splitLimits(now, startShare, false)
	}
}

// shareNews renews the lease at once when this process learned what the
// others must hear within one renewal: a cut of the rate, or a pause the
// provider asked for ending at pu. What came from the others (see adopt)
// is not news.
func (p *local) shareNews(now, pu time.Time) {
	s := &p.sh
	cuts := p.ctl.Snapshot().Decreases
	if pu.UnixNano() > s.toldTil.Load() || cuts != s.toldCuts.Load() {
		s.told(pu, cuts)
		s.next.Store(0)
		p.shareTick(now)
	}
}

// told records that the document has the pause until pu and the
// controller's decreases cuts.
func (s *sharer) told(pu time.Time, cuts uint64) {
	s.toldPause(pu)
	s.toldCuts.Store(cuts)
}

// toldPause records that the document has the pause until pu.
func (s *sharer) toldPause(pu time.Time) {
	for t := s.toldTil.Load(); pu.UnixNano() > t && !s.toldTil.CompareAndSwap(t, pu.UnixNano()); t = s.toldTil.Load() {
	}
}

// pushed takes in a document of this provider's key that another process
// (or this one) saved and announced through a ShareWatcher. A pause in
// force that this process does not have yet is taken at once (and is no
// news to tell back); a cut this process has not taken in (a later epoch),
// or turns starting or ending, starts a renewal now rather than at the
// next one due. The shares are left to the renewals: a process is granted
// its share by its own.
func (p *local) pushed(b []byte) {
	if len(b) == 0 {
		return
	}
	var doc shareDoc
	if json.Unmarshal(b, &doc) != nil {
		return
	}
	now := time.Now()
	doc.sane(now, p.cfg.MaxPause)
	if pu := doc.PausedUntil; pu.After(now) && pu.After(p.ctl.Snapshot().PausedUntil) {
		p.sh.toldPause(pu)
		_ = p.ctl.Restore(aimd.State{PausedUntil: pu})
		// At once (calls waiting for a slot too), staggered at the rate the
		// cut that came with the pause set, not the one it cut: eight
		// holders staggered at a slow start's 137/s resumed within 60 ms.
		r := p.ctl.Snapshot().Rate
		if doc.Rate > 0 {
			r = min(r, doc.Rate)
		}
		p.pausePacer(pu, r, slices.Sorted(maps.Keys(doc.Leases)))
		p.sh.staggered.Store(pu.UnixNano()) // follow leaves this pause's stagger as it is
		// The rest (the event, the report, a save of the provider's
		// record) may wait for a store: a watcher must return quickly.
		go p.follow(now)
	}
	if doc.Epoch > p.sh.seen.Load() || (doc.Turns != nil) != p.sh.turnsSeen.Load() {
		// Every watcher hears at once: each renews within pushSpread,
		// at a time of its own, so they do not all contend for the
		// document in the same instant. A renewal under way may have
		// read the document before the news: it renews again soon after
		// (see renew).
		p.sh.again.Store(true)
		time.AfterFunc(mrand.N(pushSpread), func() {
			if p.sh.again.Load() {
				p.sh.next.Store(0)
				p.shareTick(time.Now())
			}
		})
	}
}

// pushSpread is the time over which the watchers renew on news.
const pushSpread = 100 * time.Millisecond

// watch starts watching this provider's key, when the store can be watched
// and it is not watched yet, or stops watching it (on is false: the
// process let its lease go). s.mu is held.
func (p *local) watch(on bool) {
	s := &p.sh
	switch {
	case s.watcher == nil:
	case on && s.unwatch == nil:
		s.unwatch = s.watcher.WatchShares(p.key, p.pushed)
	case !on && s.unwatch != nil:
		s.unwatch()
		s.unwatch = nil
	}
}

// shareTick starts a renewal in the background when one is due. The caller
// never waits for the store.
func (p *local) shareTick(now time.Time) {
	if now.UnixNano() < p.sh.next.Load() || !p.sh.active.CompareAndSwap(false, true) {
		return
	}
	p.sh.next.Store(now.Add(shareEvery).UnixNano())
	done := make(chan struct{})
	p.sh.done.Store(&done)
	go func() {
		defer p.sh.active.Store(false)
		defer close(done)
		defer p.sh.done.Store(nil)
		p.renew(time.Now())
		p.follow(time.Now())
	}()
}

// lapse drops this process to safeShare of its share once the lease last
// granted has ended with no renewal since (the store is unreachable), at
// the first call or failed renewal after its end: from then on the others
// may be granted what it held. Once per outage: the safe share is not
// halved again. The pacer and the known limits follow.
func (p *local) lapse(now time.Time) {
	s := &p.sh
	e := s.lapse.Load()
	if e == 0 || now.UnixNano() < e || !s.lapse.CompareAndSwap(e, 0) {
		return
	}
	share := s.fraction() * safeShare
	s.share.Store(math.Float64bits(share))
	p.limMu.Lock()
	mask := trimSlots(p.slot.mask, slotsFor(share)) // as the document keeps them (see mergeShares)
	p.limMu.Unlock()
	p.splitLimits(now, share, p.setSlots(mask, nil))
	p.follow(now)
}

// renew renews the lease at now: it takes in what this process learned
// since the last renewal, takes up what the others learned, and sets the
// share this process paces at. It reports whether the store answered; when
// it did not and the lease has ended, the share drops to the safe share
// (see lapse).
func (p *local) renew(now time.Time) bool {
	s := &p.sh
	s.mu.Lock()
	defer s.mu.Unlock()
	st, cuts := p.ctl.State(), p.ctl.Snapshot().Decreases
	share := s.fraction()
	used, waited := float64(s.used.Swap(0)), float64(s.waited.Swap(0))
	demand, hungry := minDemand, s.since.IsZero() // a process joining wants its share
	if dt := now.Sub(s.since).Seconds(); !s.since.IsZero() && dt > 0 {
		rate := used / dt
		hungry = waited >= hungryWaited*used || rate >= hungryUse*share*st.Rate
		demand = max(minDemand, rate*demandMargin)
	}
	// A provider joins to be called; a paused one keeps its lease for when
	// the pause ends, through the first renewal after it ends: the calls
	// the pause held back come back then, often after that renewal (the
	// renewal a second after the one that told of a pause of one second
	// comes at the very instant it ends, and found the provider idle: a
	// learner gave its lease back, and lost its place for good); in turns,
	// one idle for less than a lease keeps it too, so the plan does not
	// change whenever a holder pauses between calls.
	busy := used > 0 || p.n.inFlight.Load() > 0 || s.since.IsZero() || p.ctl.Snapshot().PausedUntil.After(s.since) ||
		(s.turns.Load() != nil && now.Sub(s.busyAt) < shareTTL)
	switch {
	case p.n.inFlight.Load() > 0:
		s.busyAt = now
	case used > 0:
		// When the last call was admitted, not now: a process whose work
		// ended just after a renewal lets its lease go a renewal sooner.
		s.busyAt = time.Unix(0, s.usedAt.Load())
	}
	s.since = now
	s.again.Store(false) // this renewal reads what was announced until now
	sent, refused := p.n.requests.Load(), p.n.throttled.Load()
	var (
		doc   shareDoc
		saved []byte
		news  bool // the document saved has news for the others (see ShareWatcher)
	)
	ctx, cancel := context.WithTimeout(context.Background(), shareTimeout)
	defer cancel()
	err := p.cfg.Shares.UpdateShares(ctx, p.key, func(old []byte) ([]byte, error) {
		doc = shareDoc{}
		if len(old) > 0 {
			if err := json.Unmarshal(old, &doc); err != nil {
				doc = shareDoc{} // a document this version cannot read is started again
			}
		}
		doc.sane(now, p.cfg.MaxPause)
		was := doc
		for h := range doc.Leases {
			if h != s.id && goneHere(h) {
				delete(doc.Leases, h) // its process died on this machine: no need to wait for its lease to end
			}
		}
		mergeShares(&doc, claim{holder: s.id, now: now, st: st, cut: cuts != s.cuts, epoch: s.epoch,
			demand: demand, hungry: hungry, failed: s.failed, allowance: p.ctl.Snapshot().Allowance})
		if !busy {
			delete(doc.Leases, s.id) // idle: its share goes back to the others now
		}
		lead := turnLead
		if s.watcher != nil {
			lead = turnLeadWatched
		}
		takeTurns(&doc, now, float64(sent-s.sent), float64(refused-s.refused), lead)
		news = doc.Epoch != was.Epoch || doc.PausedUntil.After(was.PausedUntil) && doc.PausedUntil.After(now) ||
			(doc.Turns == nil) != (was.Turns == nil) || doc.Learner != was.Learner
		var err error
		saved, err = json.Marshal(doc)
		return saved, err
	})
	s.down.Store(err != nil)
	p.watch(busy)
	if err == nil {
		s.seen.Store(doc.Epoch) // before the announcement: this process's own is no news to it
		s.turnsSeen.Store(doc.Turns != nil)
	}
	if s.watcher != nil && err == nil && news {
		_ = s.watcher.AnnounceShares(ctx, p.key, saved) // best-effort: the others renew within a second anyway
	}
	if err != nil {
		if s.failed.IsZero() {
			s.failed = now
		}
		p.lapse(time.Now()) // the renewal may have taken long: the lease may have ended since now
		p.n.saveErrs.Add(1)
		// Again soon: a lease ends only after many failures in a row, so
		// a process the store failed now and then never loses its lease.
		s.next.Store(now.Add(shareSoon).UnixNano())
		s.arm(p, busy, shareSoon)
		return false
	}
	l := doc.Leases[s.id]
	s.epoch, s.cuts, s.failed = doc.Epoch, cuts, time.Time{}
	s.lapse.Store(l.Expires.UnixNano()) // before the share: a call's lapse of the old lease cannot undo the new
	s.sent, s.refused = sent, refused
	if was := s.turns.Swap(doc.Turns); (was == nil) != (doc.Turns == nil) {
		if doc.Turns != nil {
			p.event(slog.LevelInfo, "budget: the processes sharing the provider collide; they take turns",
				slog.Time("until", doc.Turns.Until), slog.Int("holders", len(doc.Leases)))
		} else {
			p.event(slog.LevelInfo, "budget: the processes sharing the provider stop taking turns")
		}
	}
	s.renewed.Store(now.UnixNano())
	leases := make([]Share, 0, len(doc.Leases))
	for h, x := range doc.Leases {
		leases = append(leases, Share{Holder: h, Share: x.Share, Expires: x.Expires})
	}
	slices.SortFunc(leases, func(a, b Share) int { return cmp.Compare(a.Holder, b.Holder) })
	s.leases.Store(&leases)
	p.adopt(now, doc, st, l.Share)
	next := shareEvery
	if l.Share < fairShare(doc, s.id)*(1-rejoinShare) || cuts != p.ctl.Snapshot().Decreases || s.again.Load() {
		next = shareSoon
	}
	if doc.Turns != nil { // hand the climb on with the turn (see turnEdge)
		at := time.Now()
		if d := turnEdge(doc.Turns, s.id, at, turnGuard(p.ctl.Snapshot().Rate)); d > 0 && d < next {
			next = d
		}
	}
	s.next.Store(now.Add(next).UnixNano())
	if !busy {
		s.next.Store(0) // released: the next call joins again at once
	}
	s.arm(p, busy, next)
	return true
}

// arm schedules the next renewal in next while the provider is busy (calls
// came since the last renewal, or are under way: they may all be waiting
// for the pacer, and a waiting call renews nothing). An idle provider lets
// its lease lapse, giving its share back, and renews on its next call. s.mu
// is held.
func (s *sharer) arm(p *local, busy bool, next time.Duration) {
	if !busy {
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(next, func() { p.shareTick(time.Now()) })
		return
	}
	s.timer.Reset(next)
}

// adopt moves this process to what the document has: its controller to
// the provider's rate and ceiling (when they moved by more than
// rejoinShare; in turns, to any higher rate: the climb the holder before
// it left, which it goes on with), the pause in force, and its new share,
// at which the pacer and the known limits pace.
func (p *local) adopt(now time.Time, doc shareDoc, st aimd.State, share float64) {
	if share > 0 {
		p.ctl.SetShare(share)
	}
	if doc.Rate > 0 && (moved(st.Rate, doc.Rate) || moved(st.Ceiling, doc.Ceiling) || doc.Turns != nil && doc.Rate > st.Rate) {
		_ = p.ctl.Restore(aimd.State{Rate: doc.Rate, Ceiling: doc.Ceiling, Confirmed: doc.Confirmed})
	}
	if doc.PausedUntil.After(now) {
		_ = p.ctl.Restore(aimd.State{PausedUntil: doc.PausedUntil})
	}
	if len(doc.Refusals) > 0 {
		_ = p.ctl.Restore(aimd.State{Refusals: doc.Refusals}) // the others' refusals count against the budget here too
	}
	if remake := p.setSlots(doc.Leases[p.sh.id].Slots, &doc); remake || share != p.sh.fraction() {
		p.splitLimits(now, share, remake)
	}
	p.sh.told(doc.PausedUntil, p.ctl.Snapshot().Decreases) // what the document has is no news
	p.sh.share.Store(math.Float64bits(share))
	p.follow(now) // the pacer at the new share before a call waiting for one goes
	// A call waiting for a share goes once there is one, or once a pause
	// is in force (to stop, if it may not wait that long; see waitShare).
	p.sh.setGate(share == 0 && !doc.PausedUntil.After(now))
}

// moved reports whether a differs from b by more than rejoinShare.
func moved(a, b float64) bool { return math.Abs(a-b) > rejoinShare*max(a, b) }

// claim is one renewal of a lease, as mergeShares takes it in.
type claim struct {
	holder string
	now    time.Time
	// st is the holder's controller state (its own part of the rate,
	// share of the whole), cut whether it cut since its last renewal, and
	// epoch the document's epoch then.
	st    aimd.State
	cut   bool
	epoch uint64
	// demand and hungry are what it would use (see shareLease).
	demand float64
	hungry bool
	// failed is the first of its renewals that failed since the last that
	// did not; zero when none did.
	failed time.Time
	// allowance is the burst allowance its controller measured, if any.
	allowance float64
}

// mergeShares renews c.holder's lease in doc at c.now. The rate policy:
//
//   - A cut by any process is taken in at once: the provider's rate and
//     ceiling become the cutter's, and the epoch moves on; unless another
//     process cut since the cutter last renewed: that is the same
//     overshoot seen twice, and cuts do not compound.
//   - A climb is taken in only from a process whose view is of the current
//     epoch: one that has not yet seen the latest cut cannot undo it.
//   - So is a ceiling lowered without a cut (see aimd: the bucket fit, a
//     spent quota), in a new epoch, as a cut is.
//   - The longest pause wins.
//
// Then the leases. Those that ended are dropped, unless the store was in
// trouble during them (some process's renewals failed, or the document
// went unwritten for shareSilence): their holders may be alive, pacing at
// their safe shares, so each such lease keeps its holder's safe share for
// one more lease, in which a holder that reaches the store again renews
// it; and again while nobody can write (an outage, not a store that fails
// now and then: under one of those, a dead holder's half would be kept
// for good). A holder cut off from the store alone, while the others
// reach it, cannot be told from a dead one: its lease is dropped. The
// holder is granted its fair share (the provider's rate split by demand:
// nobody gets more than it asked for, the rest is split evenly among those
// that want more), but never more than what the others hold: a share one
// process gives back is taken up by another only once the first has let it
// go, so the shares in force never add up to more than the whole.
func mergeShares(doc *shareDoc, c claim) {
	st, now := c.st, c.now
	if st.Rate > 0 && !math.IsInf(st.Rate, 0) && !math.IsInf(st.Ceiling, 0) {
		switch {
		case doc.Rate == 0 || c.cut && c.epoch == doc.Epoch:
			doc.Rate, doc.Ceiling, doc.Confirmed = st.Rate, st.Ceiling, st.Confirmed
			if c.cut {
				doc.Epoch++
			}
		case !c.cut && c.epoch == doc.Epoch && st.Ceiling > 0 && st.Ceiling < doc.Ceiling*(1-rejoinShare):
			// A ceiling lowered without a cut (the bucket fit refining the
			// last cut, a spent quota's delivered rate): taken in as a cut
			// is, or the next renewal would undo it.
			doc.Rate, doc.Ceiling, doc.Confirmed = min(st.Rate, doc.Rate), st.Ceiling, st.Confirmed
			doc.Epoch++
		case !c.cut && c.epoch == doc.Epoch && st.Rate > doc.Rate:
			doc.Rate, doc.Ceiling, doc.Confirmed = st.Rate, max(st.Ceiling, doc.Ceiling), st.Confirmed || doc.Confirmed
		}
		if doc.Turns == nil {
			doc.Top = max(doc.Top, doc.Ceiling)
		}
	}
	if st.PausedUntil.After(doc.PausedUntil) {
		doc.PausedUntil = st.PausedUntil
	}
	doc.Refusals = mergeRefusals(now, doc.Refusals, st.Refusals)
	if doc.Leases == nil {
		doc.Leases = map[string]shareLease{}
	}
	if !doc.Written.IsZero() && now.Sub(doc.Written) > shareSilence {
		doc.Trouble.add(doc.Written, now)
		doc.Silent.add(doc.Written, now)
	}
	if !c.failed.IsZero() {
		doc.Trouble.add(c.failed, now)
	}
	doc.Written = now
	for h, l := range doc.Leases {
		switch {
		case h == c.holder || l.Expires.After(now):
		case !l.Lapsed && doc.Trouble.overlaps(l.Expires.Add(-shareTTL), l.Expires):
			share := l.Share * safeShare
			if share < minShare {
				share = 0 // rounding, as a granted share (a demand of 1.4e-9 of the rate lapsed to 7e-10)
			}
			doc.Leases[h] = shareLease{Share: share, Lapsed: true, Expires: now.Add(shareTTL),
				Slots: trimSlots(l.Slots, slotsFor(share))} // as its holder keeps them (see lapse)
		case l.Lapsed && doc.Silent.overlaps(l.Expires.Add(-shareTTL), l.Expires):
			l.Expires = now.Add(shareTTL)
			doc.Leases[h] = l
		default:
			delete(doc.Leases, h)
		}
	}
	l := doc.Leases[c.holder]
	l.Demand, l.Hungry, l.Expires, l.Lapsed = c.demand, c.hungry, now.Add(shareTTL), false
	doc.Leases[c.holder] = l
	learn(doc, c)
	others := 0.0
	for h, x := range doc.Leases {
		if h != c.holder {
			others += x.Share
		}
	}
	l.Share = max(0, min(fairShare(*doc, c.holder), 1-others))
	if l.Share < minShare {
		// What the others' shares, summed, leave of the whole by
		// rounding: none. (A holder granted 1 − 5×0.2 = 1e-16 could
		// not pace its known limits at it and kept its last, the
		// whole, and sent 22 in a second against 21.)
		l.Share = 0
	}
	doc.Leases[c.holder] = l
	l.Slots = allotSlots(doc, c.holder, l.Share)
	doc.Leases[c.holder] = l
}

// mergeRefusals returns the refusals in a and b of the minute before now
// (up to shareAhead after it), each once, oldest first, the latest
// shareRefusals of them. Only the latest shareRefusals of each are looked
// at: a document another version (or a fault) wrote may hold any number,
// and a refusal dated later (a clock far ahead, garbage) would push the
// others out for good, while every process ignores it.
func mergeRefusals(now time.Time, a, b []time.Time) []time.Time {
	latest := func(ts []time.Time) []time.Time {
		ts = slices.DeleteFunc(slices.Clone(ts), func(t time.Time) bool {
			return now.Sub(t) >= time.Minute || t.Sub(now) > shareAhead
		})
		ts = slices.CompactFunc(slices.SortedFunc(slices.Values(ts), time.Time.Compare), time.Time.Equal)
		return ts[max(0, len(ts)-shareRefusals):]
	}
	out := latest(a)
	for _, t := range latest(b) {
		if !slices.ContainsFunc(out, t.Equal) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(x, y time.Time) int { return x.Compare(y) })
	return out[max(0, len(out)-shareRefusals):]
}

// fairShare returns holder's fair share of doc's rate: the rate split among
// the live leases by demand (water-filling: a lease that asks for less than
// an even split gets what it asked for, and the rest is split again among
// the others; a hungry lease asks for everything). In turns, every lease
// gets an even split: the share of the time it sends. While a learner
// learns the provider alone (see learn), it gets the whole and the others
// nothing.
func fairShare(doc shareDoc, holder string) float64 {
	if doc.Learner != "" {
		if holder == doc.Learner {
			return 1
		}
		return 0
	}
	type ask struct {
		h string
		d float64 // the fraction asked for
	}
	asks := make([]ask, 0, len(doc.Leases))
	for h, l := range doc.Leases {
		d := math.Inf(1)
		switch {
		case l.Lapsed:
			d = l.Share // what its holder may be pacing at
		case !l.Hungry && doc.Rate > 0 && doc.Turns == nil: // in turns, each holder gets as much time
			d = l.Demand / doc.Rate
		}
		asks = append(asks, ask{h, d})
	}
	slices.SortFunc(asks, func(a, b ask) int {
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		return cmp.Compare(a.h, b.h)
	})
	left := 1.0
	for i, a := range asks {
		give := min(a.d, left/float64(len(asks)-i))
		if a.h == holder {
			return give
		}
		left -= give
	}
	return 0
}

// splitLimits paces each known limit at this process's share of it: the
// share of its rate, and the share of its burst (at least one unit; two
// when slotted, see Limit.shareBurst), so that the shares in force, which
// never add up to more than the whole, never send more than the limit in
// any window (and when their units add up to more than its burst, the
// slots hold it: see slotAt). remake makes every limit again (its slots
// moved, or it became slotted or stopped being). A limit whose burst share
// changes is made again, with what the old one had left of its burst,
// never more than the new burst: a share that shrank keeps at most its new
// burst, one that grew no more than it had (what others gave back may
// still be in the limit's window), and calls booked on the old one book
// again (see pace), their units not carried over. So the units a process
// may send at once never grow with its share, and the processes together
// hold at most the limit's burst. A process that comes back from no share
// (it was idle, or the others held it all), or splits them for the first
// time, starts with nothing of its burst: it did not hold it meanwhile;
// so does a limit that stops being slotted.
// (Made again empty at every move, a share that grew also waiting out its
// growth, the limits held 4 processes whose scheduler's jobs moved among
// them to 1.5-2.2/s of the 4.5/s that 20/s and 300/min pace at.)
func (p *local) splitLimits(now time.Time, share float64, remake bool) {
	if len(p.cfg.Limits) == 0 {
		return
	}
	p.sh.split.Lock()
	defer p.sh.split.Unlock()
	if share <= 0 {
		p.sh.held = false
		return
	}
	p.limMu.Lock() // no booking between the reading of the old limits and the new ones
	defer p.limMu.Unlock()
	old := p.lims()
	next := make([]*gcra.Limiter, len(old))
	for i, l := range p.cfg.Limits {
		_, rate := l.shape()
		slotted := i < len(p.slot.on) && p.slot.on[i]
		// One that comes back from no share is made again (empty) even
		// when its burst is the same: kept, it had the burst it banked
		// while it held none, which the one that held the whole may have
		// just spent (a process granted the whole after the learner left
		// sent 0.75 s after the learner's last against 1 a second; six
		// back from an idle spell, slotted, sent 16 in a second against
		// 15).
		if !remake && p.sh.held && l.shareBurst(share, slotted) == old[i].Burst() && old[i].SetRateAt(now, share*rate) == nil {
			next[i] = old[i]
			continue
		}
		lim, err := l.limiter(share, slotted)
		if err != nil {
			next[i] = old[i] // a share too small to pace: keep the last
			continue
		}
		if at := p.restoredAt[i]; at > now.UnixNano() {
			// The record's time is still in force (see restoreSpent):
			// nothing was booked since, and what is owed is that time,
			// not units of the whole limit, which the share's slower
			// limiter would repay 1/share times as long (a third process
			// joining a limit of 10 per 10 s waited 58 s, not 27).
			lim.PauseUntil(time.Unix(0, at))
			next[i] = lim
			continue
		}
		// What is left of the old burst: the backlog, in units, less those
		// of the calls still waiting for their slot (they book again), and
		// none after no share. It may be negative (a heavy call's debt).
		left := float64(old[i].Burst()) - float64(old[i].AllowNAt(now, 0).ResetAfter)/float64(old[i].Interval()) + float64(p.pending[i])
		if !p.sh.held || i < len(p.slot.off) && p.slot.off[i] {
			// No share meanwhile; or slotted until now, when the units of
			// the others' bursts added up to more than the limit's, so
			// what this one has left is not its own: a process left alone
			// by seven sent 9.8 s after another's slot against 1 per 10 s.
			left = min(left, 0)
		}
		if owed := math.Ceil(float64(lim.Burst()) - min(left, float64(lim.Burst()))); owed > 0 {
			reserve(lim, now, int(min(owed, math.MaxInt32)))
		}
		next[i] = lim
	}
	clear(p.pending)
	clear(p.slot.off)
	p.limits.Store(&next)
	p.sh.held = true
}

// learn lets the first holder of a provider nobody has learned yet learn
// it alone, at the whole rate, while the others wait: a controller that
// sees every answer finds the limit as one process does (the episodes
// after each pause, the bucket fit), where processes that each see a
// share of them walk down from slow start's overshoot a tenth per cut
// (see aimd.Controller.SetShare), or, at a provider that allows no burst,
// collide from the start. Learning ends, for good, once the document has
// taken in learnCuts cuts, or a confirmed ceiling after two, or at
// LearnUntil; then a provider that refused the learner and showed it no
// allowance is served in turns (which those providers need), the learner
// keeping it until the first plan is in force, and any other (one that
// never refused: a known limit kept, or none met) is shared by rate.
// Learning ends at once, shared by rate, when the learner's lease ends or
// it wants less than it holds (not while paused). Its end is news (see
// ShareWatcher): the others renew at once.
func learn(doc *shareDoc, c claim) {
	if doc.Learner == "" {
		if doc.LearnUntil.IsZero() && doc.Epoch == 0 && !doc.Confirmed && len(doc.Leases) == 1 {
			doc.Learner, doc.LearnUntil = c.holder, c.now.Add(learnFor)
		}
		return
	}
	l, live := doc.Leases[doc.Learner]
	if !live || l.Lapsed || !l.Hungry && !doc.PausedUntil.After(c.now.Add(-shareEvery)) {
		doc.Learner = ""
		return
	}
	if t := doc.Turns; t != nil {
		if len(t.Plans) > 0 && !c.now.Before(t.Plans[0].From) {
			doc.Learner = "" // the turns the learner handed on are in force
		}
		return
	}
	if c.now.Before(doc.LearnUntil) && doc.Epoch < learnCuts && !(doc.Confirmed && doc.Epoch >= 2) {
		return
	}
	if c.holder == doc.Learner && doc.Epoch >= 1 && c.allowance < 2 && len(doc.Leases) > 1 {
		doc.Turns = &shareTurns{Until: c.now.Add(turnHold)} // planned by takeTurns, from the lead on
		return
	}
	if c.holder == doc.Learner {
		doc.Learner = ""
	}
}
