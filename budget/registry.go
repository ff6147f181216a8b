package budget

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
)

// RegistryConfig configures a [Registry]. The zero value is valid: every
// provider gets the default [Config], idle providers are evicted after ten
// minutes, and at most 100,000 are kept.
type RegistryConfig struct {
	// Defaults configures every provider without an override. Its Pacer
	// must be nil: one pacer would be shared by every key, so they would
	// all draw on one budget; [NewRegistry] rejects it. To share each
	// provider with other processes, set its Shares. What every provider
	// does is set here: its Logger, Metrics, known Limits and the
	// controller's settings (Adaptive).
	Defaults Config
	// Overrides configures named providers instead of Defaults, e.g. a known
	// limit for one exchange while another's is discovered. Each entry
	// replaces Defaults whole for its key. A Pacer set in an override paces
	// that key only.
	Overrides map[string]Config
	// Records, if set, keeps every provider's record across restarts and
	// evictions: it is the [Config.Records] of each provider whose Config
	// (Defaults or its override) sets none. Nil means each Config's own.
	Records RecordStore
	// Metrics, if set, receives every provider's measurements: it is the
	// [Config.Metrics] of each provider whose Config (Defaults or its
	// override) sets none. Nil means each Config's own.
	Metrics Metrics
	// IdleTTL is how long a provider may go unused before [Registry.Run]
	// drops it (its learned rate with it, unless a [RecordStore] keeps it
	// for its successor). A provider that still holds
	// something a successor would forget is kept however long it is idle:
	// a pause, an open breaker, or a known [Limit] that still owes time.
	// Defaults to 10 minutes.
	IdleTTL time.Duration
	// MaxProviders caps how many providers are kept; past it, creating one
	// evicts the least recently used idle ones that hold nothing (see
	// IdleTTL), or only a pause the provider asked for (Retry-After, a
	// ban): of those, the registry keeps the controller's state, a few
	// hundred bytes, and a provider made for the key again starts paused,
	// up to 16 × MaxProviders such states (past it, the half whose pauses
	// end soonest are forgotten). The cap may be exceeded while every
	// provider holds an operator's pause, an open breaker or a limit's
	// debt. Defaults to 100,000. A provider holds
	// about 7 KB (its adaptive controller about 4 KB of it), so a full
	// registry at the default holds about 0.7 GB: a crawler that meets
	// many hosts sets a lower cap, or a shorter IdleTTL with
	// [Registry.Run].
	MaxProviders int
	// Shards is the number of independently locked shards of the key space,
	// rounded up to a power of two. Defaults to 64.
	Shards int
}

// Registry holds one [Provider] per provider key, created on first use, so
// every caller that talks to one provider shares its budget. It is sharded
// so lookups do not contend, evicts providers idle longer than IdleTTL, and
// never drops one that is in use. Registry is safe for concurrent use; it
// starts no goroutine (call [Registry.Run] for periodic eviction).
//
// The zero Registry is not usable (its methods panic): make one with [NewRegistry].
type Registry struct {
	cfg    RegistryConfig
	shards []shard
	mask   uint64
	count  atomic.Int64
	// evictMu serialises capacity evictions so concurrent creators do not
	// all scan the registry at once.
	evictMu sync.Mutex
	// departing holds the providers a capacity eviction dropped whose
	// record is still being saved in the background: a provider made for
	// such a key starts from the departing one's state, not from the older
	// record in the store.
	departMu  sync.Mutex
	departing map[string]*local
	// paused holds, without a record store, the controller state of the
	// providers a capacity eviction dropped while a pause they were asked
	// for was in force: a provider made for such a key starts paused, as
	// its predecessor was (see keepPause). Guarded by departMu.
	paused map[string]aimd.State
	// transported is set once a Transport sends through the registry: its
	// providers then mark their attempts' contexts (see attemptKey).
	transported atomic.Bool
}

type shard struct {
	mu sync.RWMutex
	m  map[string]*entry
	_  [40]byte // keep shards on separate cache lines
}

// entry is the handle the registry returns for a key. It forwards to the
// provider and tracks use, so eviction can tell idle from busy and a caller
// holding an evicted handle is redirected to the key's current provider.
type entry struct {
	reg      *Registry
	key      string
	p        *local
	inflight atomic.Int64
	lastUsed atomic.Int64 // unix nanoseconds
	evicted  atomic.Bool
}

var _ Provider = (*entry)(nil)

