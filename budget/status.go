package budget

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
)

// operator is the status an operator gave a provider (see
// [Registry.SetStatus]), as this process last read it from the provider's
// record, and when to read it again.
type operator struct {
	paused  atomic.Bool
	why     atomic.Pointer[string]
	next    atomic.Int64 // unix nanoseconds: when Do may read the record again
	reading atomic.Bool  // a read is under way
	// turn holds one slot: a status is saved and applied, or read and
	// applied, one at a time, so this process applies last what the store
	// holds last (a pause whose save returned late was applied over a
	// resume saved after it: paused here, active in the store). A channel,
	// so a wait for it ends with its ctx. Made by newLocal.
	turn chan struct{}
}

// set applies a record's Status and Why. An empty status leaves the one
// in force (a record saved by a process, not an operator).
func (o *operator) set(status, why string) {
	switch status {
	case StatusPaused:
		o.why.Store(&why)
		o.paused.Store(true)
	case StatusActive:
		o.why.Store(&why)
		o.paused.Store(false)
	}
}

// The operator statuses of a provider record ([forage.ProviderRecord]).
const (
	// StatusActive puts a provider in service (the default).
	StatusActive = "active"
	// StatusPaused takes a provider out of service: every call stops at
	// once with [forage.ReasonPaused].
	StatusPaused = "paused"
)

// operatorPaused is Do's first check: the stop for a provider an operator
// paused. With cfg.Records set the record is read again in the background
// at most every recordEvery (from follow after each response, from here
// while paused), so a pause or a resume set by any process (or a restart's
// status) holds here within about that long. A provider in service reads
// no clock here.
func (p *local) operatorPaused() error {
	if !p.op.paused.Load() {
		return nil // the record is read again from follow, which has the time
	}
	if p.cfg.Records != nil {
		p.readStatus(time.Now()) // a paused provider gets no responses to follow
	}
	why := ""
	if w := p.op.why.Load(); w != nil {
		why = *w
	}
	return &Error{Provider: p.key, Reason: forage.ReasonPaused, Err: fmt.Errorf("budget: %q is paused by an operator: %q", p.key, why)}
}

// readStatus reads the provider's record in the background, if the last
// read is recordEvery old and none is under way, and applies its status.
func (p *local) readStatus(now time.Time) {
	if now.UnixNano() < p.op.next.Load() || !p.op.reading.CompareAndSwap(false, true) {
		return
	}
	p.op.next.Store(now.Add(recordEvery).UnixNano())
	go func() {
		defer p.op.reading.Store(false)
		select {
		case p.op.turn <- struct{}{}:
			defer func() { <-p.op.turn }()
		default:
			return // an operator's status is being set: it is what the store holds
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordSaveTimeout)
		defer cancel()
		if r, ok, err := p.cfg.Records.LoadRecord(ctx, p.key); err == nil && ok {
			p.op.set(r.Status, r.Why)
		}
	}()
}

// SetStatus gives the provider for key an operator's status:
// [StatusPaused] takes it out of service (every call stops at once, before
// any attempt, with [forage.ReasonPaused]), [StatusActive] puts it back.
// why says why, for people. With [RegistryConfig.Records] set the status
// is saved in the provider's record first, the rest of the record as the
// store holds it (what the processes that call the provider learned and
// booked is theirs; a process that called it itself saves its own view,
// as its next save would): a restart keeps it, and every
// process sharing the records obeys it within about five seconds of its
// next call. Direct [Provider.Do] calls and the [Transport] obey it alike.
// Calls for one key at once are applied in the order the store saved them;
// one waits for another's save until ctx ends, and one whose ctx is done
// applies nothing.
func (r *Registry) SetStatus(ctx context.Context, key, status, why string) error {
	if status != StatusActive && status != StatusPaused {
		return invalid.Must("SetStatus's status", `be "active" or "paused"`, fmt.Sprintf("%q", status))
	}
	pr, err := r.Get(key)
	if err != nil {
		return err
	}
	p := pr.(*entry).p
	if err := ctx.Err(); err != nil {
		// Done before its turn: not applied (a select with the turn free
		// too took either at random).
		return fmt.Errorf("budget: setting the status of %q: %w", key, err)
	}
	select {
	case p.op.turn <- struct{}{}:
		defer func() { <-p.op.turn }()
	case <-ctx.Done():
		return fmt.Errorf("budget: setting the status of %q: %w", key, ctx.Err())
	}
	if rs := p.cfg.Records; rs != nil {
		// The record as the store holds it, the status and why changed:
		// what the processes that call the provider learned and booked is
		// theirs. (Saved from this process's own view, an admin process
		// that calls nothing wrote back its own defaults: 10 an hour read
		// as 0.05/s, the known limit's bookings dropped, and the next
		// collector sent its burst again at once.)
		rec, ok, err := rs.LoadRecord(ctx, key)
		if err != nil {
			return fmt.Errorf("budget: loading the record of %q to set its status: %w", key, err)
		}
		if !ok || p.n.requests.Load() > 0 {
			rec = p.lastRecord() // none saved yet, or this process calls the provider: its view is the newest
		}
		rec.Status, rec.Why = status, why
		if err := rs.SaveRecord(ctx, rec); err != nil {
			return fmt.Errorf("budget: saving the status of %q: %w", key, err)
		}
	}
	p.op.set(status, why)
	return nil
}
