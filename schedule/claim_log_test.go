package schedule_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/schedule"
)

// claimDownStore fails every Claim while down is set, like a database
// that stopped answering.
type claimDownStore struct {
	schedule.JobStore
	mu   sync.Mutex
	down bool
}

func (c *claimDownStore) set(v bool) { c.mu.Lock(); c.down = v; c.mu.Unlock() }

func (c *claimDownStore) Claim(ctx context.Context, now time.Time, owner string, ttl time.Duration, limit int, f schedule.ClaimFilter) ([]schedule.Job, error) {
	c.mu.Lock()
	down := c.down
	c.mu.Unlock()
	if down {
		return nil, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	return c.JobStore.Claim(ctx, now, owner, ttl, limit, f)
}

// A scheduler with nothing running logged nothing while its store was
// down (its claims' errors were counted only), though the Logger's doc
// promises a record per store error: three processes of four said nothing
// through a 10 s PostgreSQL restart. The first failed claim of a run of
// them is logged, and so is the first claim that succeeds after them;
// not one a Poll.
func TestAStoreDownIsLoggedOnceWhenClaimsFailAndOnceWhenTheyRecover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &claimDownStore{JobStore: schedule.NewMemoryJobStore()}
		var out bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(&lockedWriter{w: &out, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
		s, err := schedule.New(schedule.Config{Poll: time.Second, Logger: log}, store, idle)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, s)
		time.Sleep(1500 * time.Millisecond)
		store.set(true)
		time.Sleep(10 * time.Second)
		store.set(false)
		time.Sleep(3 * time.Second)
		stop()
		mu.Lock()
		logs := out.String()
		mu.Unlock()
		fails := strings.Count(logs, `level=WARN msg="schedule: claim failed`)
		back := strings.Count(logs, `level=INFO msg="schedule: claims succeed again"`)
		if fails != 1 || back != 1 || !strings.Contains(logs, "connection refused") {
			t.Fatalf("%d claim-failed and %d recovered records over a 10 s outage, want 1 and 1 naming the error; log:\n%s", fails, back, logs)
		}
	})
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A renewal that fails is tried again every Poll/16 until it succeeds or
// the lease is lost, and each failure was a Warn record: 216 records in
// 5 s from one process running three jobs while PostgreSQL restarted.
// The first failure of a run of them is logged; the others are counted.
func TestARenewalFailingAgainAndAgainIsLoggedOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{JobStore: schedule.NewMemoryJobStore()}
		var out bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(&lockedWriter{w: &out, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
		w := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			_ = sleepCtx(ctx, 20*time.Second)
			return schedule.Result{}, nil
		})
		s, err := schedule.New(schedule.Config{Poll: time.Second, LeaseTTL: 9 * time.Second, Logger: log}, store, w)
		if err != nil {
			t.Fatal(err)
		}
		upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "a"})
		stop := start(t, s)
		time.Sleep(2500 * time.Millisecond)
		store.setFailing(true) // the renewal due at 3 s fails until 6 s
		time.Sleep(3500 * time.Millisecond)
		store.setFailing(false)
		time.Sleep(5 * time.Second)
		stop()
		mu.Lock()
		logs := out.String()
		mu.Unlock()
		if n := strings.Count(logs, `msg="schedule: renew failed"`); n != 1 {
			t.Fatalf("%d renew-failed records over 3 s of a store failing, want 1; log:\n%s", n, logs)
		}
		if d := snapshot(t, s).Decisions; d.LeasesLost != 0 || d.StoreErrors < 10 {
			t.Fatalf("decisions %+v: want no lease lost (the store was back before the lease's margin) and every failure counted", d)
		}
	})
}
