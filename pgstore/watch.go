package pgstore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5"
)

// The processes sharing a provider tell each other news through
// PostgreSQL's LISTEN and NOTIFY: AnnounceShares sends a notification on
// shareChannel whose payload is the schema, the key and the document, a
// line each; a store with keys watched keeps one connection of its own,
// outside the pool, listening on the channel (one per store, whatever the
// number of keys), and hands each document of its schema to the watchers
// of its key. The server wakes every listening connection for each
// notification (a small transaction of its own each), which is why budget
// announces news only, not every renewal.
const (
	shareChannel = "forage_shares"
	// notifyMax is the longest payload sent: PostgreSQL refuses one of
	// 8000 bytes or more. A longer document (dozens of processes share
	// the provider) is announced without it, and comes to the watchers
	// as nil.
	notifyMax = 7999
	// listenRetry is how long after the listening connection failed the
	// next attempt waits; meanwhile the processes hear of each other at
	// their renewals, as without a watch.
	listenRetry = time.Second
	// listenLinger is how long the listening connection stays open after
	// the last watch stopped: a provider called every few seconds lets
	// its lease go between calls, and would otherwise connect again for
	// each burst of calls.
	listenLinger = 30 * time.Second
	// listenPing is how long the listening connection may stay silent
	// before it is pinged: a connection that died without a word (a
	// failover, a dropped route) is found within it, not when TCP gives
	// up minutes later.
	listenPing = 30 * time.Second
)

// AnnounceShares implements budget.ShareWatcher: it sends doc to the
// watchers of key in every process on this database and schema (this one
// included), in one statement (pg_notify). A key that is not a valid name
// fails with an error wrapping [checkpoint.ErrInvalid], before any
// statement.
func (s *Store) AnnounceShares(ctx context.Context, key string, doc []byte) error {
	if err := enter(ctx, checkpoint.CheckName("provider key", key)); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", shareChannel, s.sharePayload(key, doc)); err != nil {
		return s.fail("AnnounceShares", err)
	}
	return nil
}

// sharePayload is the notification announcing doc saved under key.
func (s *Store) sharePayload(key string, doc []byte) string {
	head := s.schema + "\n" + key + "\n"
	if len(head)+len(doc) > notifyMax || !utf8.Valid(doc) || bytes.IndexByte(doc, 0) >= 0 {
		return head // a payload is text, without NUL: such a document comes as nil
	}
	return head + string(doc)
}

// listener is a store's watch of the share documents: the watchers by key,
// and the listening connection's goroutine while there are any.
type listener struct {
	mu     sync.Mutex
	subs   map[string][]*shareWatch
	cancel context.CancelFunc // ends the listening goroutine; nil when none runs
	closed bool               // by Close: no watch starts again
	idle   *time.Timer        // ends the goroutine listenLinger after the last stop
	// running counts the listening goroutines that have not yet returned
	// (one, or two while a lingering one closes as a new one starts):
	// Close waits for them.
	running sync.WaitGroup
}

// shareWatch is one WatchShares: its f, called under mu until stopped.
type shareWatch struct {
	mu      sync.Mutex
	stopped bool
	f       func(doc []byte)
}

