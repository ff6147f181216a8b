package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
)

// writePauses writes a pauses file as an earlier version did, with the
// reasons given ("" for none; a file written before reasons were kept has
// no reason field at all).
func writePauses(t *testing.T, dir string, until time.Time, reasons map[string]string) {
	t.Helper()
	type oldRec struct {
		Provider string    `json:"provider"`
		Until    time.Time `json:"until"`
		Reason   string    `json:"reason,omitempty"`
	}
	var old struct {
		Pauses []oldRec `json:"pauses"`
	}
	for p, why := range reasons {
		old.Pauses = append(old.Pauses, oldRec{p, until, why})
	}
	data, err := marshal(kindPauses, old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pausesFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPausesFileBeforeReasons: a pauses.ckpt written before pauses carried
// a reason (and before CheckName refused format characters) still opens:
// its pauses load as records with the reason "", a name the rule now
// refuses does not make the store refuse to open, and a save writes the
// new format beside it; after a reopen both load.
func TestPausesFileBeforeReasons(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	until := epoch.Add(2 * time.Minute)
	dir := t.TempDir()
	writePauses(t, dir, until, map[string]string{"api.binance.com": "", "old\u202ename": ""})
	s, err := OpenFileStore(dir, Config{Now: func() time.Time { return epoch }})
	if err != nil {
		t.Fatalf("OpenFileStore on a pauses file of the old format: %v", err)
	}
	ctx := context.Background()
	got, ok, err := s.LoadRecord(ctx, "api.binance.com")
	if err != nil || !ok || !got.PausedUntil.Equal(until) || got.PauseReason != "" {
		t.Fatalf("LoadRecord = %+v, %v, %v; want the pause until %v with no reason", got, ok, err, until)
	}
	if err := s.SaveRecord(ctx, forage.ProviderRecord{Key: "other", PausedUntil: until, PauseReason: forage.ReasonBanned}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenFileStore(dir, Config{Now: func() time.Time { return epoch }})
	if err != nil {
		t.Fatalf("reopening after a save in the new format: %v", err)
	}
	defer s.Close()
	for p, want := range map[string]forage.Reason{"api.binance.com": "", "other": forage.ReasonBanned} {
		if got, ok, err := s.LoadRecord(ctx, p); err != nil || !ok || !got.PausedUntil.Equal(until) || got.PauseReason != want {
			t.Errorf("LoadRecord(%q) after reopen = %+v, %v, %v; want %v, %q", p, got, ok, err, until, want)
		}
	}
}

// TestPausesFileMergesWithRecords: a directory holding both an earlier
// version's pauses file and a provider's own record file loads the
// record with the later of the two pauses; the learned rate and an
// operator's status stay as the record file has them.
func TestPausesFileMergesWithRecords(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		filePause, oldPause time.Time
		wantWhy             forage.Reason
	}{
		"old pause later": {epoch.Add(time.Minute), epoch.Add(5 * time.Minute), forage.ReasonBanned},
		"own pause later": {epoch.Add(9 * time.Minute), epoch.Add(5 * time.Minute), forage.ReasonThrottled},
	} {
		dir := t.TempDir()
		s, err := OpenFileStore(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		r := forage.ProviderRecord{Key: "p", Status: "paused", Why: "audit", Rate: 7, PausedUntil: tc.filePause, PauseReason: forage.ReasonThrottled}
		if err := s.SaveRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
		s.Close()
		writePauses(t, dir, tc.oldPause, map[string]string{"p": "banned"})
		if s, err = OpenFileStore(dir, Config{}); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.LoadRecord(ctx, "p")
		s.Close()
		want := tc.filePause
		if tc.oldPause.After(want) {
			want = tc.oldPause
		}
		if err != nil || !ok || !got.PausedUntil.Equal(want) || got.PauseReason != tc.wantWhy || got.Rate != 7 || got.Status != "paused" || got.Why != "audit" {
			t.Errorf("%s: LoadRecord = %+v, %v, %v; want the pause until %v (%s), rate 7, paused for audit", name, got, ok, err, want, tc.wantWhy)
		}
	}
}

// TestCorruptPausesFile: a torn pauses file (an earlier version's) makes
// the store refuse to open, naming the file and saying what moving it aside
// costs, rather than forget every pause.
func TestCorruptPausesFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePauses(t, dir, time.Now().Add(time.Hour), map[string]string{"p": "banned"})
	path := filepath.Join(dir, pausesFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = OpenFileStore(dir, Config{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), pausesFile) {
		t.Fatalf("OpenFileStore on a torn pauses file = %v, want ErrCorrupt naming it", err)
	}
	for _, want := range []string{"move the file out of the directory", "forgets", "ban", "extend", "wait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := os.Rename(path, filepath.Join(t.TempDir(), "aside")); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFileStore(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok, err := s.LoadRecord(context.Background(), "p"); err != nil || ok {
		t.Fatalf("LoadRecord after moving the file aside = %v, %v; want none", ok, err)
	}
}

// TestAHandMadeCounterAtTheInt64LimitIsCorrupt: a stream file whose
// checksum is right but whose version or lease token is near the int64
// limit was not written by a store: it is corrupt (ErrCorrupt, naming the
// file), not a version that wraps to -2^63 at the next commit (the
// checkpoint was then gone at the next open) nor a token that wraps
// negative (the stream wedged).
func TestAHandMadeCounterAtTheInt64LimitIsCorrupt(t *testing.T) {
	t.Parallel()
	for _, rec := range []streamRec{
		{Stream: "s", Checkpoints: []checkpointRec{{Mode: CatchUp, Cursor: []byte("c"), Version: math.MaxInt64}}},
		{Stream: "s", Checkpoints: []checkpointRec{{Mode: CatchUp, Cursor: []byte("c"), Version: 3}},
			Lease: &leaseRec{Owner: "x", Token: math.MaxInt64, Expires: time.Now().Add(-time.Hour), Released: true}},
	} {
		dir := t.TempDir()
		payload, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, recordFile(streamPre, "s")), frame(kindStream, payload), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFileStore(dir, Config{})
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%+v: OpenFileStore = %v; want ErrCorrupt", rec, err)
		}
	}
}
