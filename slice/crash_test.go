//go:build unix

package slice_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// The crash test: a child process collects a stream into a file (with the
// checkpoint in a file store) and is killed with SIGKILL at random points,
// then restarted; the data on disk must never have a hole below the
// committed cursor, and in the end, deduplicated by key, it holds every
// record exactly once with its content. The child fetches ahead, with some
// pages ending short of their prediction, and makes the pages that landed
// meanwhile durable together (group commit), so kills land with fetches in
// flight, speculative pages being discarded, and batches of several pages
// written but not committed.

const (
	crashDirEnv = "SLICE_CRASH_DIR"
	crashGenEnv = "SLICE_CRASH_GEN"
	crashN      = 4000 // records
	crashPage   = 5    // records per slice
	crashKills  = 24
)

// TestCrashChild is the child process of TestCrashRecovery; run alone it
// skips.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestCrashRecovery")
	}
	gen, _ := strconv.Atoi(os.Getenv(crashGenEnv))
	if err := crashCollect(dir, gen); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
}

// crashCollect runs the stream once to the end. Each generation's store
// clock runs an hour ahead of the previous one, so the lease a killed
// child left behind has expired and is taken over at once.
func crashCollect(dir string, gen int) error {
	clock := func() time.Time { return time.Now().Add(time.Duration(gen) * time.Hour) }
	store, err := checkpoint.OpenFileStore(filepath.Join(dir, "store"), checkpoint.Config{Now: clock})
	if err != nil {
		return err
	}
	defer store.Close()
	sink, err := openFileSink(filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	defer sink.f.Close()
	// The source predicts, so the run fetches ahead (the default
	// Prefetch); a tenth of its pages end short, which discards what was
	// fetched after them. Pages that land while a batch is synced are
	// batched, up to the default MaxBatch or 3.
	src := newAhead(newSource(crashN, crashPage), uint64(gen))
	src.short = 0.1
	r, err := slice.New(slice.Config[rec]{
		Stream: stream, Mode: checkpoint.CatchUp, Store: store, Provider: &fakeProvider{},
		Source: src, Sink: sink, Now: clock, MaxBatch: []int{0, 3}[gen%2],
	})
	if err != nil {
		return err
	}
	fmt.Println("started")
	rep, err := r.Run(context.Background(), nil)
	if err != nil {
		return err
	}
	if rep.Yielded || string(rep.Cursor) != strconv.Itoa(crashN) {
		return fmt.Errorf("run ended at %q (yielded %v), want caught up", rep.Cursor, rep.Yielded)
	}
	fmt.Println("done", rep.Slices, rep.Commits)
	return nil
}

// fileSink appends "key value" lines and fsyncs before returning: durable.
// Replayed records are appended again; the reader deduplicates by key.
type fileSink struct{ f *os.File }

// openFileSink opens the data file for appending, first cutting a torn last
// line (a write the kill interrupted, never confirmed) so that the next
// append starts on a line of its own.
func openFileSink(path string) (*fileSink, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if keep := bytes.LastIndexByte(data, '\n') + 1; keep != len(data) {
		if err := f.Truncate(int64(keep)); err != nil {
			return nil, err
		}
	}
	return &fileSink{f: f}, f.Sync()
}

func (s *fileSink) Write(_ context.Context, p slice.Page[rec]) error {
	var b bytes.Buffer
	for _, r := range p.Records {
		fmt.Fprintf(&b, "%d %s\n", r.Key, r.Val)
	}
	if _, err := s.f.Write(b.Bytes()); err != nil {
		return err
	}
	return s.f.Sync()
}

// readData returns the records on disk by key and how many lines repeated
// a key; it fails on a line that is not a record (but a torn last line) and
// on a key stored with two contents.
func readData(t *testing.T, path string) (map[int]string, int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1] // a torn tail was never confirmed
	got, dups := map[int]string{}, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		k, v, ok := strings.Cut(sc.Text(), " ")
		key, err := strconv.Atoi(k)
		if !ok || err != nil {
			t.Fatalf("data line %d %q is not a record", line, sc.Text())
		}
		if old, seen := got[key]; seen {
			dups++
			if old != v {
				t.Fatalf("key %d stored as %q and %q", key, old, v)
			}
		}
		got[key] = v
	}
	return got, dups
}

// verifyOnDisk checks the invariant after a kill: every record below the
// committed cursor is on disk with its content. It returns the cursor.
func verifyOnDisk(t *testing.T, dir string, kill int) int {
	t.Helper()
	store, err := checkpoint.OpenFileStore(filepath.Join(dir, "store"), checkpoint.Config{})
	if err != nil {
		t.Fatalf("after kill %d: open store: %v", kill, err)
	}
	defer store.Close()
	cp, err := store.Load(context.Background(), catchUp)
	if err != nil {
		t.Fatalf("after kill %d: load: %v", kill, err)
	}
	at := position(cp.Cursor)
	data, _ := readData(t, filepath.Join(dir, "data"))
	for k := range at {
		if data[k] != val(k) {
			t.Fatalf("after kill %d: checkpoint %d but record %d on disk is %q", kill, at, k, data[k])
		}
	}
	return at
}

// startChild starts generation gen of the child and waits until it says it
// has started collecting.
func startChild(t *testing.T, dir string, gen int) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashGenEnv+"="+strconv.Itoa(gen))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "started" {
	}
	return cmd, sc
}

// killed reports whether err says the process died of SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("inside the child")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	gen, progress := 0, []int{}
	for kill := 1; kill <= crashKills; kill++ {
		gen++
		cmd, _ := startChild(t, dir, gen)
		// Real time is unavoidable here: the child is a real process.
		time.Sleep(time.Duration(rng.IntN(8000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatalf("kill %d: %v", kill, err)
		}
		if err := cmd.Wait(); err != nil && !killed(err) {
			t.Fatalf("child %d failed: %v", kill, err)
		}
		progress = append(progress, verifyOnDisk(t, dir, kill))
	}
	t.Logf("cursor after each of %d kills: %v", crashKills, progress)

	gen++
	cmd, sc := startChild(t, dir, gen)
	done, slices, commits := false, 0, 0
	for sc.Scan() {
		if n, _ := fmt.Sscanf(sc.Text(), "done %d %d", &slices, &commits); n == 2 {
			done = true
		}
	}
	if err := cmd.Wait(); err != nil || !done {
		t.Fatalf("final child: %v (done %v)", err, done)
	}
	// The child's fetches take no time and its syncs do: pages land while
	// a batch is synced, so batches form.
	t.Logf("the final child committed %d slices in %d commits", slices, commits)
	if slices >= 20 && commits >= slices {
		t.Fatalf("the final child committed %d slices in %d commits: want batches", slices, commits)
	}
	if at := verifyOnDisk(t, dir, crashKills+1); at != crashN {
		t.Fatalf("final checkpoint %d, want %d", at, crashN)
	}
	data, dups := readData(t, filepath.Join(dir, "data"))
	if len(data) != crashN {
		t.Fatalf("%d distinct keys on disk, want %d", len(data), crashN)
	}
	t.Logf("%d records, %d replayed lines deduplicated", len(data), dups)
}
