package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// The crash tests run the built binary, as a user does, against the
// simulated exchange on loopback, and kill it with SIGKILL at random
// moments, restarting it at once each time, until a run finishes. They run
// on the wall clock: what they check is what a crash leaves behind (every
// closed candle stored once with the exchange's values, no hole, no
// duplicate, no restart that waits for the dead run's lease) and what the
// crashes cost in time (the interrupted collections together take at most
// twice as long as as many uninterrupted ones).

// crashKills is how many SIGKILLs each store gets.
const crashKills = 20

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the command once per test binary and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ohlcv-crash-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ohlcv")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// crashSymbols are collected by every crash run: two streams that share
// one provider.
var crashSymbols = []string{"BTCUSDT", "ETHUSDT"}

// crashBed is one crash test's exchange and command line.
type crashBed struct {
	t     *testing.T
	bin   string
	srv   *providertest.Server
	base  string
	since time.Time
	rng   *rand.Rand
}

func newCrashBed(t *testing.T) *crashBed {
	t.Helper()
	syms := make([]providertest.Symbol, len(crashSymbols))
	for i, s := range crashSymbols {
		syms[i] = providertest.Symbol{Name: s}
	}
	srv, err := providertest.New(providertest.Config{Symbols: syms, Limit: providertest.Limit{Rate: embeddedLimit, Burst: 5}})
	if err != nil {
		t.Fatal(err)
	}
	lb := httptest.NewServer(srv)
	t.Cleanup(lb.Close)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return &crashBed{
		t: t, bin: binary(t), srv: srv, base: lb.URL,
		since: time.Now().UTC().Truncate(time.Minute).Add(-24 * time.Hour),
		rng:   rand.New(rand.NewPCG(seed, seed>>1)),
	}
}

// args is the collect command line into store.
func (b *crashBed) args(store ...string) []string {
	return append([]string{"-base-url", b.base, "-symbols", strings.Join(crashSymbols, ","),
		"-since", b.since.Format(time.RFC3339), "-page", "100", "-json"}, store...)
}

