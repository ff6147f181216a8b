package checkpoint

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/forage-go/forage"
)

// Provider records: what the collector keeps about each provider between
// runs (see [forage.ProviderRecord]): the learned rate and ceiling, so a
// restarted process starts where the last one left off, and the pause in
// force with its reason (a 429 with Retry-After, a ban, a spent quota), so
// it does not call the provider before the pause ends (retrying during a
// ban only extends it) and says banned rather than throttled. The budget
// package reads and writes them through its RecordStore interface, which
// LocalStore implements; the record is a type of the root
// package, so this package does not import budget (dependencies point
// down).
//
// A file store keeps each provider's record in a file of its own,
// provider-<hash of the key>.ckpt, rewritten whole on each save. A
// directory written by an earlier version holds the providers' pauses in
// one file, pauses.ckpt: it is still read (each pause becomes its
// provider's record, or merges into it), and never written again.

// The files of provider records.
const (
	providerPre  = "provider-"
	kindProvider = byte(5)
	// pausesFile is the file of pauses an earlier version wrote.
	pausesFile = "pauses" + fileExt
	kindPauses = byte(4)
)

// recordBook is the provider records of one store, by key. The store's
// core mutex guards it.
type recordBook map[string]forage.ProviderRecord

// LoadRecord returns the record saved for key and true, or the zero record
// and false when none is saved. It fails with [ErrInvalid] for a key that
// is not a valid name ([CheckName]), with the ctx's error once it has
// ended, and with [ErrClosed] after Close. It implements
// budget.RecordStore.
func (s *LocalStore) LoadRecord(ctx context.Context, key string) (forage.ProviderRecord, bool, error) {
	return loadRecord(ctx, s.c, s.records, key)
}

// SaveRecord upserts r under r.Key as budget.RecordStore says: every field
// is r's, except that PausedUntil keeps the later of the saved and the new
// end (with the reason saved with it; for an equal end, r's), and that
// Status and Why keep the saved ones when r.Status is "". In a file store
// the record is on disk (written to a temporary file, synced, renamed, the
// directory synced) before SaveRecord returns nil; in memory it lasts as
// long as the process. It is idempotent. A key, or a non-empty Status, Why
// or PauseReason, that is not a valid name ([CheckName]), or a Rate or
// Ceiling that is negative, NaN or infinite, fails with [ErrInvalid]; on
// any error nothing changes. It implements budget.RecordStore.
func (s *LocalStore) SaveRecord(ctx context.Context, r forage.ProviderRecord) error {
	var persist func(forage.ProviderRecord) error
	if s.disk != nil {
		persist = s.disk.saveRecord
	}
	return saveRecord(ctx, s.c, s.records, r, persist)
}

// ListRecords returns the saved records whose keys come after after in
// byte order, in that order, at most limit of them: each as LoadRecord
// returns it. It fails with [ErrInvalid] for a limit < 1, with the ctx's
// error once it has ended, and with [ErrClosed] after Close. It implements
// budget.RecordLister, so an admin process lists every provider the store
// keeps.
func (s *LocalStore) ListRecords(ctx context.Context, after string, limit int) ([]forage.ProviderRecord, error) {
	var argErr error
	if limit < 1 {
		argErr = fmt.Errorf("%w: ListRecords limit must be >= 1, got %d", ErrInvalid, limit)
	}
	if err := s.c.enter(ctx, argErr); err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	var keys []string
	for k := range s.records {
		if k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	keys = keys[:min(len(keys), limit)]
	out := make([]forage.ProviderRecord, len(keys))
	for i, k := range keys {
		r := s.records[k]
		r.Refusals, r.Spent = slices.Clone(r.Refusals), maps.Clone(r.Spent) // the caller's own
		out[i] = r
	}
	return out, nil
}

func loadRecord(ctx context.Context, c *core, book recordBook, key string) (forage.ProviderRecord, bool, error) {
	if err := c.enter(ctx, CheckName("provider key", key)); err != nil {
		return forage.ProviderRecord{}, false, err
	}
	defer c.mu.Unlock()
	r, ok := book[key]
	r.Refusals, r.Spent = slices.Clone(r.Refusals), maps.Clone(r.Spent) // the caller's own
	return r, ok, nil
}

// saveRecord installs r merged into the saved record in book, after persist
// (nil: none) has written it.
func saveRecord(ctx context.Context, c *core, book recordBook, r forage.ProviderRecord, persist func(forage.ProviderRecord) error) error {
	if err := c.enter(ctx, checkRecord(r)); err != nil {
		return err
	}
	defer c.mu.Unlock()
	saved, had := book[r.Key]
	next := mergeRecord(saved, had, r)
	if had && sameRecord(saved, next) {
		return nil // idempotent: nothing to write
	}
	var err error
	if persist != nil {
		err = persist(next)
	}
	if persisted(err) { // written, even if not synced: memory matches disk
		book[r.Key] = next
	}
	return err
}

// mergeRecord returns saved upserted with r (see [LocalStore.SaveRecord]).
// Times lose their monotonic reading, as a round trip through a file would.
func mergeRecord(saved forage.ProviderRecord, had bool, r forage.ProviderRecord) forage.ProviderRecord {
	r.PausedUntil, r.Updated = r.PausedUntil.Round(0), r.Updated.Round(0)
	r.Refusals, r.Spent = roundAll(r.Refusals), roundMap(r.Spent)
	if !had {
		return r
	}
	if r.PausedUntil.Before(saved.PausedUntil) {
		r.PausedUntil, r.PauseReason = saved.PausedUntil, saved.PauseReason
	}
	if r.Status == "" {
		r.Status, r.Why = saved.Status, saved.Why
	}
	return r
}

// roundAll returns a copy of ts with each time's monotonic reading
// dropped (nil for none): the store keeps its own copy, wall clock only.
func roundAll(ts []time.Time) []time.Time {
	if len(ts) == 0 {
		return nil
	}
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.Round(0)
	}
	return out
}

