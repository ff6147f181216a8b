package durable_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

func TestAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := durable.Append(f, []byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if err := durable.Append(f, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := durable.Append(f, []byte("b\n")); err == nil || strings.Count(err.Error(), path) != 1 {
		// Once: the file's own error names it already ("write f: write f:
		// file too large" on a disk that filled up).
		t.Fatalf("Append to a closed file = %v; want an error naming it once", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "a\n" {
		t.Fatalf("file = %q; want %q", got, "a\n")
	}
}