// runOnce starts the command and kills it with SIGKILL after killAfter,
// unless it ends first. It reports whether it was killed, and the exit
// status and output of a run that ended by itself.
func (b *crashBed) runOnce(args []string, killAfter time.Duration) (killed bool, r result) {
	b.t.Helper()
	cmd := exec.Command(b.bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	timer := time.NewTimer(killAfter)
	defer timer.Stop()
	select {
	case <-ended:
	case <-timer.C:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-ended
		if cmd.ProcessState.ExitCode() == -1 { // killed, not exited
			return true, result{}
		}
	}
	return false, result{cmd.ProcessState.ExitCode(), out.String(), errOut.String()}
}

// collect runs the command into store until a run ends by itself, killing
// the runs before it at random moments in [0, most), and restarting at
// once. It returns the kills and the wall-clock time from the first start
// to the end, and fails t unless the run that ended is done.
func (b *crashBed) collect(store []string, most time.Duration, killsLeft int) (int, time.Duration) {
	b.t.Helper()
	start := time.Now()
	kills := 0
	for {
		after := time.Duration(1 << 62)
		if kills < killsLeft {
			after = time.Duration(b.rng.Int64N(int64(most)))
		}
		killed, r := b.runOnce(b.args(store...), after)
		if killed {
			kills++
			continue
		}
		if r.code != 0 {
			b.t.Fatalf("run after %d kills: exit %d, stdout %q, stderr %q", kills, r.code, r.stdout, r.stderr)
		}
		s := decodeSummary(b.t, r.stdout)
		if s.Status != "done" {
			b.t.Fatalf("run after %d kills: status %q, summary %s", kills, s.Status, r.stdout)
		}
		return kills, time.Since(start)
	}
}

// check exports every symbol from store and compares it with the
// exchange: from since, one candle per minute, ending at most two minutes
// before now, each with the exchange's values, each once.
func (b *crashBed) check(store []string) {
	b.t.Helper()
	now := time.Now()
	for _, sym := range crashSymbols {
		cmd := exec.Command(b.bin, append([]string{"export", "-symbol", sym}, store...)...)
		out, err := cmd.Output()
		if err != nil {
			b.t.Fatalf("export %s: %v", sym, err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		var truth []providertest.Kline
		for from := b.since; ; {
			page, err := b.srv.KlinesAt(now, providertest.Query{Symbol: sym, Interval: "1m", Start: from, End: now, Limit: maxKlineLimit})
			if err != nil {
				b.t.Fatal(err)
			}
			truth = append(truth, page...)
			if len(page) < maxKlineLimit {
				break
			}
			from = time.UnixMilli(page[len(page)-1].OpenTime).Add(time.Minute)
		}
		if len(lines) > len(truth) || len(lines) < len(truth)-3 {
			b.t.Fatalf("%s: %d candles stored, the exchange has %d closed since %s", sym, len(lines), len(truth)-1, b.since)
		}
		for i, line := range lines {
			k := truth[i]
			want := strings.Join([]string{strconv.FormatInt(k.OpenTime, 10), k.Open, k.High, k.Low, k.Close, k.Volume}, ",")
			if line != want {
				b.t.Fatalf("%s candle %d = %q, the exchange has %q: a hole, a duplicate or a changed value", sym, i, line, want)
			}
		}
		if store[0] == "-store" && !isPostgres(store[1]) {
			b.noDuplicateLines(filepath.Join(store[1], sym+"-1m.csv"))
		}
	}
}

// noDuplicateLines fails unless every line of a candle file is a distinct
// candle (export reads a file as an upsert, so it would hide a replayed
// page that was appended again).
func (b *crashBed) noDuplicateLines(path string) {
	b.t.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer f.Close()
	seen := make(map[string]bool)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ms, _, _ := strings.Cut(sc.Text(), ",")
		if seen[ms] {
			b.t.Fatalf("%s: open time %s stored twice", path, ms)
		}
		seen[ms] = true
	}
}

// crashTest measures one uninterrupted collection into a fresh store, then
// collects into fresh stores again and again, killing runs at random
// moments, until crashKills kills are done; each collection must end done
// with the exchange's series, and together they must take at most twice
// the uninterrupted time each.
func crashTest(t *testing.T, fresh func() []string) {
	b := newCrashBed(t)
	store := fresh()
	_, base := b.collect(store, 0, 0)
	b.check(store)
	t.Logf("uninterrupted: %v", base.Round(time.Millisecond))
	kills, rounds := 0, 0
	var total time.Duration
	for kills < crashKills {
		store := fresh()
		k, d := b.collect(store, base/2, min(6, crashKills-kills))
		b.check(store)
		t.Logf("collection %d: %d kills, %v (%.2f× uninterrupted)", rounds, k, d.Round(time.Millisecond), d.Seconds()/base.Seconds())
		kills, rounds, total = kills+k, rounds+1, total+d
	}
	ratio := total.Seconds() / (float64(rounds) * base.Seconds())
	t.Logf("%d kills over %d collections: %v in all, %.2f× as many uninterrupted ones", kills, rounds, total.Round(time.Millisecond), ratio)
	if ratio > 2 {
		// One uninterrupted run is a noisy yardstick on a loaded machine:
		// measure it twice more and judge by the slowest of the three.
		for range 2 {
			store := fresh()
			_, again := b.collect(store, 0, 0)
			base = max(base, again)
		}
		ratio = total.Seconds() / (float64(rounds) * base.Seconds())
		t.Logf("uninterrupted again: the slowest of three %v: %.2f×", base.Round(time.Millisecond), ratio)
	}
	if ratio > 2 {
		t.Errorf("the crashed collections took %.2f× the uninterrupted time, want at most 2×", ratio)
	}
}

// TestCrashRestartFileStore: SIGKILL at random moments with the file
// store, restart at once: no hole, no duplicate line in the files, no wait
// for a dead run's lease.
func TestCrashRestartFileStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := 0
	crashTest(t, func() []string {
		n++
		return []string{"-store", filepath.Join(dir, strconv.Itoa(n))}
	})
}

// TestPostgresCrashRestart: the same with PostgreSQL, each collection in
// a schema of its own.
func TestPostgresCrashRestart(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	crashTest(t, func() []string {
		_, schema, _ := freshSchema(t)
		return []string{"-store", dsn, "-pg-schema", schema}
	})
}
