package pgstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/providertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// proxy forwards TCP connections to the test server until it is cut, so a
// test can make the server go away mid-run and come back.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }() //nolint:errcheck
		go func() { io.Copy(c, s); c.Close() }() //nolint:errcheck
	}
}

// setCut cuts every connection and refuses new ones (true), or lets new
// ones through again (false).
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// proxiedStore returns a store whose pool reaches the server through a
// proxy, on the same schema as direct.
func proxiedStore(t testing.TB, direct *pgstore.Store) (*pgstore.Store, *proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	addr := p.ln.Addr().(*net.TCPAddr)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(addr.Port)
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, pgstore.Config{Schema: direct.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close) // before the pool closes
	return s, p
}

// TestServerGoesAway: with the server unreachable mid-run every write
// fails with an error naming the operation, and none records progress
// that did not happen; when the server is back, work resumes.
func TestServerGoesAway(t *testing.T) {
	t.Parallel()
	direct := newStore(t, nil)
	s, px := proxiedStore(t, direct)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
	l, err := s.Acquire(ctx, "s", "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.Commit(ctx, key, []byte("c1"), 0, l)
	if err != nil {
		t.Fatal(err)
	}

	px.setCut(true)
	writes := map[string]func() error{
		"Commit":     func() error { _, err := s.Commit(ctx, key, []byte("c2"), 1, l); return err },
		"CommitWith": func() error { _, err := s.CommitWith(ctx, key, []byte("c2"), 1, l, noWrite); return err },
		"Release":    func() error { return s.Release(ctx, l) },
		"AddGap":     func() error { _, err := s.AddGap(ctx, checkpoint.Gap{Key: key, Reason: "deadline"}); return err },
		"AddCoverage": func() error {
			return s.AddCoverage(ctx, "c", checkpoint.Range{Start: time.Unix(0, 0), End: time.Unix(60, 0)})
		},
	}
	for name, write := range writes {
		err := write()
		if err == nil {
			t.Fatalf("%s with the server gone: no error", name)
		}
		if !strings.HasPrefix(err.Error(), "pgstore: ") || errors.Is(err, checkpoint.ErrConflict) || errors.Is(err, checkpoint.ErrLeaseLost) {
			t.Errorf("%s with the server gone: %v, want a pgstore I/O error, not a contract error", name, err)
		}
	}
	// Nothing moved, as the direct connection sees.
	if got, err := direct.Load(ctx, key); err != nil || got.Version != 1 || string(got.Cursor) != "c1" {
		t.Fatalf("checkpoint after the outage: %+v (%v), want c1 at version 1", got, err)
	}
	if gs, err := direct.ListGaps(ctx, checkpoint.GapQuery{}); err != nil || len(gs) != 0 {
		t.Fatalf("gaps after the outage: %v (%v), want none", gs, err)
	}
	if c, err := direct.Coverage(ctx, "c"); err != nil || len(c.Ranges()) != 0 {
		t.Fatalf("coverage after the outage: %v (%v), want empty", c, err)
	}

	// Nobody took the stream over meanwhile: the holder carries on, and
	// its next renewal ties the lease to its new session, so that the
	// lease excludes others again until it expires.
	px.setCut(false)
	if _, err := s.Commit(ctx, key, []byte("c2"), cp.Version, l); err != nil {
		t.Fatalf("Commit after the server came back: %v", err)
	}
	if l, err = s.Renew(ctx, l, time.Hour); err != nil {
		t.Fatalf("Renew after the server came back: %v", err)
	}
	if _, err := direct.Acquire(ctx, "s", "b", time.Hour); !errors.Is(err, checkpoint.ErrLeaseHeld) {
		t.Fatalf("Acquire after the holder renewed: %v, want ErrLeaseHeld (its new session lives)", err)
	}
}

// TestLeaseTakenOverWhileHolderCutOff: the server goes away for the
// holder only (its connections are cut, which ends its session), and
// another process, which still reaches the server, takes the stream over
// at once rather than after the hour's TTL. When the holder is back, its
// commits and renewals are fenced.
func TestLeaseTakenOverWhileHolderCutOff(t *testing.T) {
	t.Parallel()
	direct := newStore(t, nil)
	s, px := proxiedStore(t, direct)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
	old, err := s.Acquire(ctx, "s", "cut-off", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Acquire(ctx, "s", "b", time.Hour); !errors.Is(err, checkpoint.ErrLeaseHeld) {
		t.Fatalf("Acquire while the holder is connected: %v, want ErrLeaseHeld", err)
	}
	px.setCut(true)
	l := acquireWithin(t, direct, "s", "b", takeoverWithin)
	if l.Token != old.Token+1 {
		t.Fatalf("takeover token %d, want %d", l.Token, old.Token+1)
	}
	px.setCut(false)
	err = ioRetried(func() error { _, err := s.Commit(ctx, key, []byte("late"), 0, old); return err })
	if !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Commit by the cut-off holder after the takeover: %v, want ErrLeaseLost", err)
	}
	if _, err := s.Renew(ctx, old, time.Hour); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Renew by the cut-off holder after the takeover: %v, want ErrLeaseLost", err)
	}
}

func noWrite(context.Context, pgx.Tx) error { return nil }