// NewRegistry returns a Registry for cfg, or an error naming the invalid
// field; every override is validated up front so [Registry.Get] cannot
// fail later for a bad one. A Pacer in cfg.Defaults is an error (see
// [RegistryConfig.Defaults]).
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	if cfg.IdleTTL < 0 {
		return nil, invalid.Must("RegistryConfig.IdleTTL", "be >= 0", cfg.IdleTTL)
	}
	if cfg.MaxProviders < 0 {
		return nil, invalid.Must("RegistryConfig.MaxProviders", "be >= 0", cfg.MaxProviders)
	}
	if cfg.Shards < 0 || cfg.Shards > 1<<16 {
		return nil, invalid.Must("RegistryConfig.Shards", "be in [0, 65536]", cfg.Shards)
	}
	if cfg.Defaults.Pacer != nil {
		return nil, invalid.Must("RegistryConfig.Defaults.Pacer",
			"be nil: one pacer would be shared by every key; set a Pacer per key in Overrides, or Defaults.Shares to share providers among processes",
			fmt.Sprintf("%T", cfg.Defaults.Pacer))
	}
	if err := cfg.Defaults.validate("RegistryConfig.Defaults"); err != nil {
		return nil, err
	}
	for key, c := range cfg.Overrides {
		if err := checkKey(key); err != nil {
			return nil, invalid.Wrap(fmt.Sprintf("RegistryConfig.Overrides[%q]", key), err)
		}
		if err := c.validate(fmt.Sprintf("RegistryConfig.Overrides[%q]", key)); err != nil {
			return nil, err
		}
	}
	if cfg.IdleTTL == 0 {
		cfg.IdleTTL = 10 * time.Minute
	}
	if cfg.MaxProviders == 0 {
		cfg.MaxProviders = 100_000
	}
	n := 64
	if cfg.Shards > 0 {
		n = 1
		for n < cfg.Shards {
			n <<= 1
		}
	}
	r := &Registry{cfg: cfg, shards: make([]shard, n), mask: uint64(n - 1)}
	for i := range r.shards {
		r.shards[i].m = make(map[string]*entry)
	}
	return r, nil
}

// Get returns the one Provider for key, creating it on first use: two
// callers asking for the same key get the same Provider. The error says
// why a provider could not be created: a key that breaks the name rule of
// every store ([github.com/forage-go/forage/checkpoint.CheckName]: empty,
// over 1024 bytes, or holding a control, format or separator character),
// or a [RecordStore] that cannot load the provider's record. [Registry.Lookup] finds a Provider without creating
// one.
func (r *Registry) Get(key string) (Provider, error) {
	s := &r.shards[hash(key)&r.mask]
	s.mu.RLock()
	e, ok := s.m[key]
	s.mu.RUnlock()
	if ok {
		return e, nil
	}
	return r.create(s, key)
}

// Known reports whether key names a provider: one the registry holds, or
// one whose record its [RecordStore] keeps (a provider other processes
// call, or this one called before it was dropped as idle). It creates
// nothing. The error is the store's.
func (r *Registry) Known(ctx context.Context, key string) (bool, error) {
	if _, ok := r.Lookup(key); ok {
		return true, nil
	}
	if r.cfg.Records == nil {
		return false, nil
	}
	_, ok, err := r.cfg.Records.LoadRecord(ctx, key)
	return ok, err
}

// RecordPage returns the provider records its [RecordStore] keeps whose
// keys come after after, in byte order, at most limit of them, and
// whether the store can list them (a [RecordLister]; with no store, or
// one that cannot list, it returns nil, false and no error). The records
// are every process's that shares the store, held here or not: an admin
// process that calls nothing itself lists the connectors the collectors
// share this way, beside [Registry.SnapshotPage]'s live providers. A
// store given to one key in RegistryConfig.Overrides is not listed. The
// error is the store's.
func (r *Registry) RecordPage(ctx context.Context, after string, limit int) ([]forage.ProviderRecord, bool, error) {
	l, ok := r.cfg.Records.(RecordLister)
	if !ok {
		return nil, false, nil
	}
	if limit < 1 {
		return nil, true, nil
	}
	recs, err := l.ListRecords(ctx, after, limit)
	if err != nil {
		return nil, true, err
	}
	return recs, true, nil
}

// Lookup returns the Provider for key if one exists, without creating it;
// for a missing key it returns a nil Provider (a true nil interface, safe
// to compare with nil) and false.
func (r *Registry) Lookup(key string) (Provider, bool) {
	s := &r.shards[hash(key)&r.mask]
	s.mu.RLock()
	e, ok := s.m[key]
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return e, true
}