// WatchShares implements budget.ShareWatcher: f is called with each
// document announced under key by any process sharing this database and
// schema, from now until stop is called, from a goroutine of the store's.
// The first watch of a store opens a connection of its own (outside the
// pool, made as the pool makes its own) that listens for announcements; it
// is closed in the background 30 s after the last stop, or by Close, which
// waits for it. If it fails, or stays silent 30 s and does not answer a
// ping, it is opened again a second later, and documents announced
// meanwhile are missed (the processes renew about every second anyway).
// Notifications need a session of their own: through a pooler in
// transaction mode (PgBouncer's default) none arrive, and the processes
// hear of each other at their renewals only. A document of 8000 bytes or
// more comes as nil. An invalid key is watched for nothing (no document is
// ever announced under it), and so is any key after Close.
func (s *Store) WatchShares(key string, f func(doc []byte)) (stop func()) {
	w := &shareWatch{f: f}
	l := &s.listen
	l.mu.Lock()
	if l.closed || checkpoint.CheckName("provider key", key) != nil {
		l.mu.Unlock()
		return func() {}
	}
	if l.subs == nil {
		l.subs = map[string][]*shareWatch{}
	}
	l.subs[key] = append(l.subs[key], w)
	if l.idle != nil {
		l.idle.Stop()
		l.idle = nil
	}
	if l.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		l.running.Go(func() { s.listenShares(ctx) })
	}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if subs := slices.DeleteFunc(l.subs[key], func(x *shareWatch) bool { return x == w }); len(subs) > 0 {
			l.subs[key] = subs
		} else {
			delete(l.subs, key) // (a no-op once Close made subs nil)
		}
		if len(l.subs) == 0 && l.cancel != nil && l.idle == nil {
			l.idle = time.AfterFunc(listenLinger, l.linger)
		}
		l.mu.Unlock()
		w.mu.Lock() // a delivery under way ends first
		w.stopped = true
		w.mu.Unlock()
	}
}

// linger ends the listening goroutine, listenLinger after the last watch
// stopped, unless a watch started since.
func (l *listener) linger() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idle == nil || len(l.subs) > 0 {
		return // a watch started since: it stopped the timer, too late
	}
	l.idle = nil
	if l.cancel != nil {
		l.cancel()
		l.cancel = nil
	}
}

// stopListening ends the listening goroutine, if one runs, and waits until
// it has closed its connection (Close).
func (l *listener) stopListening() {
	l.mu.Lock()
	if l.cancel != nil {
		l.cancel()
		l.cancel = nil
	}
	if l.idle != nil {
		l.idle.Stop()
		l.idle = nil
	}
	l.subs, l.closed = nil, true
	l.mu.Unlock()
	l.running.Wait()
}

// listenShares listens for the share documents until ctx ends, connecting
// again listenRetry after the connection failed.
func (s *Store) listenShares(ctx context.Context) {
	for {
		_ = s.listenOnce(ctx) // a failed connection: the renewals go on meanwhile
		t := time.NewTimer(listenRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// listenOnce connects as the pool does (its BeforeConnect and
// AfterConnect hooks included), listens and delivers until the connection
// fails or ctx ends, pinging the server after listenPing without a
// notification.
func (s *Store) listenOnce(ctx context.Context) error {
	conn, err := s.connectListener(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+shareChannel); err != nil {
		return err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			s.deliver(n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Silent for listenPing (a timeout leaves a pgx connection
			// usable): is the server still there?
			pctx, cancel := context.WithTimeout(ctx, sessionTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// connectListener opens the listening connection.
func (s *Store) connectListener(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	pc := s.pool.Config()
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, pc.ConnConfig); err != nil {
			return nil, err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig)
	if err != nil {
		return nil, err
	}
	if pc.AfterConnect != nil {
		if err := pc.AfterConnect(ctx, conn); err != nil {
			_ = conn.Close(ctx)
			return nil, err
		}
	}
	return conn, nil
}

// deliver hands the document a notification carries to the watchers of its
// key, if it is of this store's schema.
func (s *Store) deliver(payload string) {
	schema, rest, ok := strings.Cut(payload, "\n")
	if !ok || schema != s.schema {
		return
	}
	key, doc, ok := strings.Cut(rest, "\n")
	if !ok {
		return
	}
	s.listen.mu.Lock()
	subs := slices.Clone(s.listen.subs[key])
	s.listen.mu.Unlock()
	var b []byte
	if doc != "" {
		b = []byte(doc)
	}
	for _, w := range subs {
		w.mu.Lock()
		if !w.stopped {
			w.f(bytes.Clone(b))
		}
		w.mu.Unlock()
	}
}
