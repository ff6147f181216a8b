package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// Both stores keep provider records for the budget package.
var (
	_ budget.RecordStore = (*checkpoint.LocalStore)(nil)
	_ budget.RecordStore = (*checkpoint.LocalStore)(nil)
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestRecordStore runs the RecordStore contract against both modes of the
// store.
func TestRecordStore(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		budgettest.RunRecordStore(t, func(*testing.T) budget.RecordStore {
			return checkpoint.NewMemoryStore(checkpoint.Config{})
		})
	})
	t.Run("File", func(t *testing.T) {
		t.Parallel()
		budgettest.RunRecordStore(t, func(t *testing.T) budget.RecordStore {
			s := openRecords(t, suiteDir(t))
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
}

func openRecords(tb rapid.TB, dir string) *checkpoint.LocalStore {
	tb.Helper()
	s, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if err != nil {
		tb.Fatalf("OpenFileStore(%s): %v", dir, err)
	}
	return s
}

// TestRecordSurvivesReopen: a record saved by one file store is loaded by
// the next one opened on the directory, as after a restart: the learned
// rate, and a pause (Retry-After: 120, a ban) with its reason.
func TestRecordSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openRecords(t, dir)
	want := forage.ProviderRecord{Key: "api.binance.com", Rate: 18.5, Ceiling: 20, Confirmed: true,
		PausedUntil: epoch.Add(120 * time.Second), PauseReason: forage.ReasonBanned, Requests: 10, OK: 9, Throttled: 1, Updated: epoch}
	if err := s.SaveRecord(ctx, want); err != nil {
		t.Fatalf("SaveRecord: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openRecords(t, dir)
	defer s.Close()
	got, ok, err := s.LoadRecord(ctx, "api.binance.com")
	if err != nil || !ok || got.Rate != want.Rate || got.Ceiling != want.Ceiling || !got.Confirmed ||
		!got.PausedUntil.Equal(want.PausedUntil) || got.PauseReason != want.PauseReason || got.Requests != 10 || !got.Updated.Equal(epoch) {
		t.Fatalf("LoadRecord after reopen = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if got, ok, err := s.LoadRecord(ctx, "other"); err != nil || ok || !got.PausedUntil.IsZero() {
		t.Fatalf("LoadRecord(other) = %+v, %v, %v; want none", got, ok, err)
	}
}

// TestPropertyRecordsSurviveReopen: whatever the order of saves and
// reopens, a file store holds what a memory store holds: a reopen loses
// nothing, neither a pause (never shortened) nor its reason, nor what an
// operator set.
func TestPropertyRecordsSurviveReopen(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		dir, err := os.MkdirTemp(shmOrTemp(t), "records-*")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		file := openRecords(rt, dir)
		defer func() { file.Close() }()
		mem := checkpoint.NewMemoryStore(checkpoint.Config{})
		keys := []string{"a", "b", "api.example.com", "ünïcode"}
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := range steps {
			if rapid.IntRange(0, 5).Draw(rt, "reopen") == 0 {
				if err := file.Close(); err != nil {
					rt.Fatal(err)
				}
				file = openRecords(rt, dir)
				continue
			}
			r := forage.ProviderRecord{
				Key:         rapid.SampledFrom(keys).Draw(rt, "key"),
				Status:      rapid.SampledFrom([]string{"", "active", "paused"}).Draw(rt, "status"),
				Why:         rapid.SampledFrom([]string{"", "maintenance"}).Draw(rt, "why"),
				Rate:        rapid.Float64Range(0, 100).Draw(rt, "rate"),
				PausedUntil: epoch.Add(time.Duration(rapid.IntRange(-3, 12).Draw(rt, "minutes")) * time.Minute),
				PauseReason: forage.Reason(rapid.SampledFrom([]string{"", "throttled", "banned"}).Draw(rt, "reason")),
				Requests:    rapid.Int64Range(0, 1000).Draw(rt, "requests"),
			}
			for name, s := range map[string]budget.RecordStore{"file": file, "memory": mem} {
				if err := s.SaveRecord(ctx, r); err != nil {
					rt.Fatalf("step %d: %s: SaveRecord(%+v): %v", i, name, r, err)
				}
			}
			for _, k := range keys {
				want, wok, werr := mem.LoadRecord(ctx, k)
				got, gok, gerr := file.LoadRecord(ctx, k)
				if werr != nil || gerr != nil || wok != gok || !sameRecord(got, want) {
					rt.Fatalf("step %d: LoadRecord(%q): file %+v, %v, %v; memory %+v, %v, %v", i, k, got, gok, gerr, want, wok, werr)
				}
			}
		}
	})
}

// sameRecord reports whether a and b hold the same record.
func sameRecord(a, b forage.ProviderRecord) bool {
	if !a.PausedUntil.Equal(b.PausedUntil) || !a.Updated.Equal(b.Updated) {
		return false
	}
	if !slices.EqualFunc(a.Refusals, b.Refusals, time.Time.Equal) {
		return false
	}
	a.PausedUntil, a.Updated, a.Refusals, b.Refusals = b.PausedUntil, b.Updated, nil, nil
	return reflect.DeepEqual(a, b)
}

// TestOneFilePerProvider: however many saves, the directory holds one
// record file per provider, rewritten in place, so it does not grow with
// every save (the pauses file it replaces dropped ended pauses for the
// same reason).
func TestOneFilePerProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openRecords(t, dir)
	defer s.Close()
	for i := range 20 {
		for _, k := range []string{"old", "new"} {
			r := forage.ProviderRecord{Key: k, Rate: float64(i), Requests: int64(i), PausedUntil: epoch.Add(time.Duration(i) * time.Minute)}
			if err := s.SaveRecord(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "provider-*.ckpt"))
	if err != nil || len(files) != 2 {
		t.Fatalf("provider files %v, %v; want one per provider (2)", files, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 { // with the lock file
		t.Fatalf("directory holds %d entries, want the 2 record files and the lock", len(entries))
	}
}

// TestCorruptRecordFile: a torn record file makes the store refuse to open,
// naming the file and saying what moving it aside costs, rather than forget
// the provider's ban and learned rate.
func TestCorruptRecordFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openRecords(t, dir)
	if err := s.SaveRecord(context.Background(), forage.ProviderRecord{Key: "p", Rate: 3, PausedUntil: epoch.Add(time.Hour), PauseReason: forage.ReasonBanned}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "provider-*.ckpt"))
	if len(files) != 1 {
		t.Fatalf("provider files %v, want 1", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files[0], data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(files[0])) {
		t.Fatalf("OpenFileStore on a torn record file = %v, want ErrCorrupt naming it", err)
	}
	for _, want := range []string{"move the file out of the directory", "forgets", "ban", "extend", "wait", "conservative rate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := os.Rename(files[0], filepath.Join(t.TempDir(), "aside")); err != nil {
		t.Fatal(err)
	}
	s = openRecords(t, dir)
	defer s.Close()
	if _, ok, err := s.LoadRecord(context.Background(), "p"); err != nil || ok {
		t.Fatalf("LoadRecord after moving the file aside = %v, %v; want none", ok, err)
	}
}

// TestRecordArguments: an invalid key or name is ErrInvalid, a closed
// store ErrClosed, a cancelled context its error; none changes anything.
func TestRecordArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openRecords(t, t.TempDir())
	for _, p := range []string{"", "bad\xff", "new\nline", strings.Repeat("x", 1025)} {
		if err := s.SaveRecord(ctx, forage.ProviderRecord{Key: p, PausedUntil: time.Now().Add(time.Hour)}); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("SaveRecord(%.20q) = %v, want ErrInvalid", p, err)
		}
		if _, _, err := s.LoadRecord(ctx, p); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("LoadRecord(%.20q) = %v, want ErrInvalid", p, err)
		}
	}
	for _, why := range []string{"bad\nreason", "\u202ebanned", "bad\xff"} {
		r := forage.ProviderRecord{Key: "p", PausedUntil: time.Now().Add(time.Hour), PauseReason: forage.Reason(why)}
		if err := s.SaveRecord(ctx, r); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("SaveRecord with reason %q = %v, want ErrInvalid", why, err)
		}
	}
	if err := s.SaveRecord(ctx, forage.ProviderRecord{Key: "p", Rate: -1}); !errors.Is(err, checkpoint.ErrInvalid) || !strings.Contains(err.Error(), "Rate") {
		t.Errorf("SaveRecord with Rate -1 = %v, want ErrInvalid naming Rate", err)
	}
	if _, ok, err := s.LoadRecord(ctx, "p"); err != nil || ok {
		t.Errorf("LoadRecord after refused saves = %v, %v; want nothing saved", ok, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.SaveRecord(cctx, forage.ProviderRecord{Key: "p"}); !errors.Is(err, context.Canceled) {
		t.Errorf("SaveRecord with a cancelled context = %v", err)
	}
	s.Close()
	if err := s.SaveRecord(ctx, forage.ProviderRecord{Key: "p"}); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("SaveRecord after Close = %v, want ErrClosed", err)
	}
	if _, _, err := s.LoadRecord(ctx, "p"); !errors.Is(err, checkpoint.ErrClosed) {
		t.Errorf("LoadRecord after Close = %v, want ErrClosed", err)
	}
}
