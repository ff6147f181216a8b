package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5"
)

// acquireSQL grants a lease in one upsert: a stream never leased gets token
// 1; otherwise the row is taken over, with the next token, only if its
// lease was released, has expired at now, or records a session that has
// ended (its advisory lock can be taken: the holder's process is gone; see
// session.go). The row lock the upsert takes makes concurrent Acquires take
// turns, so exactly one wins. The transaction-level lock taken to test a
// session ends with the statement. Parameters: stream, owner, expires,
// now, the new holder's session key (NULL for none).
const acquireSQL = `
INSERT INTO {{schema}}.streams AS st (stream, lease_owner, lease_token, lease_expires, released, lease_session)
VALUES ($1, $2, 1, $3, false, $5::bigint)
ON CONFLICT (stream) DO UPDATE SET lease_owner = excluded.lease_owner, lease_token = st.lease_token + 1,
	lease_expires = excluded.lease_expires, released = false, lease_session = excluded.lease_session
WHERE st.released OR st.lease_expires <= $4::timestamptz
	OR (st.lease_session IS NOT NULL AND pg_try_advisory_xact_lock(st.lease_session))
RETURNING lease_token`

// renewSQL moves the expiry of the current, unreleased grant and records
// the holder's session as it is now (a new key after its connection was
// replaced, or NULL when it has none). Parameters: stream, token, owner,
// expires, session key.
const renewSQL = `
UPDATE {{schema}}.streams SET lease_expires = $4, lease_session = $5::bigint
WHERE stream = $1 AND lease_token = $2 AND lease_owner = $3 AND NOT released
RETURNING lease_token`

// releaseSQL releases the current grant; releasing it again matches again
// and changes nothing. Parameters: stream, token, owner.
const releaseSQL = `
UPDATE {{schema}}.streams SET released = true
WHERE stream = $1 AND lease_token = $2 AND lease_owner = $3
RETURNING lease_token`

// leaseOfSQL reads a stream's lease, to explain a refusal.
const leaseOfSQL = `SELECT lease_owner, lease_token, lease_expires, released FROM {{schema}}.streams WHERE stream = $1`

// Acquire implements [checkpoint.Leases.Acquire] with one upsert. Besides
// a released or expired lease, it takes over at once a lease whose
// holder's process has died: see [Config.NoLeaseSession]. A lease found
// held is asked for again within 175 ms (a holder killed a moment ago may
// not have had its session ended by the server yet). A refusal is a
// [*checkpoint.LeaseHeldError] naming the holder and its expiry.
func (s *Store) Acquire(ctx context.Context, stream, owner string, ttl time.Duration) (checkpoint.Lease, error) {
	if err := enter(ctx, checkAcquire(stream, owner, ttl)); err != nil {
		return checkpoint.Lease{}, err
	}
	sess := s.sessionKey(ctx)
	var l checkpoint.Lease
	var err error
	for try := 0; ; try++ {
		now := s.clock()
		l = checkpoint.Lease{Stream: stream, Owner: owner, Expires: now.Add(ttl).Truncate(time.Microsecond)}
		err = s.pool.QueryRow(ctx, s.sql.acquire, stream, owner, l.Expires, now, sess).Scan(&l.Token)
		if !errors.Is(err, pgx.ErrNoRows) || try == len(heldRetries) {
			break
		}
		// Held: by a live process, or by one killed a moment ago whose
		// session the server has not ended yet (its backend reads the
		// closed socket when the machine gets to it). Asked again a few
		// times within a fifth of a second, a restart at once after a
		// SIGKILL does not yield to its own dead run (it did, on a busy
		// machine, once the new process reached Acquire within a few
		// milliseconds of the kill).
		t := time.NewTimer(heldRetries[try])
		select {
		case <-ctx.Done():
			t.Stop()
			return checkpoint.Lease{}, ctx.Err()
		case <-t.C:
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		op := "Acquire " + stream
		row, err := s.leaseOf(ctx, op, stream)
		if err != nil {
			return checkpoint.Lease{}, err
		}
		return checkpoint.Lease{}, &checkpoint.LeaseHeldError{
			Lease: checkpoint.Lease{Stream: stream, Owner: row.owner, Token: row.token, Expires: row.expires}}
	}
	if err != nil {
		return checkpoint.Lease{}, s.failWrite("Acquire "+stream, err)
	}
	return l, nil
}

// heldRetries are the waits before Acquire asks again for a lease found
// held (see Acquire): 175 ms in all.
var heldRetries = [...]time.Duration{25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

// Renew implements [checkpoint.Leases.Renew].
func (s *Store) Renew(ctx context.Context, lease checkpoint.Lease, ttl time.Duration) (checkpoint.Lease, error) {
	argErr := checkTTL(ttl)
	if err := checkLease(lease); err != nil {
		argErr = err
	}
	if err := enter(ctx, argErr); err != nil {
		return checkpoint.Lease{}, err
	}
	op := "Renew " + lease.Stream
	sess := s.sessionKey(ctx)
	expires := s.clock().Add(ttl).Truncate(time.Microsecond)
	var token int64
	err := s.pool.QueryRow(ctx, s.sql.renew, lease.Stream, lease.Token, lease.Owner, expires, sess).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return checkpoint.Lease{}, s.lostLease(ctx, op, lease)
	}
	if err != nil {
		return checkpoint.Lease{}, s.failWrite(op, err)
	}
	lease.Expires = expires
	return lease, nil
}

// Release implements [checkpoint.Leases.Release].
func (s *Store) Release(ctx context.Context, lease checkpoint.Lease) error {
	if err := enter(ctx, checkLease(lease)); err != nil {
		return err
	}
	op := "Release " + lease.Stream
	var token int64
	err := s.pool.QueryRow(ctx, s.sql.release, lease.Stream, lease.Token, lease.Owner).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.lostLease(ctx, op, lease)
	}
	if err != nil {
		return s.failWrite(op, err)
	}
	return nil
}

// lostLease reads the stream's lease to say why lease is not current.
func (s *Store) lostLease(ctx context.Context, op string, lease checkpoint.Lease) error {
	row, err := s.leaseOf(ctx, op, lease.Stream)
	if err != nil {
		return err
	}
	return row.lost(lease)
}

// leaseOf reads a stream's lease row.
func (s *Store) leaseOf(ctx context.Context, op, stream string) (leaseRow, error) {
	var r leaseRow
	err := s.pool.QueryRow(ctx, s.sql.leaseOf, stream).Scan(&r.owner, &r.token, &r.expires, &r.released)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return leaseRow{}, nil
	case err != nil:
		return leaseRow{}, s.fail(op, err)
	}
	r.found = true
	return r, nil
}
