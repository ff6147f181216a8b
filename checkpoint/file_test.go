package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/checkpoint/checkpointtest"
	"pgregory.net/rapid"
)

func TestFileStore(t *testing.T) {
	t.Parallel()
	checkpointtest.Run(t, func(t *testing.T, now func() time.Time) checkpoint.Store {
		return openFile(t, suiteDir(t), now)
	})
}

// suiteDir returns a fresh directory for one store of the suite. It prefers
// tmpfs (/dev/shm), where fsync is free: the suite checks the contract, not
// durability, and its thousands of fsyncs take tens of seconds on a busy
// disk. Durability is what the reopen tests below check, on a real disk.
func suiteDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "checkpoint-test-*"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// openFile opens a file store in dir and closes it when the test ends.
func openFile(t testing.TB, dir string, now func() time.Time) *checkpoint.LocalStore {
	t.Helper()
	s, err := checkpoint.OpenFileStore(dir, checkpoint.Config{Now: now})
	if err != nil {
		t.Fatalf("OpenFileStore(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func must[T any](t testing.TB, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// populate writes one of every kind of record and returns what it wrote.
func populate(t testing.TB, s checkpoint.Store) (checkpoint.Checkpoint, checkpoint.Lease, checkpoint.Gap) {
	t.Helper()
	ctx := context.Background()
	key := checkpoint.Key{Stream: "binance/BTC-USDT/1h", Mode: checkpoint.CatchUp}
	l := must[checkpoint.Lease](t, "Acquire")(s.Acquire(ctx, key.Stream, "w1", time.Minute))
	cp := must[checkpoint.Checkpoint](t, "Commit")(s.Commit(ctx, key, []byte{0, 1, 0xfe}, 0, l))
	g1 := must[checkpoint.Gap](t, "AddGap")(s.AddGap(ctx, checkpoint.Gap{Key: key, Cursor: []byte("c"), Reason: "deadline",
		Range: checkpoint.Range{Start: t0, End: t0.Add(time.Hour)}}))
	g2 := must[checkpoint.Gap](t, "AddGap")(s.AddGap(ctx, checkpoint.Gap{Key: key, Reason: "throttled"}))
	if err := s.ResolveGap(ctx, g2.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCoverage(ctx, "BTC-USDT/1h", checkpoint.Range{Start: t0, End: t0.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return cp, l, g1
}

func TestFileStoreReopenKeepsEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	now := func() time.Time { return t0 }
	s := openFile(t, dir, now)
	cp, l, g := populate(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openFile(t, dir, now)
	got := must[checkpoint.Checkpoint](t, "Load")(s.Load(ctx, cp.Key))
	if got.Version != cp.Version || !bytes.Equal(got.Cursor, cp.Cursor) || !got.UpdatedAt.Equal(cp.UpdatedAt) {
		t.Errorf("Load after reopen: %+v, want %+v", got, cp)
	}
	// The lease survives as the stream's last grant (the holder may still
	// commit), but it no longer excludes: its holder closed the store.
	if _, err := s.Commit(ctx, cp.Key, []byte("next"), cp.Version, l); err != nil {
		t.Errorf("Commit by the holder after reopen: %v", err)
	}
	l2 := must[checkpoint.Lease](t, "Acquire after reopen")(s.Acquire(ctx, l.Stream, "w2", time.Minute))
	if l2.Token <= l.Token {
		t.Errorf("token after reopen %d, want > %d: tokens must never be reused", l2.Token, l.Token)
	}
	gaps := must[[]checkpoint.Gap](t, "ListGaps")(s.ListGaps(ctx, checkpoint.GapQuery{}))
	if len(gaps) != 1 || gaps[0].ID != g.ID || gaps[0].Reason != g.Reason || gaps[0].Range != g.Range {
		t.Errorf("gaps after reopen: %+v, want only %+v", gaps, g)
	}
	if err := s.ResolveGap(ctx, g.ID+1); err != nil {
		t.Errorf("resolving the already resolved gap after reopen: %v, want nil", err)
	}
	g3 := must[checkpoint.Gap](t, "AddGap")(s.AddGap(ctx, checkpoint.Gap{Key: cp.Key, Reason: "banned"}))
	if g3.ID <= g.ID+1 {
		t.Errorf("gap ID after reopen %d, want > %d: IDs must never be reused", g3.ID, g.ID+1)
	}
	cov := must[checkpoint.Coverage](t, "Coverage")(s.Coverage(ctx, "BTC-USDT/1h"))
	if want := (checkpoint.Range{Start: t0, End: t0.Add(2 * time.Hour)}); !cov.Covers(want) || len(cov.Ranges()) != 1 {
		t.Errorf("coverage after reopen: %v, want {%v}", cov, want)
	}
}

// ckptFiles returns the paths of the store's record files, sorted.
func ckptFiles(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.ckpt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no record files in %s (%v)", dir, err)
	}
	slices.Sort(files)
	return files
}

// wantCorrupt opens dir and fails unless that reports ErrCorrupt naming file.
func wantCorrupt(t rapid.TB, dir, file, damage string) {
	t.Helper()
	s, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if err == nil {
		_ = s.Close()
		t.Fatalf("%s %s: OpenFileStore succeeded, want ErrCorrupt", damage, filepath.Base(file))
	}
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), file) {
		t.Fatalf("%s %s: got %v, want ErrCorrupt naming the file", damage, filepath.Base(file), err)
	}
	if !strings.Contains(err.Error(), "to recover") {
		t.Fatalf("%s %s: got %v, want recovery advice", damage, filepath.Base(file), err)
	}
}

// damaged populates a store in a fresh directory, closes it, and returns
// the directory and its record files.
func damaged(t testing.TB, dir string) []string {
	t.Helper()
	s := openFile(t, dir, func() time.Time { return t0 })
	populate(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return ckptFiles(t, dir)
}

func TestFileStoreDetectsTruncation(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	files := damaged(t, src)
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		name := filepath.Base(rapid.SampledFrom(files).Draw(rt, "file"))
		data := copyRecords(t, src, dir)[name]
		n := rapid.IntRange(0, len(data)-1).Draw(rt, "length")
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, data[:n], 0o600); err != nil {
			rt.Fatal(err)
		}
		wantCorrupt(rt, dir, file, fmt.Sprintf("truncated to %d of %d bytes:", n, len(data)))
	})
}

func TestFileStoreDetectsFlippedBits(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	files := damaged(t, src)
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		name := filepath.Base(rapid.SampledFrom(files).Draw(rt, "file"))
		data := copyRecords(t, src, dir)[name]
		at := rapid.IntRange(0, len(data)-1).Draw(rt, "byte")
		bit := rapid.IntRange(0, 7).Draw(rt, "bit")
		data[at] ^= 1 << bit
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			rt.Fatal(err)
		}
		wantCorrupt(rt, dir, file, fmt.Sprintf("bit %d of byte %d flipped:", bit, at))
	})
}

