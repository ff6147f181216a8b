package budget

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/gcra"
	"github.com/forage-go/forage/internal/redact"
)

// A provider's record (see [RecordStore]) is loaded once, when the provider
// is created, and saved on three occasions: when a pause is set, extended
// or changes its reason (at once, on the response that set it, as the
// pause must outlive a crash that follows it); while the learned state
// moves, at most every recordEvery and in the background, so the success
// path never waits for a store; and when a [Registry] evicts the provider.

// recordEvery is the least time between two background saves of a
// provider's record while what it learned changes.
const recordEvery = 5 * time.Second

// recordSaveTimeout bounds one save of a record, so a store that hangs does
// not hold up the response that set a pause for long.
const recordSaveTimeout = 10 * time.Second

// recorder is the provider's side of its record.
type recorder struct {
	mu     sync.Mutex            // serialises saves: the later one holds the later state
	saved  forage.ProviderRecord // the record last saved or loaded; guarded by mu
	base   forage.ProviderRecord // the counters loaded; set once, before any call
	active atomic.Bool           // a background save is under way
}

// load restores the provider's controller from its record in cfg.Records,
// if any, before the pacer is made: the learned rate and ceiling, and the
// pause in force. A saved ban stays a ban: calls it refuses say banned,
// and the next ban in a row pauses twice as long. A pause that ends more
// than MaxPause from now is clamped to MaxPause from now (one answer
// imposes no more). A record is another process's word (another version,
// a hand edit, a clock stepped back): a pause more than a day past that is
// no pause any answer set, and is not honoured (clamped, it held every
// start of the provider for MaxPause, and a record keeps the later pause:
// for good); nor is a learned rate or ceiling that is negative or not a
// finite number. Each is logged, and the provider starts as one with no
// record would.
func (p *local) load(ctx context.Context) error {
	if p.cfg.Records == nil {
		return nil
	}
	r, ok, err := p.cfg.Records.LoadRecord(ctx, p.key)
	if err != nil {
		return fmt.Errorf("budget: loading the record of %q: %w", p.key, err)
	}
	if !ok {
		return nil
	}
	p.rec.base, p.rec.saved = r, r
	p.op.set(r.Status, r.Why)
	now := time.Now()
	// A provider that has refused for rate names its limit with 429: its
	// 503s are failures, not load shedding, in this process too.
	st := aimd.State{Rate: r.Rate, Ceiling: r.Ceiling, Confirmed: r.Confirmed, Throttled: r.Throttled > 0, Refusals: r.Refusals, Updated: r.Updated}
	if st.Updated.IsZero() {
		st.Updated = time.Unix(0, 0) // saved by no process (by hand): of unknown age, not trusted at once
	}
	if !finite(r.Rate) || !finite(r.Ceiling) {
		p.warnRecord("a learned rate or ceiling that is not a rate; starting as a new provider", "rate", r.Rate, "ceiling", r.Ceiling)
		st.Rate, st.Ceiling, st.Confirmed = 0, 0, false
	}
	until := r.PausedUntil
	switch cap := now.Add(p.cfg.MaxPause); {
	case until.After(cap.Add(absurdPause)):
		p.warnRecord("a pause no answer set; not honoured", "paused_until", until, "max_pause", p.cfg.MaxPause)
		until = time.Time{}
	case until.After(cap):
		until = cap
	}
	if until.After(now) {
		st.PausedUntil = until
		reason := forage.ReasonThrottled // also for a pause saved without a reason
		if r.PauseReason == forage.ReasonBanned {
			reason = forage.ReasonBanned
			p.bans.Store(1)
			p.banMu.Lock()
			p.banUntil = until
			p.banMu.Unlock()
		}
		p.mu.Lock()
		p.savedTil, p.savedWhy = until, reason // already saved: follow need not write it back
		p.mu.Unlock()
	}
	p.restored = st.Rate > 0
	if err := p.ctl.Restore(st); err != nil {
		return fmt.Errorf("budget: restoring the record of %q: %w", p.key, err)
	}
	p.restoreSpent(now, r.Spent)
	if at := r.Spent[paceKey]; at.After(now) && st.Rate > 0 {
		// The pacer's slot, when the rate was slow (see keepPace): at most
		// an interval of the learned rate ahead, and what the limits allow.
		if most := now.Add(time.Duration(float64(time.Second)/st.Rate) + spentAhead); at.After(most) {
			at = most
		}
		p.paceFrom = at
	}
	return nil
}

