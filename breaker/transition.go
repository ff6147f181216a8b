package breaker

import (
	"context"
	"log/slog"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Delivery of transitions.
//
// gobreaker calls OnStateChange with its mutex held, so a hook run from
// there that calls back into the breaker (State, Counts, Allow) deadlocks.
// onStateChange therefore only queues the transition; every method that
// calls into gobreaker calls flush after gobreaker returned, outside its
// mutex. One goroutine at a time delivers (the delivering flag), draining
// the queue until it is empty, so transitions are delivered in the order
// gobreaker made them and exactly once, even when several goroutines
// trigger them concurrently or a hook triggers more.

// onStateChange is gobreaker's OnStateChange, called under its mutex.
func (b *Breaker) onStateChange(_ string, from, to gobreaker.State) {
	t := Transition{Name: b.name, From: stateOf(from), To: stateOf(to), At: time.Now()}
	successes := b.probeSuccesses.Swap(0)
	if t.To == StateOpen {
		b.openUntil.Store(t.At.Add(b.openTimeout).UnixNano())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case t.From == StateClosed: // only readyToTrip opens a closed breaker
		t.Reason, t.Counts = b.tripReason, b.tripCounts
	case t.From == StateOpen:
		t.Reason = reasonOpenTimeout
	case t.To == StateOpen:
		// gobreaker opens on the failed probe without counting it.
		t.Reason = reasonProbeFailed
		t.Counts = Counts{Requests: successes + 1, Successes: successes, Failures: 1, ConsecutiveFailures: 1}
	default:
		// Every probe that reported succeeded (a failure would have
		// opened the breaker), and the probe gate admitted no more.
		t.Reason = reasonProbesSucceeded
		t.Counts = Counts{Requests: successes, Successes: successes, ConsecutiveSuccesses: successes}
	}
	b.pending = append(b.pending, t)
	b.enqueued++
	b.hasPending.Store(true)
}

// flush delivers the queued transitions, unless another goroutine is
// already delivering (it will deliver them). Call it only outside
// gobreaker's mutex.
func (b *Breaker) flush() {
	if !b.hasPending.Load() {
		return
	}
	b.mu.Lock()
	if b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	var batch []Transition
	next := 0 // index in batch of the first transition not yet handed to a hook
	finished := false
	defer func() {
		if finished {
			return
		}
		// A hook panicked. Put back what it did not get to, and let the
		// next call deliver it, instead of leaving delivering set forever.
		b.mu.Lock()
		b.pending = append(batch[next:], b.pending...)
		b.spare = nil
		b.hasPending.Store(len(b.pending) > 0)
		b.delivering = false
		b.mu.Unlock()
	}()
	for len(b.pending) > 0 {
		batch, next = b.pending, 0
		b.pending = b.spare[:0]
		b.hasPending.Store(false)
		b.mu.Unlock()
		for next < len(batch) {
			next++
			b.emit(batch[next-1])
		}
		clear(batch)
		b.mu.Lock()
		b.spare, batch = batch[:0], nil
	}
	b.delivering = false
	finished = true
	b.mu.Unlock()
}

// emit hands one transition to the logger and then to the hook.
func (b *Breaker) emit(t Transition) {
	if b.logger != nil {
		level := slog.LevelInfo
		if t.To == StateOpen {
			level = slog.LevelWarn
		}
		b.logger.LogAttrs(context.Background(), level, "breaker transition", t.attrs()...)
	}
	if b.onTransition != nil {
		b.onTransition(t)
	}
}
