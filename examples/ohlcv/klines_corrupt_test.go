package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestKlinesDamagedLineIsNeverSkipped: after a run, one stored candle's
// line is damaged (a "," turned into ";"). Export and the next collect
// run fail, exit non-zero, naming the file and the line and saying what
// to do, instead of exporting one line fewer and making no request for
// the candle. Before the fix: exit 0, one line fewer, and "done" with 0
// requests.
func TestKlinesDamagedLineIsNeverSkipped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		since := time.Now().Truncate(time.Minute).Add(-time.Hour)
		args := []string{"-store", dir, "-since", since.Format(time.RFC3339)}
		collectOK(t, args...)
		path := filepath.Join(dir, "BTCUSDT-1m.csv")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		lines[4] = strings.Replace(lines[4], ",", ";", 1)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, r := range []result{cli(context.Background(), "export", "-store", dir), cli(context.Background(), args...)} {
			if r.code == 0 || !strings.Contains(r.stderr, path+" line 5 ") || !strings.Contains(r.stderr, "reset the stream's checkpoint") {
				t.Fatalf("exit %d, stderr %q: want a failure naming %s line 5 and what to do", r.code, r.stderr, path)
			}
		}
	})
}