func (r *Registry) create(s *shard, key string) (Provider, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	cfg, ok := r.cfg.Overrides[key]
	if !ok {
		cfg = r.cfg.Defaults
	}
	if cfg.Records == nil {
		cfg.Records = r.cfg.Records
	}
	if cfg.Metrics == nil {
		cfg.Metrics = r.cfg.Metrics
	}
	if d := r.departed(key); d != nil && cfg.Records != nil {
		cfg.Records = seeded{RecordStore: cfg.Records, rec: d.lastRecord()}
	}
	// Built outside the shard lock: loading the record may be a round trip
	// to a database. A creator that loses the race drops its provider.
	p, err := newLocal(key, cfg, "Config")
	if err != nil {
		return nil, err
	}
	kept, paused := r.pausedState(key)
	if paused {
		_ = p.ctl.Restore(kept) // a state the controller gave: valid
	}
	p.transported = &r.transported
	s.mu.Lock()
	if e, ok := s.m[key]; ok { // lost the race to another creator
		s.mu.Unlock()
		p.mute()
		return e, nil
	}
	e := &entry{reg: r, key: key, p: p}
	e.lastUsed.Store(time.Now().UnixNano())
	s.m[key] = e
	s.mu.Unlock()
	if paused {
		// Forgotten once the provider that took it is in: forgotten by a
		// creator that then lost the race, the winner started unpaused.
		r.forgetPaused(key, kept)
	}
	if r.count.Add(1) > int64(r.cfg.MaxProviders) {
		r.shrink(e)
	}
	return e, nil
}

// size returns how many providers the registry holds.
func (r *Registry) size() int { return int(r.count.Load()) }

// evictAt drops every provider idle since before now − IdleTTL with no call
// in flight and nothing to remember at now: no pause (such as a ban) nor
// open breaker still in force, and every known [Limit] fully recovered, so
// the provider that replaces it, starting with full buckets, can never send
// more in a limit's window than the limit allows. It returns how many it
// dropped. A caller still holding a dropped Provider is redirected to the
// key's current one on its next call. now is the current time (the clock
// the limits book on); a later one would find debts paid that are not.
// With a [RecordStore], each provider to drop has its record saved first,
// so its successor starts where it left off: a provider called after its
// save has been used since the cutoff and is not dropped.
func (r *Registry) evictAt(now time.Time) int {
	cutoff := now.Add(-r.cfg.IdleTTL).UnixNano()
	idle := func(e *entry) bool { return e.lastUsed.Load() < cutoff && !e.p.holding(now) }
	var flush []*local
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		for _, e := range s.m {
			if e.p.cfg.Records != nil && idle(e) {
				flush = append(flush, e.p)
			}
		}
		s.mu.RUnlock()
	}
	for _, p := range flush {
		p.flush() // outside the shard locks: a store may be a round trip away
	}
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for key, e := range s.m {
			if idle(e) && e.tryEvict(now, false) {
				delete(s.m, key)
				e.p.forget()
				n++
			}
		}
		s.mu.Unlock()
	}
	r.count.Add(int64(-n))
	return n
}

// Run evicts idle providers every IdleTTL/2 until ctx ends. Then, with
// [RegistryConfig.Records] set, it saves every provider's record that
// changed since its last save (each save bounded by a timeout), so a clean
// shutdown loses nothing that was learned, and returns ctx's error.
func (r *Registry) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.IdleTTL / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.flushAll()
			return ctx.Err()
		case now := <-t.C:
			r.evictAt(now)
		}
	}
}

// keepPause keeps st, the state of the provider a capacity eviction drops
// for key while a pause it was asked for is in force, for the provider
// made for key next (see pausedState). A crawler's hosts that all answered
// 429 with an hour of Retry-After pinned 5,000 providers, 7 KB each, in a
// registry of 100: each state kept is a few hundred bytes.
func (r *Registry) keepPause(key string, st aimd.State) {
	r.departMu.Lock()
	defer r.departMu.Unlock()
	if r.paused == nil {
		r.paused = map[string]aimd.State{}
	}
	r.paused[key] = st
}

// pausedState returns the state kept for key (see keepPause), if its
// pause is still in force; the creator whose provider is stored forgets it
// (see forgetPaused).
func (r *Registry) pausedState(key string) (aimd.State, bool) {
	r.departMu.Lock()
	defer r.departMu.Unlock()
	st, ok := r.paused[key]
	return st, ok && st.PausedUntil.After(time.Now())
}

