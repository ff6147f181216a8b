package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A stream's lease, and a job's, is tied to the life of the process that holds it, so
// that a restart after kill -9 need not wait out the lease's TTL.
//
// The process keeps one connection of its own per pool, outside the pool,
// that does nothing but hold a session-level advisory lock on a random
// key: the session. Every lease the process's stores grant or renew
// records that key (streams.lease_session, and jobs.lease_session for a
// job's lease, which a claim grants and an Update renews). When the
// process dies, the kernel closes its sockets, PostgreSQL ends the session
// and drops the lock; Acquire (or a job claim) tries the recorded key with
// pg_try_advisory_xact_lock and, if it gets it, knows the holder is gone
// and takes the lease over at once.
// A lease whose session is alive, or that records none, excludes others
// until it expires, as before.
//
// Why this shape, with pgx v5 pools: a pool reuses and recycles its
// connections (idle and lifetime limits, health checks), so an advisory
// lock taken on a pool connection follows that connection, not the
// process, and a lock per stream would pin one pool connection per leased
// stream. One dedicated connection per pool, whatever the number of streams
// and stores, is the whole cost. No goroutine is started: the session is
// connected on the first lease, checked with a ping whenever a lease is
// granted or renewed (one round trip, every half TTL for a running
// stream, every third of LeaseTTL for a running job; callers at once share
// one), and replaced with a new key if it broke; the renewal records
// the new key, or none if no session could be had.
//
// The failure modes are those of liveness, never of safety: a false
// "dead" (the session's connection broke while the process lives on) lets
// another process take the lease over early, and fencing then refuses the
// old holder's commits, which stop its run with checkpoint.ErrLeaseLost; a
// false "alive" (a machine that lost power, whose connection the server
// has not yet timed out) costs the lease's TTL, as before.

// sessionRetry is how long after a failed attempt to connect the session
// the next one waits; meanwhile leases record no session.
const sessionRetry = time.Second

// sessionTimeout bounds connecting the session and each ping.
const sessionTimeout = 5 * time.Second

// session is the connection that ties a process's leases to its life, one
// per pool, shared by the stores on that pool.
type session struct {
	pool *pgxpool.Pool

	mu      sync.Mutex
	refs    int       // stores using it; guarded by sessions.mu
	conn    *pgx.Conn // nil until connected, or after it broke
	key     int64     // the advisory lock conn holds; 0 without conn
	checked time.Time // when the last check that found conn alive began; zero without conn
	failed  time.Time // when the last attempt to connect failed
}

// sessions holds the session of each pool that has stores.
var sessions struct {
	mu sync.Mutex
	m  map[*pgxpool.Pool]*session
}

// attachSession returns pool's session, making it if needed, and counts
// one more store using it.
func attachSession(pool *pgxpool.Pool) *session {
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	if sessions.m == nil {
		sessions.m = map[*pgxpool.Pool]*session{}
	}
	s := sessions.m[pool]
	if s == nil {
		s = &session{pool: pool}
		sessions.m[pool] = s
	}
	s.refs++
	return s
}

// detach counts one store less; the last closes the connection, which
// ends the session and with it every lease tied to it.
func (s *session) detach() {
	sessions.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(sessions.m, s.pool)
	}
	sessions.mu.Unlock()
	if last {
		s.mu.Lock()
		s.drop()
		s.mu.Unlock()
	}
}

// current returns the key of a live session, connecting one if needed, or
// 0 when none can be had: then the lease records no session and ends only
// by release or expiry. ctx's cancellation is not passed on, since a
// cancelled query closes its connection and would end the session.
//
// Callers that arrive while a ping is under way wait for it, and then
// share the next one: a check begun after a call began answers for it as
// well as a ping of its own, so a burst of claims and renewals costs two
// pings, not one each in turn.
func (s *session) current(ctx context.Context) int64 {
	called := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && !s.checked.Before(called) {
		return s.key
	}
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
	defer cancel()
	if s.conn != nil {
		if err := s.conn.Ping(ctx); err == nil {
			s.checked = now
			return s.key
		}
		s.drop()
	}
	if now.Sub(s.failed) < sessionRetry {
		return 0
	}
	if err := s.connect(ctx); err != nil {
		s.drop()
		s.failed = now
		return 0
	}
	s.checked = now
	return s.key
}

// connect opens the session's connection and takes the session-level
// advisory lock on a fresh random key.
func (s *session) connect(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	s.conn = conn
	// A server that ends idle sessions would end this one between two
	// renewals and let live leases be taken over: not for this session.
	// (An error, from a server without the setting, changes nothing.)
	_, _ = conn.Exec(ctx, `SET idle_session_timeout = 0`)
	for range 8 { // a taken key is a 2^-64 event; eight in a row, a bug
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
		key := int64(binary.LittleEndian.Uint64(b[:]))
		if key == 0 {
			continue // 0 means no session
		}
		var locked bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1::bigint)`, key).Scan(&locked); err != nil {
			return err
		}
		if locked { // else some session holds that key: draw another
			s.key = key
			return nil
		}
	}
	return errors.New("pgstore: no free advisory lock key for the lease session")
}

// drop closes the connection, if any, ending the session.
func (s *session) drop() {
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
		_ = s.conn.Close(ctx)
		cancel()
	}
	s.conn, s.key, s.checked = nil, 0, time.Time{}
}

// sessionKey returns the session key a lease granted or renewed now
// records: nil (SQL NULL) when the store has no session or none can be
// had.
func (st *Store) sessionKey(ctx context.Context) *int64 {
	if st.sess == nil {
		return nil
	}
	if key := st.sess.current(ctx); key != 0 {
		return &key
	}
	return nil
}
