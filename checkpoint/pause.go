package checkpoint

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Pauses: when a provider asked the collector to stay away (a 429 with
// Retry-After, a ban, a spent quota), the end of that pause is kept here,
// with why it was asked for, so a restarted process does not call the
// provider before it ends (retrying during a ban only extends it) and says
// that it is banned rather than throttled. The budget package reads and writes it
// through its PauseStore interface, which FileStore and MemoryStore
// implement without importing budget (dependencies point down).
//
// A FileStore keeps every provider's pause in one file, pauses.ckpt,
// rewritten whole on each save: saves are rare (one per pause set or
// extended) and the set is small, since pauses that have ended are dropped
// at each save.

// pausesFile is the FileStore file that holds the pauses.
const pausesFile = "pauses" + fileExt

// kindPauses is the file kind of pausesFile.
const kindPauses byte = 4

// pauseBook is the pauses of one store, by provider. The store's core
// mutex guards it.
type pauseBook map[string]pause

// pause is one provider's pause: its end, and why the provider asked for it
// (a forage.Reason such as "banned" or "throttled"; "" when not known, as in
// a file written before reasons were kept).
type pause struct {
	until  time.Time
	reason string
}

// pausesRec is the JSON payload of pausesFile.
type pausesRec struct {
	Pauses []pauseRec `json:"pauses"`
}

// pauseRec is one pause in pausesFile. Reason is omitted when empty, and a
// file written before it existed reads with it empty.
type pauseRec struct {
	Provider string    `json:"provider"`
	Until    time.Time `json:"until"`
	Reason   string    `json:"reason,omitempty"`
}

// LoadPause returns the end of the pause saved for provider and the reason
// saved with it, or the zero Time and "" when none is saved (or it ended
// and was dropped). The reason is "" for a pause saved without one. It
// fails with [ErrInvalid] for a provider key that is not a valid name
// ([CheckName]), and with [ErrClosed] after Close. It implements
// budget.PauseStore.
func (s *FileStore) LoadPause(ctx context.Context, provider string) (time.Time, string, error) {
	return loadPause(ctx, s.c, &s.pauses, provider)
}

// SavePause records that provider must not be called before until, for
// reason (a forage.Reason such as "banned"; "" for none). The file is on
// disk (written to a temporary file, synced, renamed, the directory
// synced) before SavePause returns nil. It never shortens a saved pause:
// the later end is kept with the reason saved with it, and for an equal end
// the new reason replaces the old one. It is idempotent; pauses that ended
// before the store's clock are dropped. A provider or a non-empty reason
// that is not a valid name ([CheckName]) fails with [ErrInvalid]. On a
// failed write nothing changes. It implements budget.PauseStore.
func (s *FileStore) SavePause(ctx context.Context, provider string, until time.Time, reason string) error {
	return savePause(ctx, s.c, &s.pauses, provider, pause{until, reason}, diskDir(s.dir).savePauses)
}

// LoadPause is [FileStore.LoadPause] for a store kept in memory.
func (m *MemoryStore) LoadPause(ctx context.Context, provider string) (time.Time, string, error) {
	return loadPause(ctx, m.c, &m.pauses, provider)
}

// SavePause is [FileStore.SavePause] for a store kept in memory: the pause
// lasts as long as the process.
func (m *MemoryStore) SavePause(ctx context.Context, provider string, until time.Time, reason string) error {
	return savePause(ctx, m.c, &m.pauses, provider, pause{until, reason}, nil)
}

func loadPause(ctx context.Context, c *core, book *pauseBook, provider string) (time.Time, string, error) {
	if err := c.enter(ctx, CheckName("provider", provider)); err != nil {
		return time.Time{}, "", err
	}
	defer c.mu.Unlock()
	p := (*book)[provider]
	return p.until, p.reason, nil
}

// checkPause validates SavePause's arguments.
func checkPause(provider, reason string) error {
	if err := CheckName("provider", provider); err != nil {
		return err
	}
	if reason != "" {
		return CheckName("reason", reason)
	}
	return nil
}

// savePause installs the later of the saved pause and p in *book (p's
// reason for an equal end), after persist (nil: none) has written the new
// book.
func savePause(ctx context.Context, c *core, book *pauseBook, provider string, p pause, persist func(pauseBook) error) error {
	if err := c.enter(ctx, checkPause(provider, p.reason)); err != nil {
		return err
	}
	defer c.mu.Unlock()
	p.until = p.until.Round(0) // as stored: compares the same after a round trip
	now := c.clock()
	old := (*book)[provider]
	if p.until.Before(old.until) || (p.until.Equal(old.until) && p.reason == old.reason) || !p.until.After(now) {
		return nil // nothing to extend: idempotent, and never shortened
	}
	next := pauseBook{provider: p}
	for q, u := range *book {
		if q != provider && u.until.After(now) {
			next[q] = u
		}
	}
	var err error
	if persist != nil {
		err = persist(next)
	}
	if persisted(err) { // written, even if not synced: memory matches disk
		*book = next
	}
	return err
}

// savePauses writes the pauses file.
func (d diskDir) savePauses(book pauseBook) error {
	data, err := encodePauses(book)
	if err != nil {
		return err
	}
	return d.write(pausesFile, data)
}

func encodePauses(book pauseBook) ([]byte, error) {
	rec := pausesRec{Pauses: []pauseRec{}}
	for _, p := range slices.Sorted(maps.Keys(book)) {
		rec.Pauses = append(rec.Pauses, pauseRec{p, book[p].until, book[p].reason})
	}
	return marshal(kindPauses, rec)
}

func decodePauses(data []byte) (pauseBook, error) {
	var rec pausesRec
	if err := unmarshal(kindPauses, data, &rec); err != nil {
		return nil, err
	}
	book := pauseBook{}
	for i, p := range rec.Pauses {
		if _, dup := book[p.Provider]; dup || nameProblem(p.Provider, false) != "" || p.Until.IsZero() ||
			(p.Reason != "" && nameProblem(p.Reason, false) != "") {
			return nil, fmt.Errorf("bad pause record %d (provider %s)", i, quoteShort(p.Provider))
		}
		book[p.Provider] = pause{p.Until, p.Reason}
	}
	return book, nil
}

// loadPauses reads the pauses file into the store; loadFile calls it.
func (s *FileStore) loadPauses(data []byte) error {
	book, err := decodePauses(data)
	if err == nil {
		s.pauses = book
	}
	return err
}