// forgetPaused forgets the state kept for key, if it is still st.
func (r *Registry) forgetPaused(key string, st aimd.State) {
	r.departMu.Lock()
	defer r.departMu.Unlock()
	if cur, ok := r.paused[key]; ok && cur.PausedUntil.Equal(st.PausedUntil) {
		delete(r.paused, key)
	}
}

// pruneKept forgets the kept states whose pause has ended by now and, past
// keptPerProvider × MaxProviders of them (about the memory of MaxProviders
// providers), the half whose pauses end soonest: memory stays bounded
// however many hosts a crawl finds paused, at the cost of a request a
// forgotten host may get before its pause ends, if the crawl meets it
// again.
func (r *Registry) pruneKept(now time.Time) {
	r.departMu.Lock()
	defer r.departMu.Unlock()
	for k, st := range r.paused {
		if !st.PausedUntil.After(now) {
			delete(r.paused, k)
		}
	}
	if most := keptPerProvider * r.cfg.MaxProviders; len(r.paused) >= most {
		type kept struct {
			key   string
			until time.Time
		}
		all := make([]kept, 0, len(r.paused))
		for k, st := range r.paused {
			all = append(all, kept{k, st.PausedUntil})
		}
		slices.SortFunc(all, func(a, b kept) int { return a.until.Compare(b.until) })
		for _, k := range all[:len(all)-most/2] {
			delete(r.paused, k.key)
		}
	}
}

// keptPerProvider is how many paused providers' states (a few hundred
// bytes each) the registry keeps per provider it may hold (about 7 KB).
const keptPerProvider = 16

// depart records p, dropped for key, as departing until its record is saved.
func (r *Registry) depart(key string, p *local) {
	r.departMu.Lock()
	defer r.departMu.Unlock()
	if r.departing == nil {
		r.departing = map[string]*local{}
	}
	r.departing[key] = p
}

// arrived ends p's departure: its record is saved.
func (r *Registry) arrived(p *local) {
	r.departMu.Lock()
	defer r.departMu.Unlock()
	if r.departing[p.key] == p {
		delete(r.departing, p.key)
	}
}

// departed returns the provider for key whose record is still being saved,
// or nil.
func (r *Registry) departed(key string) *local {
	r.departMu.Lock()
	defer r.departMu.Unlock()
	return r.departing[key]
}

// seeded is a RecordStore whose record for its one key is a departing
// provider's, still being saved: what an operator or another process
// saved since (a status, a later pause) is laid over it.
type seeded struct {
	RecordStore
	rec forage.ProviderRecord
}

func (s seeded) LoadRecord(ctx context.Context, key string) (forage.ProviderRecord, bool, error) {
	stored, ok, err := s.RecordStore.LoadRecord(ctx, key)
	if err != nil {
		return forage.ProviderRecord{}, false, err
	}
	r := s.rec
	if ok {
		r.Status, r.Why = stored.Status, stored.Why
		if stored.PausedUntil.After(r.PausedUntil) {
			r.PausedUntil, r.PauseReason = stored.PausedUntil, stored.PauseReason
		}
	}
	return r, true, nil
}

// flushAll saves the record of every provider that changed since its last
// save, one provider at a time.
func (r *Registry) flushAll() {
	var all []*local
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		for _, e := range s.m {
			if e.p.cfg.Records != nil {
				all = append(all, e.p)
			}
		}
		s.mu.RUnlock()
	}
	for _, p := range all {
		p.flush()
	}
}

// shrink evicts the least recently used idle providers until the registry
// is at 90% of MaxProviders, sparing keep (the one just created). Their
// records are saved in the background: shrink runs inside a [Registry.Get].
// Until a record is saved its provider is departing, and a provider made
// for its key meanwhile starts from its state.
func (r *Registry) shrink(keep *entry) {
	if !r.evictMu.TryLock() {
		return // another creator is already shrinking
	}
	defer r.evictMu.Unlock()
	type cand struct {
		e    *entry
		used int64
	}
	var all []cand
	now := time.Now()
	r.pruneKept(now) // room for the states of paused providers, which may go too
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		for _, e := range s.m {
			if e != keep && e.inflight.Load() == 0 && (!e.p.holding(now) || e.p.pausedOnly(now)) {
				all = append(all, cand{e, e.lastUsed.Load()})
			}
		}
		s.mu.RUnlock()
	}
	slices.SortFunc(all, func(a, b cand) int { return cmp.Compare(a.used, b.used) })
	target := int64(r.cfg.MaxProviders) * 9 / 10
	var gone []*local
	for _, c := range all {
		if r.count.Load() <= target {
			break
		}
		s := &r.shards[hash(c.e.key)&r.mask]
		s.mu.Lock()
		if s.m[c.e.key] == c.e && c.e.tryEvict(time.Now(), true) {
			if c.e.p.cfg.Records != nil {
				gone = append(gone, c.e.p)
				r.depart(c.e.key, c.e.p) // before the key is gone from the map
			} else if c.e.p.ctl.Snapshot().PausedUntil.After(now) {
				r.keepPause(c.e.key, c.e.p.ctl.State()) // before the key is gone from the map
			}
			delete(s.m, c.e.key)
			c.e.p.forget()
			r.count.Add(-1)
		}
		s.mu.Unlock()
	}
	if len(gone) > 0 {
		go func() {
			for _, p := range gone {
				p.flush()
				r.arrived(p)
			}
		}()
	}
}