// ioRetried calls f until it returns something other than an I/O error
// (the pool hands out the connections the cut broke, one by one, before
// it makes new ones), at most ten times.
func ioRetried(f func() error) error {
	err := f()
	for i := 0; i < 10 && err != nil && strings.Contains(err.Error(), "outcome unknown"); i++ {
		err = f()
	}
	return err
}

// TestSharesSurviveOutage: with the server gone, UpdateShares fails
// cleanly (a pgstore error, f's document not saved), and once it is back
// the document saved before the outage is still there.
func TestSharesSurviveOutage(t *testing.T) {
	t.Parallel()
	direct := newStore(t, nil)
	s, px := proxiedStore(t, direct)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	put := func(doc string) error {
		return s.UpdateShares(ctx, "exchange", func([]byte) ([]byte, error) { return []byte(doc), nil })
	}
	if err := put("before"); err != nil {
		t.Fatal(err)
	}
	px.setCut(true)
	short, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	err := s.UpdateShares(short, "exchange", func([]byte) ([]byte, error) { return []byte("during"), nil })
	if err == nil || !strings.HasPrefix(err.Error(), "pgstore: ") {
		t.Fatalf("UpdateShares with the server gone: %v, want a pgstore error", err)
	}
	px.setCut(false)
	var got []byte
	if err := ioRetried(func() error {
		return direct.UpdateShares(ctx, "exchange", func(doc []byte) ([]byte, error) { got = doc; return doc, nil })
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != "before" {
		t.Fatalf("after the outage the document reads %q, want %q", got, "before")
	}
}

// TestSharedProvidersSurvivePostgresOutage: three providers (processes)
// share a provider with a known limit through the store; the server goes
// away for three seconds mid-run. The provider, which counts every request
// in its windows, refuses none (no over-limit while the shares cannot be
// renewed: each process keeps its share, then half of it, and none is
// granted more than the others leave when the server is back); collection
// goes on during the outage; and once the server is back the shares are
// renewed to about the whole again.
func TestSharedProvidersSurvivePostgresOutage(t *testing.T) {
	t.Parallel()
	direct := newStore(t, nil)
	s, px := proxiedStore(t, direct)
	srv, err := providertest.New(providertest.Config{Limit: providertest.Limit{Count: 60, Window: 2 * time.Second},
		Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	url := hs.URL + "/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=1"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		outage     atomic.Bool
		duringOK   atomic.Int64
		wg         sync.WaitGroup
		procs      []budget.Provider
		limit      = budget.Limit{Count: 60, Per: 2 * time.Second, Burst: 3}
		workerCall = func(p budget.Provider) {
			for ctx.Err() == nil {
				err := p.Do(ctx, nil, get(url))
				if err == nil && outage.Load() {
					duringOK.Add(1)
				}
			}
		}
	)
	wait := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	for range 3 {
		p, err := budget.NewLocal("exchange.example.com", budget.Config{Shares: s, Limits: []budget.Limit{limit}, MaxInFlight: 2})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	// The processes split the limit before the traffic starts, so the
	// start-up does not weigh on the window the outage ends in. (When the
	// server is back, the first process to renew is not granted the
	// shares the others still pace at: their leases ended in the outage,
	// and the document keeps their safe shares for one more lease. It was,
	// and a window counted one request over, until that was fixed.)
	wait(2 * time.Second)
	for _, p := range procs {
		_ = p.Do(ctx, nil, get(url)) // joins the lease before the workers start
	}
	wait(1500 * time.Millisecond)
	for _, p := range procs {
		for range 2 {
			wg.Go(func() { workerCall(p) })
		}
	}
	wait(3 * time.Second)
	px.setCut(true)
	outage.Store(true)
	wait(3 * time.Second)
	outage.Store(false)
	px.setCut(false)
	// A renewal or two after the server is back the shares add up to the
	// whole again; on a loaded machine the pool's reconnection and the
	// renewals may take longer, so this waits up to 10 s for it.
	sum, back := 0.0, time.Now()
	for time.Since(back) < 10*time.Second {
		wait(500 * time.Millisecond)
		sum = 0
		for _, p := range procs {
			sum += p.Snapshot().Share
		}
		if sum >= 0.9 && time.Since(back) >= 2*time.Second {
			break
		}
	}
	took := time.Since(back)
	if sum < 0.9 {
		for i, p := range procs {
			sn := p.Snapshot()
			t.Logf("process %d: share %.3f, store errors %d, leases %+v", i, sn.Share, sn.SaveErrors, sn.Shares)
		}
	}
	cancel()
	wg.Wait()
	st := srv.Stats()
	t.Logf("served %d, refused %d, %d during the outage; shares add up to %.2f %.1f s after it", st.OK, st.Throttled, duringOK.Load(), sum, took.Seconds())
	if st.Throttled != 0 {
		t.Errorf("the provider refused %d requests: the known limit was exceeded", st.Throttled)
	}
	if duringOK.Load() == 0 {
		t.Error("nothing was collected while the server was away; want collection to go on at the safe share")
	}
	if sum < 0.9 || sum > 1+1e-9 {
		t.Errorf("after the outage the shares add up to %.2f; want about the whole again", sum)
	}
}
