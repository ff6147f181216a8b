package checkpointtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

var checkpointTests = []test{
	{"LoadMissingIsVersionZero", func(t *testing.T, e *env) {
		key := catchUp("s")
		diff(t, "Load of a key never committed", checkpoint.Checkpoint{Key: key}, e.load(key))
	}},
	{"CommitThenLoad", func(t *testing.T, e *env) {
		key := steady("s")
		cp := e.commit(key, "page-1", 0, checkpoint.Lease{})
		diff(t, "Load after first commit", cp, e.load(key))
		e.clock.Advance(time.Minute)
		cp = e.commit(key, "page-2", 1, checkpoint.Lease{})
		diff(t, "Load after second commit", cp, e.load(key))
	}},
	{"StaleVersionConflicts", func(t *testing.T, e *env) {
		key := catchUp("s")
		e.commit(key, "a", 0, checkpoint.Lease{})
		last := e.commit(key, "b", 1, checkpoint.Lease{})
		for _, expect := range []int64{0, 1, 3, 100} {
			_, err := e.s.Commit(e.ctx, key, []byte("stale"), expect, checkpoint.Lease{})
			wantErr(t, fmt.Sprintf("Commit with expect %d at version 2", expect), err, checkpoint.ErrConflict)
		}
		diff(t, "Load after lost CAS", last, e.load(key))
	}},
	{"VersionsNeverRegress", func(t *testing.T, e *env) {
		key := catchUp("s")
		var prev int64
		for i := range 20 {
			cp := e.commit(key, fmt.Sprint("c", i), prev, checkpoint.Lease{})
			if got := e.load(key).Version; got != prev+1 || cp.Version != prev+1 {
				t.Fatalf("step %d: version %d (returned %d), want %d", i, got, cp.Version, prev+1)
			}
			prev = cp.Version
			// A replay of the same commit must not move the version back.
			_, err := e.s.Commit(e.ctx, key, []byte("replay"), prev-1, checkpoint.Lease{})
			wantErr(t, fmt.Sprintf("step %d: replayed commit", i), err, checkpoint.ErrConflict)
		}
	}},
	{"ModesAreSeparateBookmarks", func(t *testing.T, e *env) {
		cu, ss := catchUp("s"), steady("s")
		e.commit(cu, "2019-01", 0, checkpoint.Lease{})
		e.commit(cu, "2019-02", 1, checkpoint.Lease{})
		diff(t, "steady-state after catch-up commits", checkpoint.Checkpoint{Key: ss}, e.load(ss))
		s1 := e.commit(ss, "head-1", 0, checkpoint.Lease{})
		c3 := e.commit(cu, "2019-03", 2, checkpoint.Lease{})
		diff(t, "steady-state", s1, e.load(ss))
		diff(t, "catch-up", c3, e.load(cu))
		other := catchUp("other")
		diff(t, "another stream", checkpoint.Checkpoint{Key: other}, e.load(other))
	}},
	{"CursorIsOpaqueAndCopied", func(t *testing.T, e *env) {
		key := catchUp("s")
		cursor := []byte{0, 0xff, 'x', 0}
		cp, err := e.s.Commit(e.ctx, key, cursor, 0, checkpoint.Lease{})
		wantErr(t, "Commit", err, nil)
		cursor[0] = 9 // the caller reuses its buffer
		cp.Cursor[1] = 9
		got := e.load(key)
		diff(t, "cursor after the caller changed its slices", []byte{0, 0xff, 'x', 0}, got.Cursor)
		got.Cursor[2] = 9
		diff(t, "cursor after changing a loaded slice", []byte{0, 0xff, 'x', 0}, e.load(key).Cursor)
		e.commit(key, "", 1, checkpoint.Lease{}) // an empty cursor is a cursor
		if c := e.load(key); len(c.Cursor) != 0 || c.Version != 2 {
			t.Fatalf("after empty commit: cursor %q version %d, want empty, 2", c.Cursor, c.Version)
		}
	}},
	{"ConcurrentCommitsExactlyOneWins", func(t *testing.T, e *env) {
		key := steady("s")
		l := e.acquire("s", "owner", time.Hour)
		const racers, rounds = 16, 5
		for round := range int64(rounds) {
			winners := raceCommits(t, e, key, round, l, racers)
			if len(winners) != 1 {
				t.Fatalf("round %d: %d commits won the same version, want exactly 1: %v", round, len(winners), winners)
			}
			got := e.load(key)
			if got.Version != round+1 || string(got.Cursor) != winners[0] {
				t.Fatalf("round %d: stored %q at version %d, want winner %q at %d",
					round, got.Cursor, got.Version, winners[0], round+1)
			}
		}
	}},
}

// raceCommits has n goroutines commit key at version expect at once and
// returns the cursors that won. Every loser must get ErrConflict.
func raceCommits(t *testing.T, e *env, key checkpoint.Key, expect int64, l checkpoint.Lease, n int) []string {
	t.Helper()
	var (
		mu      sync.Mutex
		winners []string
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			cursor := fmt.Sprintf("r%d-g%d", expect, i)
			<-start
			_, err := e.s.Commit(e.ctx, key, []byte(cursor), expect, l)
			switch {
			case err == nil:
				mu.Lock()
				winners = append(winners, cursor)
				mu.Unlock()
			case !errors.Is(err, checkpoint.ErrConflict):
				errs <- fmt.Errorf("racer %d: %w (want nil or ErrConflict)", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return winners
}