// paceKey is the adaptive pacer's key in a record's Spent (see keepPace):
// no known limit's (see Limit.key).
const paceKey = "pace"

// keepPace makes the record account for the adaptive pacer's slot, when
// the rate is so slow that an interval is spentAhead or more (the
// provider admits a request every few seconds or less), before the call
// is sent, as keepSpent does for the known limits: a process killed at any
// moment and restarted at once then waits for the slot the one before it
// took (restarted every 3 s, collectors of a provider learned at one
// request in 20 s sent 20 a minute). A faster rate's interval is covered by
// the restored wait (see newLocal) and needs no store write.
func (p *local) keepPace(now time.Time) {
	lp, ok := p.pacer.(localPacer)
	if !ok || p.cfg.Records == nil || p.cfg.Shares != nil || lp.l.Interval() < spentAhead ||
		p.ceiling > 0 && lp.l.Rate() >= p.ceiling*0.999 { // a known limit's rate: its limiters are accounted
		return
	}
	tat := now.Add(lp.l.AllowNAt(now, 0).ResetAfter).UnixNano()
	if tat <= p.paceSpent.Load() {
		return
	}
	if now.UnixNano() < p.spentQuiet.Load() {
		p.paceSpent.Store(tat) // the background saves carry it (see sameLearned)
		return
	}
	if !p.rec.mu.TryLock() {
		return // a background save is under way: no call waits for it (see keepSpent)
	}
	defer p.rec.mu.Unlock()
	p.paceSpent.Store(tat)
	if _, ok := p.saveLocked(now, nil, spentSaveTimeout); !ok {
		p.spentQuiet.Store(now.Add(spentQuietFor).UnixNano())
	}
}

// spentAhead is how far past what a process booked on a fast known limit
// (an interval under spentAhead) its record accounts for (see keepSpent):
// about one save every spentAhead while the limit is in use, and what a
// restart after a kill may lose of it. A slow limit's record accounts for
// each booking exactly, one save each.
const spentAhead = time.Second

// restoreSpent starts each known limit from the time its record accounts
// for (see [forage.ProviderRecord.Spent]): no call before it, and no burst
// at it, as if this process had booked up to it: the process before may
// have spent the limit's window, up to then. A time further ahead than a
// limit can be booked (its whole burst of intervals, MaxWait, and
// spentAhead) is another process's fault and is shortened to that, and
// logged. A shared provider's too: its limits are split by the shares
// among the processes that run at once, and the record carries what the
// ones before spent (a host started by cron, alone and so holding the
// whole share, sent its burst at each start: 12 a run of 3 hours against
// 3 an hour).
func (p *local) restoreSpent(now time.Time, spent map[string]time.Time) {
	if len(spent) == 0 {
		return
	}
	for i, l := range p.cfg.Limits {
		at, ok := spent[l.key()]
		if !ok || !at.After(now) {
			continue
		}
		lim := p.lims()[i]
		if most := now.Add(time.Duration(lim.Burst())*lim.Interval() + p.cfg.MaxWait + spentAhead); at.After(most) {
			p.warnRecord("a known limit accounted for further ahead than it can be booked; shortened", "limit", l.key(), "spent", at)
			at = most
		}
		// Nothing before at, and no burst at it: the time was accounted
		// at the burst of the process before, which may not be this one's
		// (restored at the tolerance of a burst raised between runs, a
		// limit of 3 an hour held 4).
		lim.PauseUntil(at)
		p.spent[i].Store(at.UnixNano())
		if p.cfg.Shares != nil {
			p.restoredAt[i] = at.UnixNano() // a time, carried as one into the share's limiter (see splitLimits)
		}
	}
}

