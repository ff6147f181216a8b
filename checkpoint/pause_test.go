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
	LoadPause(ctx context.Context, provider string) (time.Time, error)
	SavePause(ctx context.Context, provider string, until time.Time) error
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
	if err := s.SavePause(ctx, "api.binance.com", until); err != nil {
		t.Fatalf("SavePause: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openPauses(t, dir, now)
	defer s.Close()
	got, err := s.LoadPause(ctx, "api.binance.com")
	if err != nil || !got.Equal(until) {
		t.Fatalf("LoadPause after reopen = %v, %v; want %v", got, err, until)
	}
	if got, err := s.LoadPause(ctx, "other"); err != nil || !got.IsZero() {
		t.Fatalf("LoadPause(other) = %v, %v; want zero", got, err)
	}
}

// TestPropertyPauseStore: whatever the order of saves and reopens, each
// provider's loaded pause is the latest end saved that was still in the
// future, in both stores: a pause is never shortened nor lost.
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
		model := map[string]time.Time{}
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
			until := epoch.Add(time.Duration(rapid.IntRange(-3600, 3*3600).Draw(rt, "offset")) * time.Second)
			for name, s := range map[string]pauseStore{"file": file, "memory": mem} {
				if err := s.SavePause(ctx, p, until); err != nil {
					rt.Fatalf("step %d: %s: SavePause(%q, %v): %v", i, name, p, until, err)
				}
			}
			if until.After(epoch) && until.After(model[p]) {
				model[p] = until
			}
			for _, q := range providers {
				for name, s := range map[string]pauseStore{"file": file, "memory": mem} {
					got, err := s.LoadPause(ctx, q)
					if err != nil || !got.Equal(model[q]) {
						rt.Fatalf("step %d: %s: LoadPause(%q) = %v, %v; want %v", i, name, q, got, err, model[q])
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
	if err := s.SavePause(ctx, "old", epoch.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	clock = epoch.Add(2 * time.Minute)
	if err := s.SavePause(ctx, "new", clock.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadPause(ctx, "old"); !got.IsZero() {
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
	if err := s.SavePause(context.Background(), "p", epoch.Add(time.Hour)); err != nil {
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
	if got, err := s.LoadPause(context.Background(), "p"); err != nil || !got.IsZero() {
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
		if err := s.SavePause(ctx, p, time.Now().Add(time.Hour)); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("SavePause(%.20q) = %v, want ErrInvalid", p, err)
		}
		if _, err := s.LoadPause(ctx, p); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("LoadPause(%.20q) = %v, want ErrInvalid", p, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.SavePause(cctx, "p", time.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Errorf("SavePause with a cancelled context = %v", err)
	}
	s.Close()
	if err := s.SavePause(ctx, "p", time.Now().Add(time.Hour)); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("SavePause after Close = %v, want ErrClosed", err)
	}
	if _, err := s.LoadPause(ctx, "p"); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("LoadPause after Close = %v, want ErrClosed", err)
	}
}
