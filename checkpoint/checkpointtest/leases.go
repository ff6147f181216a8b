package checkpointtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

var leaseTests = []test{
	{"SecondOwnerGetsLeaseHeld", func(t *testing.T, e *env) {
		e.acquire("s", "a", time.Minute)
		_, err := e.s.Acquire(e.ctx, "s", "b", time.Minute)
		wantErr(t, "Acquire by a second owner", err, checkpoint.ErrLeaseHeld)
		_, err = e.s.Acquire(e.ctx, "s", "a", time.Minute)
		wantErr(t, "Acquire again by the holder", err, checkpoint.ErrLeaseHeld)
		e.acquire("other", "b", time.Minute) // leases are per stream
	}},
	{"HeldErrorNamesHolderAndExpiry", func(t *testing.T, e *env) {
		a := e.acquire("s", "host-7/4121/9f2c01aa", 45*time.Second)
		e.clock.Advance(10 * time.Second)
		a, err := e.s.Renew(e.ctx, a, 45*time.Second)
		wantErr(t, "Renew", err, nil)
		_, err = e.s.Acquire(e.ctx, "s", "b", time.Minute)
		var held *checkpoint.LeaseHeldError
		if !errors.As(err, &held) {
			t.Fatalf("Acquire of a held stream: %v (%T), want a *checkpoint.LeaseHeldError", err, err)
		}
		wantErr(t, "Acquire of a held stream", err, checkpoint.ErrLeaseHeld)
		diff(t, "LeaseHeldError.Lease (the holder's renewed grant)", a, held.Lease)
	}},
	{"LiveUntilExpiresThenTakenOver", func(t *testing.T, e *env) {
		a := e.acquire("s", "a", 10*time.Second)
		e.clock.Advance(10*time.Second - time.Millisecond)
		_, err := e.s.Acquire(e.ctx, "s", "b", time.Minute)
		wantErr(t, "Acquire 1ms before expiry", err, checkpoint.ErrLeaseHeld)
		e.clock.Advance(time.Millisecond) // now == Expires: no longer live
		b := e.acquire("s", "b", time.Minute)
		if b.Token <= a.Token {
			t.Fatalf("takeover token %d, want > %d", b.Token, a.Token)
		}
	}},
	{"TokensGrowAndAreNeverReused", func(t *testing.T, e *env) {
		var last int64
		for i := range 6 {
			l := e.acquire("s", fmt.Sprint("o", i%2), time.Minute)
			if l.Token <= last {
				t.Fatalf("grant %d: token %d, want > %d", i, l.Token, last)
			}
			last = l.Token
			if i%2 == 0 {
				wantErr(t, fmt.Sprintf("grant %d: Release", i), e.s.Release(e.ctx, l), nil)
			} else {
				e.clock.Advance(time.Minute) // expire instead of releasing
			}
		}
	}},
	{"StaleHolderIsFenced", func(t *testing.T, e *env) {
		key := catchUp("s")
		a := e.acquire("s", "a", 30*time.Second)
		e.commit(key, "a-1", 0, a)
		e.clock.Advance(time.Minute) // a pauses past its TTL
		b := e.acquire("s", "b", 30*time.Second)
		e.clock.Advance(time.Second)
		// a wakes up and carries on as if it still held the stream.
		_, err := e.s.Commit(e.ctx, key, []byte("a-2"), 1, a)
		wantErr(t, "Commit by the fenced holder", err, checkpoint.ErrLeaseLost)
		if errors.Is(err, checkpoint.ErrConflict) {
			t.Fatalf("Commit by the fenced holder: %v also matches ErrConflict; a lost lease must not look retryable", err)
		}
		_, err = e.s.Renew(e.ctx, a, time.Minute)
		wantErr(t, "Renew by the fenced holder", err, checkpoint.ErrLeaseLost)
		wantErr(t, "Release by the fenced holder", e.s.Release(e.ctx, a), checkpoint.ErrLeaseLost)
		_, err = e.s.Acquire(e.ctx, "s", "c", time.Minute)
		wantErr(t, "Acquire after the fenced holder's Release", err, checkpoint.ErrLeaseHeld)
		cp := e.commit(key, "b-1", 1, b)
		diff(t, "checkpoint after the new holder's commit", cp, e.load(key))
	}},
	{"RenewExtendsSameToken", func(t *testing.T, e *env) {
		a := e.acquire("s", "a", 10*time.Second)
		e.clock.Advance(8 * time.Second)
		r, err := e.s.Renew(e.ctx, a, 10*time.Second)
		wantErr(t, "Renew", err, nil)
		want := a
		want.Expires = e.clock.After(10 * time.Second)
		diff(t, "renewed lease", want, r)
		e.clock.Advance(5 * time.Second) // past the old expiry, before the new
		_, err = e.s.Acquire(e.ctx, "s", "b", time.Minute)
		wantErr(t, "Acquire after the original expiry", err, checkpoint.ErrLeaseHeld)
		e.commit(catchUp("s"), "x", 0, r)
		e.commit(catchUp("s"), "y", 1, a) // Expires in the struct is not checked
	}},
	{"ExpiredButNotTakenOverStillHolds", func(t *testing.T, e *env) {
		a := e.acquire("s", "a", 10*time.Second)
		e.clock.Advance(time.Minute)
		e.commit(steady("s"), "late", 0, a)
		r, err := e.s.Renew(e.ctx, a, 10*time.Second)
		wantErr(t, "Renew after expiry without takeover", err, nil)
		if r.Token != a.Token || !r.Expires.Equal(e.clock.After(10*time.Second)) {
			t.Fatalf("Renew: got %+v, want token %d expiring %v", r, a.Token, e.clock.After(10*time.Second))
		}
		_, err = e.s.Acquire(e.ctx, "s", "b", time.Minute)
		wantErr(t, "Acquire after the revival", err, checkpoint.ErrLeaseHeld)
	}},
	{"NonHolderCannotRenewOrRelease", func(t *testing.T, e *env) {
		a := e.acquire("s", "a", time.Minute)
		forged := a
		forged.Owner = "mallory"
		_, err := e.s.Renew(e.ctx, forged, time.Minute)
		wantErr(t, "Renew with another owner's token", err, checkpoint.ErrLeaseLost)
		wantErr(t, "Release with another owner's token", e.s.Release(e.ctx, forged), checkpoint.ErrLeaseLost)
		_, err = e.s.Commit(e.ctx, catchUp("s"), []byte("x"), 0, forged)
		wantErr(t, "Commit with another owner's token", err, checkpoint.ErrLeaseLost)
		future := a
		future.Token += 10
		_, err = e.s.Renew(e.ctx, future, time.Minute)
		wantErr(t, "Renew with a token never granted", err, checkpoint.ErrLeaseLost)
		_, err = e.s.Commit(e.ctx, catchUp("s"), []byte("x"), 0, future)
		wantErr(t, "Commit with a token never granted", err, checkpoint.ErrLeaseLost)
		never := checkpoint.Lease{Stream: "never-leased", Owner: "a", Token: 1}
		_, err = e.s.Renew(e.ctx, never, time.Minute)
		wantErr(t, "Renew on a stream never leased", err, checkpoint.ErrLeaseLost)
		e.commit(catchUp("s"), "a-1", 0, a) // the real holder is unaffected
	}},
	{"ReleaseFreesAndIsIdempotent", func(t *testing.T, e *env) {
		a := e.acquire("s", "a", time.Hour)
		wantErr(t, "Release", e.s.Release(e.ctx, a), nil)
		wantErr(t, "Release again", e.s.Release(e.ctx, a), nil)
		_, err := e.s.Commit(e.ctx, catchUp("s"), []byte("x"), 0, a)
		wantErr(t, "Commit with a released lease", err, checkpoint.ErrLeaseLost)
		_, err = e.s.Renew(e.ctx, a, time.Minute)
		wantErr(t, "Renew of a released lease", err, checkpoint.ErrLeaseLost)
		b := e.acquire("s", "b", time.Hour) // at once, long before a's expiry
		wantErr(t, "Release by a after b acquired", e.s.Release(e.ctx, a), checkpoint.ErrLeaseLost)
		e.commit(catchUp("s"), "b-1", 0, b)
	}},
	{"UnfencedCommitOnlyWithoutHolder", func(t *testing.T, e *env) {
		key := catchUp("s")
		e.commit(key, "free", 0, checkpoint.Lease{})
		a := e.acquire("s", "a", 10*time.Second)
		_, err := e.s.Commit(e.ctx, key, []byte("unfenced"), 1, checkpoint.Lease{})
		wantErr(t, "unfenced Commit on a leased stream", err, checkpoint.ErrLeaseHeld)
		e.clock.Advance(time.Minute)
		_, err = e.s.Commit(e.ctx, key, []byte("unfenced"), 1, checkpoint.Lease{})
		wantErr(t, "unfenced Commit while an expired lease is unreleased", err, checkpoint.ErrLeaseHeld)
		wantErr(t, "Release", e.s.Release(e.ctx, a), nil)
		e.commit(key, "free-again", 1, checkpoint.Lease{})
	}},
	{"FenceCheckedBeforeVersion", func(t *testing.T, e *env) {
		key := catchUp("s")
		a := e.acquire("s", "a", time.Second)
		e.clock.Advance(time.Second)
		e.acquire("s", "b", time.Minute)
		_, err := e.s.Commit(e.ctx, key, []byte("x"), 7, a)
		wantErr(t, "Commit with a lost lease and a wrong version", err, checkpoint.ErrLeaseLost)
	}},
	{"ConcurrentAcquireExactlyOneWins", func(t *testing.T, e *env) {
		for round := range 4 {
			stream := fmt.Sprint("s", round)
			var (
				mu   sync.Mutex
				won  []checkpoint.Lease
				wg   sync.WaitGroup
				gate = make(chan struct{})
			)
			for i := range 16 {
				wg.Go(func() {
					<-gate
					l, err := e.s.Acquire(e.ctx, stream, fmt.Sprint("o", i), time.Minute)
					if err == nil {
						mu.Lock()
						won = append(won, l)
						mu.Unlock()
					} else if !errors.Is(err, checkpoint.ErrLeaseHeld) {
						t.Errorf("round %d racer %d: %v, want nil or ErrLeaseHeld", round, i, err)
					}
				})
			}
			close(gate)
			wg.Wait()
			if len(won) != 1 {
				t.Fatalf("round %d: %d concurrent Acquires won, want exactly 1: %+v", round, len(won), won)
			}
		}
	}},
}