// keepSpent makes the record account for what the known limits' latest
// booking at now took, before the call is sent: when a limit is booked past
// the time the record accounts for, it saves the record, at once, with
// every fast limit accounted spentAhead past its booking and every slow
// one at it. So a process killed at any moment has booked no more than its
// record says, and the one after it starts from there (see restoreSpent);
// the store is written about once every spentAhead while a fast limit is
// in use, and at each booking of a slow one.
// A failing store is logged, and the call goes on: the limits hold in this
// process either way; a store that failed or took over spentSaveTimeout is
// not waited for again for spentQuietFor, nor a background save under way.
// p.limMu is held. A shared provider's too (see restoreSpent).
func (p *local) keepSpent(now time.Time, lims []*gcra.Limiter) {
	if p.cfg.Records == nil {
		return
	}
	behind := false
	for i, lim := range lims {
		if now.Add(lim.AllowNAt(now, 0).ResetAfter).UnixNano() > p.spent[i].Load() {
			behind = true
		}
	}
	if !behind {
		return
	}
	quiet := now.UnixNano() < p.spentQuiet.Load()
	if !quiet && !p.rec.mu.TryLock() {
		// A background save is under way, which may take as long as the
		// store lets it (recordSaveTimeout): no booking waits for it. The
		// next booking past what the record accounts for tries again.
		return
	}
	for i, lim := range lims {
		ahead := time.Duration(0)
		if lim.Interval() < spentAhead {
			ahead = spentAhead
		}
		if at := now.Add(lim.AllowNAt(now, 0).ResetAfter + ahead).UnixNano(); at > p.spent[i].Load() {
			p.spent[i].Store(at)
		}
	}
	if quiet {
		return // the background saves carry the accounted times (see sameLearned)
	}
	defer p.rec.mu.Unlock()
	if _, ok := p.saveLocked(now, nil, spentSaveTimeout); !ok {
		// The store failed or hung: calls do not wait for it again for a
		// while (each would hold every booking for as long); the
		// background saves carry the accounted times when it is back.
		p.spentQuiet.Store(now.Add(spentQuietFor).UnixNano())
	}
}

// spentSaveTimeout bounds keepSpent's save, which every booking of the
// provider waits for; spentQuietFor is how long keepSpent saves nothing
// after one failed.
const (
	spentSaveTimeout = time.Second
	spentQuietFor    = 30 * time.Second
)

// absurdPause is how far past MaxPause from now a saved pause is taken for
// garbage rather than clamped (see load).
const absurdPause = 24 * time.Hour

// finite reports whether v is a rate: not negative, not NaN nor infinite.
func finite(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// warnRecord logs what load did not take from the provider's record.
func (p *local) warnRecord(msg string, attrs ...any) {
	if p.cfg.Logger != nil {
		p.cfg.Logger.Warn("budget: the provider's record holds "+msg, append([]any{"provider", p.key}, attrs...)...)
	}
}

// record returns the provider's record as of now. Status is left "" so a
// save keeps what an operator set.
func (p *local) record(now time.Time) forage.ProviderRecord {
	st := p.ctl.State()
	b := &p.rec.base
	r := forage.ProviderRecord{
		Key: p.key, Rate: st.Rate, Ceiling: st.Ceiling, Confirmed: st.Confirmed,
		Requests:  b.Requests + int64(p.n.requests.Load()),
		OK:        b.OK + int64(p.n.ok.Load()),
		Throttled: b.Throttled + int64(p.n.throttled.Load()),
		Updated:   now,
		Refusals:  st.Refusals,
	}
	if at := p.paceSpent.Load(); at > now.UnixNano() {
		r.Spent = map[string]time.Time{paceKey: time.Unix(0, at)}
	}
	for i, l := range p.cfg.Limits {
		if at := p.spent[i].Load(); at > now.UnixNano() {
			if r.Spent == nil {
				r.Spent = make(map[string]time.Time, len(p.cfg.Limits))
			}
			if t := time.Unix(0, at); t.After(r.Spent[l.key()]) {
				r.Spent[l.key()] = t
			}
		}
	}
	if st.PausedUntil.After(now) {
		r.PausedUntil, r.PauseReason = st.PausedUntil, p.pauseReason(now)
	}
	return r
}

// savePause saves the record with the pause in force at now; p.mu is held.
// A failure is logged and counted, and the save is tried again on the next
// response or the next call the pause refuses: the pause holds in memory
// either way.
func (p *local) savePause(now time.Time) {
	if r, ok := p.saveRecord(now, nil, recordSaveTimeout); ok {
		p.savedTil, p.savedWhy = r.PausedUntil, r.PauseReason
	}
}

// saveSoon saves the record in the background if what the provider learned
// changed since the last save, unless a background save is already under
// way. The caller never waits for the store.
func (p *local) saveSoon() {
	if !p.rec.active.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.rec.active.Store(false)
		p.saveRecord(time.Now(), func(r, saved forage.ProviderRecord) bool {
			return sameLearned(r, saved) || !worthKeeping(r, saved)
		}, recordSaveTimeout)
	}()
}

