package pgstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/providertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The child processes of the multi-process tests are this test binary run
// again with -test.run=^TestHelperProcess$; these environment variables
// tell them what to do (the DSN comes in FORAGE_PG_DSN as usual).
const (
	helperVar = "FORAGE_PGSTORE_HELPER" // the child's role: "share", "crash", "claim" or "lease"
	schemaVar = "FORAGE_PGSTORE_SCHEMA"
	keyVar    = "FORAGE_PGSTORE_KEY" // the provider key, or the stream
	argsVar   = "FORAGE_PGSTORE_ARGS"
)

// TestHelperProcess is not a test: it is the body of the child processes
// that TestSharesManyProcesses, TestCommitWithSurvivesKill and
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
	case "share":
		shareChild(t, s, os.Getenv(keyVar), args)
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

// The sharing run of TestSharesManyProcesses: a provider with a known
// limit of shareCount requests per sharePer, which the simulated provider
// enforces in fixed windows.
const (
	shareProcs   = 8
	shareWorkers = 2 // goroutines per process, each calling Do back to back
	shareCount   = 60
	sharePer     = 2 * time.Second
	shareBurst   = shareProcs // at least one unit of burst per process
	shareFor     = 8 * time.Second
)

// TestSharesManyProcesses: eight OS processes, two goroutines each, call
// one provider through budget providers shared by leases in the store
// (budget.Config.Shares), with the provider's limit known to them. The
// provider, which counts every request in its own windows, refuses none:
// the known limit is split by the shares, never exceeded in any window;
// and together the processes use most of it, with about one store round
// trip a second each, not one per request.
func TestSharesManyProcesses(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	srv, err := providertest.New(providertest.Config{Limit: providertest.Limit{Count: shareCount, Window: sharePer},
		Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var wg sync.WaitGroup
	served := make([]int, shareProcs)
	errs := make([]error, shareProcs)
	for i := range shareProcs {
		cmd, out := startChild(t, "share", s.Schema(), "exchange.example.com", hs.URL)
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "served "); ok {
					served[i], errs[i] = strconv.Atoi(v)
				}
			}
			errs[i] = errors.Join(errs[i], sc.Err(), cmd.Wait())
		})
	}
	wg.Wait()
	total := 0
	for i := range shareProcs {
		if errs[i] != nil {
			t.Fatalf("child %d: %v", i, errs[i])
		}
		total += served[i]
	}
	st := srv.Stats()
	limit := shareCount * shareFor.Seconds() / sharePer.Seconds()
	t.Logf("%d processes × %d goroutines, known limit %d per %v: %d served in %v (%.0f%% of %.0f), %d refused; per process %v",
		shareProcs, shareWorkers, shareCount, sharePer, st.OK, shareFor, 100*float64(st.OK)/limit, limit, st.Throttled, served)
	if st.Throttled != 0 {
		t.Fatalf("the provider refused %d requests: the known limit was exceeded", st.Throttled)
	}
	if float64(st.OK) < 0.5*limit {
		// Typically 80-86%: eight race-built processes started one after
		// another on a loaded machine get less.
		t.Fatalf("%d served of the %.0f the limit allows in %v; want at least 50%%", st.OK, limit, shareFor)
	}
}

// shareChild calls the provider at args[0] from shareWorkers goroutines
// through a budget provider shared by the store, for shareFor, and prints
// how many calls succeeded.
func shareChild(t *testing.T, s *pgstore.Store, key string, args []string) {
	p, err := budget.NewLocal(key, budget.Config{Shares: s, MaxInFlight: shareWorkers,
		Limits: []budget.Limit{{Count: shareCount, Per: sharePer, Burst: shareBurst}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareFor)
	defer cancel()
	url := args[0] + "/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=1"
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range shareWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := p.Do(ctx, nil, get(url))
				if err == nil {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Println("served", ok.Load())
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

// get returns an attempt that GETs url and reads the answer's outcome,
// draining and closing the body.
func get(url string) func(context.Context) forage.Outcome {
	return func(ctx context.Context) forage.Outcome {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return forage.FromHTTP(resp, err)
	}
}
