package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// pauseStore is budget.PauseStore, which both stores implement (the budget
// tests assert it; checkpoint does not import budget).
type pauseStore interface {
	LoadPause(ctx context.Context, provider string) (time.Time, string, error)
	SavePause(ctx context.Context, provider string, until time.Time, reason string) error
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func openPauses(tb rapid.TB, dir string, now func() time.Time) *checkpoint.FileStore {
	tb.Helper()
	s, err := checkpoint.OpenFileStore(dir, checkpoint.Config{Now: now})
	if err != nil {
		tb.Fatalf("OpenFileStore(%s): %v", dir, err)
	}
	return s
}

// TestPauseSurvivesReopen: a pause saved by one FileStore is loaded by the
// next one opened on the directory, as after a restart: the collector does
// not call a provider that asked for Retry-After: 120 at once.
func TestPauseSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	now := func() time.Time { return epoch }
	s := openPauses(t, dir, now)
	until := epoch.Add(120 * time.Second)
	if err := s.SavePause(ctx, "api.binance.com", until, "banned"); err != nil {
		t.Fatalf("SavePause: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openPauses(t, dir, now)
	defer s.Close()
	got, why, err := s.LoadPause(ctx, "api.binance.com")
	if err != nil || !got.Equal(until) || why != "banned" {
		t.Fatalf("LoadPause after reopen = %v, %q, %v; want %v, banned", got, why, err, until)
	}
	if got, why, err := s.LoadPause(ctx, "other"); err != nil || !got.IsZero() || why != "" {
		t.Fatalf("LoadPause(other) = %v, %q, %v; want zero", got, why, err)
	}
}

// TestPropertyPauseStore: whatever the order of saves and reopens, each
// provider's loaded pause is the latest end saved that was still in the
// future, with the reason saved with it (the last one saved for that end),
// in both stores: a pause is never shortened nor lost, nor its reason.
func TestPropertyPauseStore(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		now := func() time.Time { return epoch }
		dir, err := os.MkdirTemp("", "pauses")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		file := openPauses(rt, dir, now)
		defer func() { file.Close() }()
		mem := checkpoint.NewMemoryStore(checkpoint.Config{Now: now})
		type pause struct {
			until time.Time
			why   string
		}
		model := map[string]pause{}
		providers := []string{"a", "b", "api.example.com", "ünïcode"}
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := range steps {
			if rapid.IntRange(0, 5).Draw(rt, "reopen") == 0 {
				if err := file.Close(); err != nil {
					rt.Fatal(err)
				}
				file = openPauses(rt, dir, now)
				continue
			}
			p := rapid.SampledFrom(providers).Draw(rt, "provider")
			// Minutes, so that equal ends are common.
			until := epoch.Add(time.Duration(rapid.IntRange(-3, 12).Draw(rt, "minutes")) * time.Minute)
			why := rapid.SampledFrom([]string{"", "throttled", "banned"}).Draw(rt, "reason")
			for name, s := range map[string]pauseStore{"file": file, "memory": mem} {
				if err := s.SavePause(ctx, p, until, why); err != nil {
					rt.Fatalf("step %d: %s: SavePause(%q, %v, %q): %v", i, name, p, until, why, err)
				}
			}
			if until.After(epoch) && !until.Before(model[p].until) {
				model[p] = pause{until, why}
			}
			for _, q := range providers {
				for name, s := range map[string]pauseStore{"file": file, "memory": mem} {
					got, gotWhy, err := s.LoadPause(ctx, q)
					if err != nil || !got.Equal(model[q].until) || gotWhy != model[q].why {
						rt.Fatalf("step %d: %s: LoadPause(%q) = %v, %q, %v; want %v, %q", i, name, q, got, gotWhy, err, model[q].until, model[q].why)
					}
				}
			}
		}
	})
}

// TestEndedPausesAreDropped: a save drops the pauses that have ended, so
// the file does not grow with every provider ever paused.
func TestEndedPausesAreDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := epoch
	s := openPauses(t, t.TempDir(), func() time.Time { return clock })
	defer s.Close()
	if err := s.SavePause(ctx, "old", epoch.Add(time.Minute), ""); err != nil {
		t.Fatal(err)
	}
	clock = epoch.Add(2 * time.Minute)
	if err := s.SavePause(ctx, "new", clock.Add(time.Minute), "throttled"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.LoadPause(ctx, "old"); !got.IsZero() {
		t.Fatalf("ended pause of old = %v, want dropped", got)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir(), "pauses.ckpt"))
	if err != nil || strings.Contains(string(data), `"old"`) {
		t.Fatalf("pauses file %q, %v: want it without the ended pause", data, err)
	}
}

// TestCorruptPausesFile: a torn pauses file makes the store refuse to open,
// naming the file, rather than forget every pause.
func TestCorruptPausesFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openPauses(t, dir, func() time.Time { return epoch })
	if err := s.SavePause(context.Background(), "p", epoch.Add(time.Hour), "banned"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, "pauses.ckpt")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "pauses.ckpt") {
		t.Fatalf("OpenFileStore on a torn pauses file = %v, want ErrCorrupt naming it", err)
	}
	// The advice says what moving the file aside costs: the bans and pauses
	// in force are forgotten, and calling a banned provider early extends
	// its ban.
	for _, want := range []string{"move the file out of the directory", "forgets", "ban", "extend", "wait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Following the advice, the store opens again, without the pause.
	if err := os.Rename(path, filepath.Join(t.TempDir(), "aside")); err != nil {
		t.Fatal(err)
	}
	s = openPauses(t, dir, func() time.Time { return epoch })
	defer s.Close()
	if got, _, err := s.LoadPause(context.Background(), "p"); err != nil || !got.IsZero() {
		t.Fatalf("LoadPause after moving the file aside = %v, %v; want none", got, err)
	}
}

// TestPauseArguments: an invalid provider key is ErrInvalid, a closed store
// ErrClosed, a cancelled context its error; none changes anything.
func TestPauseArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openPauses(t, t.TempDir(), nil)
	for _, p := range []string{"", "bad\xff", "new\nline", strings.Repeat("x", 1025)} {
		if err := s.SavePause(ctx, p, time.Now().Add(time.Hour), "banned"); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("SavePause(%.20q) = %v, want ErrInvalid", p, err)
		}
		if _, _, err := s.LoadPause(ctx, p); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("LoadPause(%.20q) = %v, want ErrInvalid", p, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, why := range []string{"bad\nreason", "\u202ebanned", "bad\xff"} {
		if err := s.SavePause(ctx, "p", time.Now().Add(time.Hour), why); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("SavePause with reason %q = %v, want ErrInvalid", why, err)
		}
	}
	if got, _, err := s.LoadPause(ctx, "p"); err != nil || !got.IsZero() {
		t.Errorf("LoadPause after refused saves = %v, %v; want nothing saved", got, err)
	}
	if err := s.SavePause(cctx, "p", time.Now().Add(time.Hour), ""); !errors.Is(err, context.Canceled) {
		t.Errorf("SavePause with a cancelled context = %v", err)
	}
	s.Close()
	if err := s.SavePause(ctx, "p", time.Now().Add(time.Hour), ""); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("SavePause after Close = %v, want ErrClosed", err)
	}
	if _, _, err := s.LoadPause(ctx, "p"); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("LoadPause after Close = %v, want ErrClosed", err)
	}
}
