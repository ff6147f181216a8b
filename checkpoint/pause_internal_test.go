package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPausesFileBeforeReasons: a pauses.ckpt written before pauses carried
// a reason (and before CheckName refused format characters) still opens:
// its pauses load with the reason "", a name the rule now refuses does not
// make the store refuse to open, and the next save writes the new format.
func TestPausesFileBeforeReasons(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	until := epoch.Add(2 * time.Minute)
	type oldRec struct {
		Provider string    `json:"provider"`
		Until    time.Time `json:"until"`
	}
	old := struct {
		Pauses []oldRec `json:"pauses"`
	}{[]oldRec{{"api.binance.com", until}, {"old\u202ename", until}}}
	data, err := marshal(kindPauses, old)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, pausesFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFileStore(dir, Config{Now: func() time.Time { return epoch }})
	if err != nil {
		t.Fatalf("OpenFileStore on a pauses file of the old format: %v", err)
	}
	ctx := context.Background()
	got, why, err := s.LoadPause(ctx, "api.binance.com")
	if err != nil || !got.Equal(until) || why != "" {
		t.Fatalf("LoadPause = %v, %q, %v; want %v with no reason", got, why, err, until)
	}
	if err := s.SavePause(ctx, "other", until, "banned"); err != nil {
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
	for p, want := range map[string]string{"api.binance.com": "", "other": "banned"} {
		if got, why, err := s.LoadPause(ctx, p); err != nil || !got.Equal(until) || why != want {
			t.Errorf("LoadPause(%q) after reopen = %v, %q, %v; want %v, %q", p, got, why, err, until, want)
		}
	}
}
