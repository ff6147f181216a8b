package pgstore_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestWatchSharesAcrossStores: a document announced through one store (one
// process) reaches the watchers of its key on another store of the same
// schema, as it was announced, unless it cannot travel in a notification
// (too long, or not text): that comes as nil. A store of another schema in
// the same database hears nothing of it. A watch stopped
// after Close does not panic (it did: Close had emptied the watches).
func TestWatchSharesAcrossStores(t *testing.T) {
	t.Parallel()
	a, b := newStore(t, nil), newStore(t, nil)
	b2, err := pgstore.New(testPool(t), pgstore.Config{Schema: b.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	const key = "exchange.example.com"
	got, foreign := make(chan []byte, 16), make(chan []byte, 16)
	defer b2.WatchShares(key, func(doc []byte) { got <- doc })()
	defer a.WatchShares(key, func(doc []byte) { foreign <- doc })()
	long := []byte(`"` + strings.Repeat("x", 9000) + `"`)
	// The watch takes a moment to start listening: save the first
	// document until it comes through.
	first := []byte(`{"epoch":0}`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := b.AnnounceShares(context.Background(), key, first); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-got:
			if !bytes.Equal(d, first) {
				t.Fatalf("announced %q, the watcher was given %q", first, d)
			}
		case <-time.After(100 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("nothing reached the watcher within 10 s")
		}
		break
	}
	for _, c := range []struct {
		doc, want []byte
	}{
		{[]byte(`{"epoch":1}`), []byte(`{"epoch":1}`)},
		{long, nil},
		{[]byte{0xff, 0, 1}, nil},
		{[]byte(`{"epoch":2}`), []byte(`{"epoch":2}`)},
	} {
		if err := b.AnnounceShares(context.Background(), key, c.doc); err != nil {
			t.Fatalf("AnnounceShares(%.20q): %v", c.doc, err)
		}
	next:
		for {
			select {
			case d := <-got:
				if bytes.Equal(d, first) {
					continue // the first document, announced twice
				}
				if !bytes.Equal(d, c.want) {
					t.Fatalf("announced %.20q, the watcher was given %.20q; want %.20q", c.doc, d, c.want)
				}
				break next
			case <-time.After(10 * time.Second):
				t.Fatalf("announced %.20q: nothing reached the watcher within 10 s", c.doc)
			}
		}
	}
	select {
	case d := <-foreign:
		t.Fatalf("a store of another schema was given %.20q", d)
	default:
	}
	stop := b2.WatchShares(key, func([]byte) {})
	b2.Close()
	stop()
}

// TestWatchSharesConnectsAsThePool: the listening connection is made as the
// pool makes its own, BeforeConnect included (a pool that fetches its
// credentials or its address there, as with IAM tokens). Here the pool's
// configured port leads nowhere and BeforeConnect sets the server's: an
// announcement reaches the watcher only if the listener went through it
// too. (It did not: it connected to the configured address, failing every
// second for good.)
func TestWatchSharesConnectsAsThePool(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	host, port := cfg.ConnConfig.Host, cfg.ConnConfig.Port
	cfg.ConnConfig.Port = 1 // nothing listens there
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.Host, cc.Port = host, port
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Config{Schema: freshSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const key = "exchange.example.com"
	got := make(chan []byte, 16)
	defer s.WatchShares(key, func(doc []byte) { got <- doc })()
	doc := []byte(`{"epoch":1}`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := s.AnnounceShares(context.Background(), key, doc); err != nil {
			t.Fatal(err) // through the pool: BeforeConnect works for it
		}
		select {
		case d := <-got:
			if !bytes.Equal(d, doc) {
				t.Fatalf("announced %q, the watcher was given %q", doc, d)
			}
			return
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("nothing reached the watcher within 10 s: the listener did not connect as the pool does")
			}
		}
	}
}