// roundMap returns a copy of m with each time's monotonic reading dropped
// (nil for none), as roundAll does.
func roundMap(m map[string]time.Time) map[string]time.Time {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]time.Time, len(m))
	for k, t := range m {
		out[k] = t.Round(0)
	}
	return out
}

// sameRecord reports whether a and b hold the same record.
func sameRecord(a, b forage.ProviderRecord) bool {
	return a.PausedUntil.Equal(b.PausedUntil) && a.Updated.Equal(b.Updated) && a.Key == b.Key &&
		slices.EqualFunc(a.Refusals, b.Refusals, time.Time.Equal) && maps.EqualFunc(a.Spent, b.Spent, time.Time.Equal) &&
		a.Status == b.Status && a.Why == b.Why && a.Rate == b.Rate && a.Ceiling == b.Ceiling &&
		a.Confirmed == b.Confirmed && a.PauseReason == b.PauseReason &&
		a.Requests == b.Requests && a.OK == b.OK && a.Throttled == b.Throttled
}

// checkRecord validates SaveRecord's record.
func checkRecord(r forage.ProviderRecord) error {
	if err := CheckName("provider key", r.Key); err != nil {
		return err
	}
	for _, f := range []struct{ what, v string }{{"Status", r.Status}, {"Why", r.Why}, {"PauseReason", string(r.PauseReason)}} {
		if f.v != "" {
			if err := CheckName(f.what, f.v); err != nil {
				return err
			}
		}
	}
	for _, f := range []struct {
		what string
		v    float64
	}{{"Rate", r.Rate}, {"Ceiling", r.Ceiling}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%w: %s must be >= 0 and finite (got %v)", ErrInvalid, f.what, f.v)
		}
	}
	return nil
}

// saveRecord writes the file of r's provider.
func (d diskDir) saveRecord(r forage.ProviderRecord) error {
	data, err := marshal(kindProvider, r)
	if err != nil {
		return err
	}
	return d.write(recordFile(providerPre, r.Key), data)
}

// decodeRecord reads the record in the file named file.
func decodeRecord(file string, data []byte) (forage.ProviderRecord, error) {
	var r forage.ProviderRecord
	if err := unmarshal(kindProvider, data, &r); err != nil {
		return r, err
	}
	if recordFile(providerPre, r.Key) != file {
		return r, fmt.Errorf("provider %s does not belong in this file", quoteShort(r.Key))
	}
	if nameProblem(r.Key, false) != "" || !(r.Rate >= 0) || !(r.Ceiling >= 0) {
		return r, fmt.Errorf("bad provider record (provider %s, rate %v, ceiling %v)", quoteShort(r.Key), r.Rate, r.Ceiling)
	}
	return r, nil
}

// loadRecordFile reads the file of one provider's record into the store;
// loadFile calls it. A pause read from the pauses file merges into it.
func (s *LocalStore) loadRecordFile(name string, data []byte) error {
	r, err := decodeRecord(name, data)
	if err == nil {
		saved, had := s.records[r.Key]
		s.records[r.Key] = mergeRecord(saved, had, r)
	}
	return err
}

// pauseRec is one pause in the pauses file of an earlier version. Reason
// is empty in a file written before reasons were kept.
type pauseRec struct {
	Provider string    `json:"provider"`
	Until    time.Time `json:"until"`
	Reason   string    `json:"reason,omitempty"`
}

// loadPauses reads the pauses file of an earlier version into the store's
// records: each pause becomes its provider's, or merges into the record
// read from the provider's own file. loadFile calls it.
func (s *LocalStore) loadPauses(data []byte) error {
	var rec struct {
		Pauses []pauseRec `json:"pauses"`
	}
	if err := unmarshal(kindPauses, data, &rec); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, p := range rec.Pauses {
		if seen[p.Provider] || nameProblem(p.Provider, false) != "" || p.Until.IsZero() ||
			(p.Reason != "" && nameProblem(p.Reason, false) != "") {
			return fmt.Errorf("bad pause record %d (provider %s)", i, quoteShort(p.Provider))
		}
		seen[p.Provider] = true
		r := forage.ProviderRecord{Key: p.Provider, PausedUntil: p.Until, PauseReason: forage.Reason(p.Reason)}
		if saved, had := s.records[p.Provider]; had {
			// The provider's own file was read first: it wins but for a
			// later pause.
			r = mergeRecord(r, true, saved)
		}
		s.records[p.Provider] = r
	}
	return nil
}
