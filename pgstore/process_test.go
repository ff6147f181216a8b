package pgstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The child processes of the multi-process tests are this test binary run
// again with -test.run=^TestHelperProcess$; these environment variables
// tell them what to do (the DSN comes in FORAGE_PG_DSN as usual).
const (
	helperVar = "FORAGE_PGSTORE_HELPER" // the child's role: "pace", "crash", "claim" or "lease"
	schemaVar = "FORAGE_PGSTORE_SCHEMA"
	keyVar    = "FORAGE_PGSTORE_KEY" // the pacer key, or the stream
	argsVar   = "FORAGE_PGSTORE_ARGS"
)

// TestHelperProcess is not a test: it is the body of the child processes
// that TestPacerManyProcesses, TestCommitWithSurvivesKill and
// TestJobClaimSurvivesKill start. Run without helperVar, it does nothing.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperVar)
	if role == "" {
		return
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv(dsnVar))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Config{Schema: os.Getenv(schemaVar)})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Fields(os.Getenv(argsVar))
	switch role {
	case "pace":
		paceChild(t, s, os.Getenv(keyVar), args)
	case "crash":
		crashChild(t, s, os.Getenv(keyVar), args)
	case "claim":
		claimChild(t, s, os.Getenv(keyVar), args)
	case "lease":
		leaseChild(t, s, os.Getenv(keyVar))
	default:
		t.Fatalf("unknown helper role %q", role)
	}
}

// startChild starts this test binary as a helper process with role and
// args; its stdout is returned for reading.
func startChild(t *testing.T, role, schema, key string, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), helperVar+"="+role, schemaVar+"="+schema, keyVar+"="+key,
		argsVar+"="+strings.Join(args, " "))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a %s child: %v", role, err)
	}
	return cmd, out
}

// The pacing run of TestPacerManyProcesses.
const (
	paceProcs   = 4
	paceWorkers = 4  // goroutines per process, each calling WaitN back to back
	paceRate    = 50 // per second
	paceBurst   = 3
	paceFor     = 10 * time.Second
)

