package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// core is the state machine both the memory store and the file store run.
// Every mutation computes the new value of one record (a stream, a series'
// coverage, the gap log) beside the old one, hands it to the persister, and
// installs it only if the persister succeeded, so a failed write changes
// nothing. One mutex serializes everything: these stores serve one process.
type core struct {
	now func() time.Time
	p   persister // nil keeps everything in memory

	mu      sync.Mutex
	closed  bool
	streams map[string]streamState
	cover   map[string]Coverage
	gaps    []Gap // unresolved, sorted by ID
	lastGap int64 // the highest ID ever issued
}

// streamState is everything kept per stream. It is a value whose byte slices
// are never modified in place, so a copy is a snapshot.
type streamState struct {
	cps      [3]Checkpoint // indexed by Mode; index 0 unused
	lease    Lease         // the latest grant; Token 0 means never leased
	released bool          // whether lease was released
}

// held reports whether the latest grant still owns the stream (it may have
// expired; only a takeover ends it).
func (s streamState) held() bool { return s.lease.Token != 0 && !s.released }

// persister makes one record durable before the core installs it.
type persister interface {
	saveStream(name string, s streamState) error
	saveCoverage(series string, c Coverage) error
	saveGaps(lastID int64, open []Gap) error
}

// errVisible marks a persist error raised after the new record became
// visible (the rename succeeded, syncing the directory failed): the core
// installs the record so memory matches disk, and still reports the error.
var errVisible = errors.New("checkpoint: written but not synced")

func newCore(now func() time.Time, p persister) *core {
	if now == nil {
		now = time.Now
	}
	return &core{now: now, p: p, streams: map[string]streamState{}, cover: map[string]Coverage{}}
}

// clock reads the store's clock without the monotonic reading, so stored
// times compare the same before and after a round trip through a file.
func (c *core) clock() time.Time { return c.now().Round(0) }

// lock takes the mutex unless the store is closed.
func (c *core) lock() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// enter checks the arguments (already checked by the caller into argErr) and
// the context, then locks.
func (c *core) enter(ctx context.Context, argErr error) error {
	if argErr != nil {
		return argErr
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	return c.lock()
}

// persisted runs save and reports whether to install the new record.
func persisted(err error) bool { return err == nil || errors.Is(err, errVisible) }

func (c *core) putStream(name string, s streamState) error {
	var err error
	if c.p != nil {
		err = c.p.saveStream(name, s)
	}
	if persisted(err) {
		c.streams[name] = s
	}
	return err
}

func (c *core) load(ctx context.Context, key Key) (Checkpoint, error) {
	if err := c.enter(ctx, checkKey(key)); err != nil {
		return Checkpoint{}, err
	}
	cp := c.streams[key.Stream].cps[key.Mode]
	c.mu.Unlock()
	cp.Key = key
	cp.Cursor = bytes.Clone(cp.Cursor)
	return cp, nil
}

func (c *core) commit(ctx context.Context, key Key, cursor []byte, expect int64, l Lease) (Checkpoint, error) {
	if err := c.enter(ctx, checkCommit(key, expect, l)); err != nil {
		return Checkpoint{}, err
	}
	defer c.mu.Unlock()
	s := c.streams[key.Stream]
	if err := fence(s, l); err != nil {
		return Checkpoint{}, err
	}
	if v := s.cps[key.Mode].Version; v != expect {
		return Checkpoint{}, fmt.Errorf("%w: %v is at version %d, not %d", ErrConflict, key, v, expect)
	}
	cp := Checkpoint{Key: key, Cursor: bytes.Clone(cursor), Version: expect + 1, UpdatedAt: c.clock()}
	s.cps[key.Mode] = cp
	if err := c.putStream(key.Stream, s); err != nil {
		return Checkpoint{}, err
	}
	cp.Cursor = bytes.Clone(cp.Cursor)
	return cp, nil
}

// fence checks that l may write to the stream whose state is s.
func fence(s streamState, l Lease) error {
	if l.Token == 0 {
		if s.held() {
			return fmt.Errorf("%w: unfenced commit to stream %q, leased by %q (token %d)",
				ErrLeaseHeld, s.lease.Stream, s.lease.Owner, s.lease.Token)
		}
		return nil
	}
	return current(s, l)
}

// current reports, as an error wrapping ErrLeaseLost, why l is not the
// stream's current grant; nil if it is.
func current(s streamState, l Lease) error {
	switch {
	case l.Token > s.lease.Token:
		return fmt.Errorf("%w: stream %q: token %d was never granted", ErrLeaseLost, l.Stream, l.Token)
	case l.Token < s.lease.Token:
		return fmt.Errorf("%w: stream %q: token %d was superseded by token %d (owner %q)",
			ErrLeaseLost, l.Stream, l.Token, s.lease.Token, s.lease.Owner)
	case l.Owner != s.lease.Owner:
		return fmt.Errorf("%w: stream %q: token %d belongs to %q, not %q",
			ErrLeaseLost, l.Stream, l.Token, s.lease.Owner, l.Owner)
	case s.released:
		return fmt.Errorf("%w: stream %q: token %d was released", ErrLeaseLost, l.Stream, l.Token)
	}
	return nil
}

func (c *core) acquire(ctx context.Context, stream, owner string, ttl time.Duration) (Lease, error) {
	if err := c.enter(ctx, checkAcquire(stream, owner, ttl)); err != nil {
		return Lease{}, err
	}
	defer c.mu.Unlock()
	now := c.clock()
	s := c.streams[stream]
	if s.held() && now.Before(s.lease.Expires) {
		return Lease{}, &LeaseHeldError{Lease: s.lease}
	}
	s.lease = Lease{Stream: stream, Owner: owner, Token: s.lease.Token + 1, Expires: now.Add(ttl)}
	s.released = false
	if err := c.putStream(stream, s); err != nil {
		return Lease{}, err
	}
	return s.lease, nil
}

func (c *core) renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	argErr := checkTTL(ttl)
	if err := checkLease(l); err != nil {
		argErr = err
	}
	if err := c.enter(ctx, argErr); err != nil {
		return Lease{}, err
	}
	defer c.mu.Unlock()
	s := c.streams[l.Stream]
	if err := current(s, l); err != nil {
		return Lease{}, err
	}
	s.lease.Expires = c.clock().Add(ttl)
	if err := c.putStream(l.Stream, s); err != nil {
		return Lease{}, err
	}
	return s.lease, nil
}