// SnapshotPage returns the state of at most limit providers keyed after
// after, sorted by key, and how many more follow: the per-provider metrics
// an operator's dashboard shows. SnapshotPage("", math.MaxInt) returns
// every provider's; a limit of 0 or less returns none (and counts them
// all as following). schedule's Scheduler.SnapshotPage pages its providers
// the same way, by key after after, and counts the rest alike. A page snapshots no other provider: a crawler's registry holds a
// provider per host it met (up to MaxProviders, 100,000 by default), and a
// dashboard showing a page of them, or sampling the first hundred, took
// 175 MB and 1.5 s a time from a snapshot of all. With
// [RegistryConfig.Records] set, a page reads its providers' records again
// in the background, at most every five seconds each: an operator's status
// set in another process shows on the next page, though the provider gets
// no calls here.
func (r *Registry) SnapshotPage(after string, limit int) (page []Snapshot, more int) {
	limit = max(limit, 0)
	var keys []string
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		for k := range s.m {
			if k > after {
				keys = append(keys, k)
			}
		}
		s.mu.RUnlock()
	}
	slices.Sort(keys)
	if len(keys) > limit {
		more = len(keys) - limit
		keys = keys[:limit]
	}
	if len(keys) == 0 {
		return nil, more
	}
	page = make([]Snapshot, 0, len(keys))
	now := time.Now()
	for _, k := range keys {
		s := &r.shards[hash(k)&r.mask]
		s.mu.RLock()
		e := s.m[k]
		s.mu.RUnlock()
		if e != nil { // not evicted meanwhile
			if e.p.cfg.Records != nil {
				// An operator's status set in another process: a
				// provider that gets no calls reads it for no one else
				// (see readStatus). The next page shows it.
				e.p.readStatus(now)
			}
			page = append(page, e.p.Snapshot())
		}
	}
	return page, more
}

// tryEvict marks e evicted unless a call is in flight, a bulkhead slot is
// held or a success through the Transport is not settled yet (it holds
// its slot until its body ends, after its call returned, and reports its
// End after giving the slot back), or the provider holds something at now
// (see local.holding). Do increments inflight before it reads evicted, and
// tryEvict sets evicted before it reads inflight, so at least one of them
// sees the other. holding is asked again after the mark: a call that ended
// between the caller's first look and the mark has booked its limits by
// then, and any later call is redirected.
func (e *entry) tryEvict(now time.Time, pausedOK bool) bool {
	e.evicted.Store(true)
	if e.inflight.Load() != 0 || e.p.n.inFlight.Load() != 0 || e.p.n.settling.Load() != 0 || e.p.holding(now) && !(pausedOK && e.p.pausedOnly(now)) {
		e.evicted.Store(false)
		return false
	}
	return true
}

// Do forwards to the key's provider, or to its successor if e was evicted.
func (e *entry) Do(ctx context.Context, run *Run, attempt func(context.Context) forage.Outcome, opts ...CallOption) error {
	e.inflight.Add(1)
	if e.evicted.Load() {
		e.inflight.Add(-1)
		p, err := e.reg.Get(e.key)
		if err != nil {
			return err
		}
		return p.Do(ctx, run, attempt, opts...)
	}
	e.lastUsed.Store(time.Now().UnixNano())
	err := e.p.Do(ctx, run, attempt, opts...)
	e.lastUsed.Store(time.Now().UnixNano())
	e.inflight.Add(-1)
	return err
}

// Snapshot returns the provider's state.
func (e *entry) Snapshot() Snapshot { return e.p.Snapshot() }

// hash is FNV-1a over key, inline so a lookup allocates nothing.
func hash(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return h
}