// TestPacerManyProcesses: four OS processes, each with four goroutines
// calling WaitN back to back, share one provider's pacer at 50/s, burst 3,
// for ten seconds. Every admission is logged at the database time its slot
// conforms at (the database's clock_timestamp() at booking plus the wait
// it returned); on that one clock no window [t, t+T] ever holds more than
// Burst + ⌊T/I⌋ admissions, and together the processes use at least 95% of
// the rate.
func TestPacerManyProcesses(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	var dbNow int64
	if err := s.Pool().QueryRow(ctx, `SELECT "`+s.Schema()+`".clock_ns()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	// All start at one database time, after a start-up allowance: a pause
	// holds the pacer until then, so the children's first WaitN wait.
	start := dbNow + int64(1500*time.Millisecond)
	end := start + int64(paceFor)
	p := newPacer(t, s, pgstore.PacerConfig{Rate: paceRate, Burst: paceBurst})
	if err := p.PauseUntilAt(ctx, time.Unix(0, start)); err != nil {
		t.Fatal(err)
	}
	key := p.Key()
	type child struct {
		cmd   *exec.Cmd
		slots []int64
		err   error
	}
	children := make([]*child, paceProcs)
	var wg sync.WaitGroup
	for i := range children {
		cmd, out := startChild(t, "pace", s.Schema(), key, strconv.FormatInt(end, 10))
		c := &child{cmd: cmd}
		children[i] = c
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "slot "); ok {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						c.err = err
						return
					}
					c.slots = append(c.slots, n)
				}
			}
			c.err = errors.Join(sc.Err(), cmd.Wait())
		})
	}
	wg.Wait()
	var all []int64
	for i, c := range children {
		if c.err != nil || len(c.slots) == 0 {
			t.Fatalf("child %d: %d admissions, %v", i, len(c.slots), c.err)
		}
		all = append(all, c.slots...)
	}
	slices.Sort(all)

	iv := int64(time.Second / paceRate)
	for i := range all { // every window from one admission to a later one
		for j := i + 1; j < len(all); j++ {
			if n, bound := int64(j-i+1), paceBurst+(all[j]-all[i])/iv; n > bound {
				t.Fatalf("%d admissions in the %v from %d to %d (admissions %d to %d of %d): the GCRA bound is %d",
					n, time.Duration(all[j]-all[i]), all[i], all[j], i, j, len(all), bound)
			}
		}
	}
	admitted := 0
	for _, at := range all {
		if at >= start && at < end {
			admitted++
		}
	}
	want := int(0.95 * paceRate * paceFor.Seconds())
	t.Logf("%d processes × %d goroutines: %d admissions in the %v run (%.1f%% of %d/s), %d in all",
		paceProcs, paceWorkers, admitted, paceFor, 100*float64(admitted)/(paceRate*paceFor.Seconds()), paceRate, len(all))
	if admitted < want {
		t.Fatalf("%d admissions in %v at %d/s, want at least %d (95%%)", admitted, paceFor, paceRate, want)
	}
}

// paceChild runs paceWorkers goroutines that call WaitN back to back until
// the slots reach args[0], and prints every slot.
func paceChild(t *testing.T, s *pgstore.Store, key string, args []string) {
	ctx := context.Background()
	end, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.NewPacer(key, pgstore.PacerConfig{Rate: paceRate, Burst: paceBurst})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		slots []int64
	)
	pgstore.OnAdmit(p, func(slot int64) { mu.Lock(); slots = append(slots, slot); mu.Unlock() })
	var wg sync.WaitGroup
	for range paceWorkers {
		wg.Go(func() {
			for {
				if err := p.WaitN(ctx, 1); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				last := slots[len(slots)-1]
				mu.Unlock()
				if last >= end {
					return
				}
			}
		})
	}
	wg.Wait()
	w := bufio.NewWriter(os.Stdout)
	for _, at := range slots {
		fmt.Fprintln(w, "slot", at)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// The crash run of TestCommitWithSurvivesKill.
const (
	crashRounds  = 12
	crashRecords = 20 // records per slice
)

// TestCommitWithSurvivesKill: a child process writes slices of records and
// commits the checkpoint after each in the same transaction (CommitWith),
// and is killed (SIGKILL) mid-run, twelve times over: half the time
// deliberately after a slice's records are written and before the commit,
// half the time after a random number of commits, wherever it then is.
// After every kill, in one snapshot, the checkpoint's version is v and the
// records are exactly those of slices 1..v, each complete: the records and
// the checkpoint advanced together or not at all. The next child resumes
// from the checkpoint.
func TestCommitWithSurvivesKill(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	table := recordsTable(t, s)
	stream := "crash"
	killed := map[string]int{}
	for round := range crashRounds {
		mode := []string{"block", "loop"}[round%2]
		cmd, out := startChild(t, "crash", s.Schema(), stream, mode, table)
		sc := bufio.NewScanner(out)
		wrote, after := int64(0), 1+rand.IntN(15) // loop: kill after this many commits
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "wrote "); ok && mode == "block" {
				wrote, _ = strconv.ParseInt(v, 10, 64)
				break
			}
			if strings.HasPrefix(line, "committed ") && mode == "loop" {
				if after--; after == 0 {
					break
				}
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, out) //nolint:errcheck // drain until the pipe closes
		if err := cmd.Wait(); err == nil {
			t.Fatalf("round %d (%s): the child ended on its own: %v", round, mode, sc.Err())
		}
		killed[mode]++
		v := checkSlices(t, s, table, stream, round)
		if mode == "block" && (wrote == 0 || v != wrote-1) {
			t.Fatalf("round %d: killed between writing slice %d and its commit, but the checkpoint is at %d", round, wrote, v)
		}
	}
	if v := checkSlices(t, s, table, stream, crashRounds); v < crashRounds {
		t.Fatalf("only %d slices committed in %d rounds", v, crashRounds)
	}
	t.Logf("killed %v", killed)
}

// checkSlices reads the checkpoint and the records in one snapshot, and
// fails unless the records are exactly the slices 1..version, each
// complete. It returns the version.
func checkSlices(t *testing.T, s *pgstore.Store, table, stream string, round int) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	var v int64
	err = tx.QueryRow(ctx, `SELECT version FROM "`+s.Schema()+`".checkpoints WHERE stream = $1`, stream).Scan(&v)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT seq / 1000, count(*) FROM `+table+` GROUP BY 1 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var slicesSeen []int64
	for rows.Next() {
		var slice, n int64
		if err := rows.Scan(&slice, &n); err != nil {
			t.Fatal(err)
		}
		if n != crashRecords {
			t.Fatalf("round %d: slice %d has %d of its %d records", round, slice, n, crashRecords)
		}
		slicesSeen = append(slicesSeen, slice)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if int64(len(slicesSeen)) != v || v > 0 && slicesSeen[len(slicesSeen)-1] != v {
		t.Fatalf("round %d: the checkpoint is at version %d but the records hold slices %v", round, v, slicesSeen)
	}
	return v
}

// crashChild commits slices of the stream key, each slice's records and
// checkpoint in one CommitWith, until it is killed; args are the mode and
// the records table. In mode "block" it prints "wrote N" once slice N's
// records are written, and blocks before the commit; in mode "loop" it
// prints "committed N" after each commit and goes on.
func crashChild(t *testing.T, s *pgstore.Store, stream string, args []string) {
	ctx := context.Background()
	mode, table := args[0], args[1]
	key := checkpoint.Key{Stream: stream, Mode: checkpoint.CatchUp}
	for {
		cp, err := s.Load(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		slice := cp.Version + 1
		_, err = s.CommitWith(ctx, key, []byte(strconv.FormatInt(slice, 10)), cp.Version, checkpoint.Lease{},
			func(ctx context.Context, tx pgx.Tx) error {
				for j := range int64(crashRecords) {
					if err := insertRecord(ctx, tx, table, slice*1000+j, "child"); err != nil {
						return err
					}
				}
				if mode == "block" {
					fmt.Println("wrote", slice)
					select {} // until killed
				}
				return nil
			})
		switch {
		case errors.Is(err, checkpoint.ErrConflict):
			continue // a killed child's commit landed late: reload
		case err != nil:
			t.Fatal(err)
		}
		fmt.Println("committed", slice)
	}
}
