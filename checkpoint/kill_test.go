//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package checkpoint_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// killDirEnv tells TestKilledHolderChild where its store is.
const killDirEnv = "CHECKPOINT_KILL_DIR"

// TestKilledHolderChild is the child process of
// TestFileStoreTakesOverAfterSIGKILL: it opens the store, leases the
// stream for an hour, commits, prints its lease and waits to be killed.
// Run alone it skips.
func TestKilledHolderChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestFileStoreTakesOverAfterSIGKILL")
	}
	ctx := context.Background()
	s, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, "killed/stream", "child", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key := checkpoint.Key{Stream: l.Stream, Mode: checkpoint.CatchUp}
	if _, err := s.Commit(ctx, key, []byte("child-1"), 0, l); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("leased %d\n", l.Token)
	time.Sleep(time.Minute) // killed long before
	os.Exit(3)
}

// TestFileStoreTakesOverAfterSIGKILL: a process holding an hour's lease is
// killed with SIGKILL. While it lives, its directory lock keeps the store
// closed to others; once it is dead, a restart opens the store, acquires
// the stream at once with a higher token, and the dead process's lease is
// refused. (Regression: the restart yielded for the rest of the hour.)
//
// Not parallel: a fork shares the open files of the tests running beside
// it (their stores' lock files) with the child until it execs.
func TestFileStoreTakesOverAfterSIGKILL(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestKilledHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var token int64
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "leased "); ok {
			token, _ = strconv.ParseInt(v, 10, 64)
			break
		}
	}
	if token <= 0 {
		_ = cmd.Process.Kill()
		t.Fatalf("the child never leased the stream (%v, %v)", sc.Err(), cmd.Wait())
	}
	if s, err := checkpoint.OpenFileStore(dir, checkpoint.Config{}); !errors.Is(err, checkpoint.ErrLocked) {
		if err == nil {
			_ = s.Close()
		}
		t.Fatalf("OpenFileStore while the holder lives: %v, want ErrLocked", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error is the signal

	ctx := context.Background()
	s := openFile(t, dir, nil)
	l, err := s.Acquire(ctx, "killed/stream", "restart", time.Hour)
	if err != nil {
		t.Fatalf("Acquire right after the holder was killed: %v, want a takeover", err)
	}
	if l.Token <= token {
		t.Fatalf("takeover token %d, want > %d (the killed holder's)", l.Token, token)
	}
	dead := checkpoint.Lease{Stream: "killed/stream", Owner: "child", Token: token}
	key := checkpoint.Key{Stream: dead.Stream, Mode: checkpoint.CatchUp}
	if _, err := s.Commit(ctx, key, []byte("zombie"), 1, dead); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Commit with the killed holder's lease: %v, want ErrLeaseLost", err)
	}
	cp := must[checkpoint.Checkpoint](t, "Commit by the new holder")(s.Commit(ctx, key, []byte("restart-2"), 1, l))
	if cp.Version != 2 {
		t.Fatalf("Commit after the takeover: version %d, want 2 (the child's commit kept)", cp.Version)
	}
}