func (c *core) release(ctx context.Context, l Lease) error {
	if err := c.enter(ctx, checkLease(l)); err != nil {
		return err
	}
	defer c.mu.Unlock()
	s := c.streams[l.Stream]
	if s.released && l.Token == s.lease.Token && l.Owner == s.lease.Owner {
		return nil // already released: idempotent
	}
	if err := current(s, l); err != nil {
		return err
	}
	s.released = true
	return c.putStream(l.Stream, s)
}

func (c *core) addGap(ctx context.Context, g Gap) (Gap, error) {
	if err := c.enter(ctx, checkGap(g)); err != nil {
		return Gap{}, err
	}
	defer c.mu.Unlock()
	g.ID = c.lastGap + 1
	g.Created = c.clock()
	g.Cursor = bytes.Clone(g.Cursor)
	open := append(slices.Clip(c.gaps), g) // a new array: c.gaps stays intact
	if err := c.putGaps(g.ID, open); err != nil {
		return Gap{}, err
	}
	g.Cursor = bytes.Clone(g.Cursor)
	return g, nil
}

func (c *core) putGaps(lastID int64, open []Gap) error {
	var err error
	if c.p != nil {
		err = c.p.saveGaps(lastID, open)
	}
	if persisted(err) {
		c.lastGap, c.gaps = lastID, open
	}
	return err
}

func (c *core) listGaps(ctx context.Context, q GapQuery) ([]Gap, error) {
	if err := c.enter(ctx, checkQuery(q)); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	var out []Gap
	i := sort.Search(len(c.gaps), func(k int) bool { return c.gaps[k].ID > q.After })
	for _, g := range c.gaps[i:] {
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
		if (q.Stream == "" || g.Key.Stream == q.Stream) && (q.Mode == 0 || g.Key.Mode == q.Mode) {
			g.Cursor = bytes.Clone(g.Cursor)
			out = append(out, g)
		}
	}
	return out, nil
}

func (c *core) resolveGap(ctx context.Context, id int64) error {
	var argErr error
	if id <= 0 {
		argErr = fmt.Errorf("%w: gap id must be > 0 (got %d)", ErrInvalid, id)
	}
	if err := c.enter(ctx, argErr); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if id > c.lastGap {
		return fmt.Errorf("%w: no gap was recorded with id %d", ErrNotFound, id)
	}
	i, found := slices.BinarySearchFunc(c.gaps, id, func(g Gap, id int64) int { return cmp.Compare(g.ID, id) })
	if !found {
		return nil // already resolved: idempotent
	}
	open := slices.Delete(slices.Clone(c.gaps), i, i+1)
	return c.putGaps(c.lastGap, open)
}

func (c *core) addCoverage(ctx context.Context, series string, r Range) error {
	if err := c.enter(ctx, checkSeries(series, r)); err != nil {
		return err
	}
	defer c.mu.Unlock()
	cov := c.cover[series]
	if cov.Covers(r) {
		return nil // nothing new: no write
	}
	cov.Add(Range{Start: r.Start.Round(0), End: r.End.Round(0)})
	var err error
	if c.p != nil {
		err = c.p.saveCoverage(series, cov)
	}
	if persisted(err) {
		c.cover[series] = cov
	}
	return err
}

func (c *core) coverage(ctx context.Context, series string) (Coverage, error) {
	if err := c.enter(ctx, CheckName("series", series)); err != nil {
		return Coverage{}, err
	}
	defer c.mu.Unlock()
	return c.cover[series], nil // Coverage is copy-on-write: sharing is safe
}

// endLeases ends every unreleased lease at the clock's now: the store was
// just opened under an exclusive lock, so their holders are gone. The next
// Acquire takes each over with the next token; until then the old holder,
// if it somehow lives on, may still Renew and Commit, as after an expiry.
// Nothing is written: a lease's end is not persisted, only its takeover.
func (c *core) endLeases() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	for name, s := range c.streams {
		if s.held() && now.Before(s.lease.Expires) {
			s.lease.Expires = now
			c.streams[name] = s
		}
	}
}
