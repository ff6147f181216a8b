package durable_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/forage-go/forage/internal/durable"
)

func TestSyncDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := durable.SyncDir(dir); err != nil {
		t.Fatalf("SyncDir(%q) = %v", dir, err)
	}
	if runtime.GOOS != "linux" {
		return // elsewhere SyncDir may be a no-op
	}
	if err := durable.SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncDir of a missing directory = nil, want an error")
	}
}