// copyRecords copies every record file of src into dst and returns their
// contents by base name.
func copyRecords(t testing.TB, src, dst string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range ckptFiles(t, src) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = data
	}
	return out
}

func TestFileStoreDetectsForeignAndMisplacedFiles(t *testing.T) {
	t.Parallel()
	// Each case damages the directory and returns the file Open must name.
	cases := map[string]func(dir string, files map[string][]byte) (string, error){
		"empty file": func(dir string, files map[string][]byte) (string, error) {
			f := filepath.Join(dir, "gaps.ckpt")
			return f, os.WriteFile(f, nil, 0o600)
		},
		"appended byte": func(dir string, files map[string][]byte) (string, error) {
			f := filepath.Join(dir, "gaps.ckpt")
			return f, os.WriteFile(f, append(files["gaps.ckpt"], '\n'), 0o600)
		},
		"unknown record file": func(dir string, files map[string][]byte) (string, error) {
			f := filepath.Join(dir, "notes.ckpt")
			return f, os.WriteFile(f, []byte("hello"), 0o600)
		},
		"stream file under another name": func(dir string, files map[string][]byte) (string, error) {
			f := filepath.Join(dir, "stream-00000000000000000000000000000000.ckpt")
			return f, os.WriteFile(f, files[fileWith(files, "stream-")], 0o600)
		},
		"coverage file posing as a stream": func(dir string, files map[string][]byte) (string, error) {
			f := filepath.Join(dir, fileWith(files, "stream-"))
			return f, os.WriteFile(f, files[fileWith(files, "coverage-")], 0o600)
		},
	}
	src := t.TempDir()
	damaged(t, src)
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file, err := damage(dir, copyRecords(t, src, dir))
			if err != nil {
				t.Fatal(err)
			}
			wantCorrupt(t, dir, file, name+":")
		})
	}
}

// fileWith returns the name in files that starts with prefix.
func fileWith(files map[string][]byte, prefix string) string {
	for name := range files {
		if strings.HasPrefix(name, prefix) {
			return name
		}
	}
	panic("no file starts with " + prefix)
}

func TestFileStoreRemovesLeftoverTempFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	damaged(t, dir)
	tmp := filepath.Join(dir, ".tmp-123456")
	if err := os.WriteFile(tmp, []byte("half a record"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openFile(t, dir, nil)
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover temp file after Open: %v, want it removed", err)
	}
	if cps, err := s.ListGaps(context.Background(), checkpoint.GapQuery{}); err != nil || len(cps) != 1 {
		t.Fatalf("ListGaps after Open: %v %v, want the one open gap", cps, err)
	}
}

func TestFileStoreIgnoresOtherFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("operator notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	openFile(t, dir, nil)
}

func TestFileStoreLocksItsDirectory(t *testing.T) {
	t.Parallel()
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "netbsd", "openbsd", "dragonfly":
	default:
		t.Skip("no flock on " + runtime.GOOS)
	}
	dir := t.TempDir()
	s := openFile(t, dir, nil)
	if _, err := checkpoint.OpenFileStore(dir, checkpoint.Config{}); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("second OpenFileStore: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	openFile(t, dir, nil)
}

// TestLocalStoreClosed: a store closes alike in memory and on files:
// every later call fails with ErrClosed, and closing again is a no-op.
func TestLocalStoreClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files, err := checkpoint.OpenFileStore(t.TempDir(), checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for mode, s := range map[string]*checkpoint.LocalStore{"memory": checkpoint.NewMemoryStore(checkpoint.Config{}), "files": files} {
		for i := range 2 {
			if err := s.Close(); err != nil {
				t.Fatalf("%s: Close %d: %v", mode, i, err)
			}
		}
		key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
		if _, err := s.Load(ctx, key); !errors.Is(err, checkpoint.ErrClosed) {
			t.Errorf("%s: Load after Close: %v, want ErrClosed", mode, err)
		}
		if _, err := s.Commit(ctx, key, nil, 0, checkpoint.Lease{}); !errors.Is(err, checkpoint.ErrClosed) {
			t.Errorf("%s: Commit after Close: %v, want ErrClosed", mode, err)
		}
		if _, _, err := s.LoadRecord(ctx, "p"); !errors.Is(err, checkpoint.ErrClosed) {
			t.Errorf("%s: LoadRecord after Close: %v, want ErrClosed", mode, err)
		}
	}
	if _, err := checkpoint.OpenFileStore("", checkpoint.Config{}); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("OpenFileStore(\"\"): %v, want ErrInvalid", err)
	}
}

// A write that fails before the rename must leave memory as it was: the
// store never reports state that is not on disk.
func TestFileStoreFailedWriteChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := openFile(t, dir, func() time.Time { return t0 })
	cp, l, _ := populate(t, s)
	if err := os.RemoveAll(dir); err != nil { // every later write fails
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, cp.Key, []byte("lost"), cp.Version, l); err == nil {
		t.Fatal("Commit into a removed directory succeeded")
	}
	if got, err := s.Load(ctx, cp.Key); err != nil || got.Version != cp.Version || !bytes.Equal(got.Cursor, cp.Cursor) {
		t.Errorf("Load after a failed Commit: %+v %v, want %+v", got, err, cp)
	}
	if _, err := s.Acquire(ctx, "other", "w", time.Minute); err == nil {
		t.Fatal("Acquire into a removed directory succeeded")
	}
	if _, err := s.Acquire(ctx, "other", "w", time.Minute); errors.Is(err, checkpoint.ErrLeaseHeld) {
		t.Error("a failed Acquire left a lease behind")
	}
	if _, err := s.AddGap(ctx, checkpoint.Gap{Key: cp.Key, Reason: "deadline"}); err == nil {
		t.Fatal("AddGap into a removed directory succeeded")
	}
	if gs, _ := s.ListGaps(ctx, checkpoint.GapQuery{}); len(gs) != 1 {
		t.Errorf("gaps after a failed AddGap: %d, want 1", len(gs))
	}
}

// TestFileStoreWritesNothingToADirectoryMadeAgain: a store's directory
// moved away and made again while the store is open (a backup restored,
// an "rm -rf" to start over) is locked by a second store; the first then
// writes nothing (ErrLocked), so the second's checkpoint never goes back
// and a lease token is never handed out twice. Both wrote to it: after a
// reopen the checkpoint was the first store's older one, and token 1 was
// given twice.
func TestFileStoreWritesNothingToADirectoryMadeAgain(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	ctx := context.Background()
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
	a, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	la, err := a.Acquire(ctx, "s", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, key, []byte("A1"), 0, la); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lb, err := b.Acquire(ctx, "s", "B", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := b.Commit(ctx, key, []byte("B1"), 0, lb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, key, []byte("A2"), 1, la); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("the first store committed into the directory made again: %v; want ErrLocked", err)
	}
	if _, err := a.Acquire(ctx, "t", "A", time.Hour); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("the first store granted a lease in the directory made again: %v; want ErrLocked", err)
	}
	if got, err := b.Load(ctx, key); err != nil || got.Version != cp.Version || string(got.Cursor) != "B1" {
		t.Fatalf("the second store's checkpoint: %+v, %v; want %q at version %d", got, err, "B1", cp.Version)
	}
}