// saveRecord writes the record as of now to cfg.Records, and returns it and
// whether it was saved. When skip says the record needs no save, given the
// last one saved, it writes nothing. A failure is logged and counted.
func (p *local) saveRecord(now time.Time, skip func(r, saved forage.ProviderRecord) bool, within time.Duration) (forage.ProviderRecord, bool) {
	if p.cfg.Records == nil {
		return forage.ProviderRecord{}, false
	}
	p.rec.mu.Lock()
	defer p.rec.mu.Unlock()
	return p.saveLocked(now, skip, within)
}

// saveLocked is saveRecord with p.rec.mu held.
func (p *local) saveLocked(now time.Time, skip func(r, saved forage.ProviderRecord) bool, within time.Duration) (forage.ProviderRecord, bool) {
	r := p.record(now)
	if skip != nil && skip(r, p.rec.saved) {
		return r, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := p.cfg.Records.SaveRecord(ctx, r); err != nil {
		p.n.saveErrs.Add(1)
		if p.cfg.Logger != nil {
			p.cfg.Logger.Warn("budget: saving the provider's record failed; its pause and learned rate hold in this process only",
				"provider", p.key, "paused_until", r.PausedUntil, "reason", r.PauseReason, "rate", r.Rate, "err", redact.String(err.Error()))
		}
		return r, false
	}
	p.rec.saved = r
	return r, true
}

// sameLearned reports whether r holds what saved holds of the provider's
// learned state: rate, ceiling, pause, refusals and the known limits'
// accounted times.
func sameLearned(r, saved forage.ProviderRecord) bool {
	return r.Rate == saved.Rate && r.Ceiling == saved.Ceiling && r.Confirmed == saved.Confirmed &&
		r.PausedUntil.Equal(saved.PausedUntil) && r.PauseReason == saved.PauseReason &&
		slices.EqualFunc(r.Refusals, saved.Refusals, time.Time.Equal) && maps.EqualFunc(r.Spent, saved.Spent, time.Time.Equal)
}

// sameAll reports whether r holds what saved holds but for when it was saved
// and what an operator set: the learned state and the counters.
func sameAll(r, saved forage.ProviderRecord) bool {
	return sameLearned(r, saved) && r.Requests == saved.Requests && r.OK == saved.OK && r.Throttled == saved.Throttled
}

// lastRecord returns the provider's record as of now, as a save would
// write it. It does not wait for a save under way (record reads only the
// controller, atomics and the base loaded before any call).
func (p *local) lastRecord() forage.ProviderRecord { return p.record(time.Now()) }

// flush saves the record if anything in it changed since the last save: for
// a provider the registry evicts, whose successor loads it.
func (p *local) flush() {
	if p.n.requests.Load() == 0 {
		// Sent nothing, it learned nothing: its record is the one it
		// loaded, which other processes may have moved on since. (An
		// admin process's provider, made to pause or list the key, wrote
		// its own defaults over what the collectors learned.)
		return
	}
	p.saveRecord(time.Now(), func(r, saved forage.ProviderRecord) bool {
		return sameAll(r, saved) || !worthKeeping(r, saved)
	}, recordSaveTimeout)
}

// minRecordRequests is how many requests a provider with no record, that
// learned no limit, is sent before it is worth one (see worthKeeping).
const minRecordRequests = 20

// worthKeeping reports whether r is worth a save, given saved, the record
// last saved or loaded: always once the provider has a record, and before
// that once it learned something of its limits (a ceiling, a pause, a
// refusal, a known limit's spent time) or was sent minRecordRequests
// requests. A crawler's registry meets a provider per host, most of them
// called once or twice: each left a record for good (3,000 hosts, 3,000
// files, each "rate 4, 1 request"), which a file store reads at every
// open and Known names forever.
func worthKeeping(r, saved forage.ProviderRecord) bool {
	return saved.Key != "" || r.Ceiling > 0 || !r.PausedUntil.IsZero() || len(r.Refusals) > 0 ||
		len(r.Spent) > 0 || r.Throttled > 0 || r.Requests >= minRecordRequests
}
