// Command goodput-http measures goodput in real time over loopback HTTP:
// how much of a provider's limit a client gets, without being told it.
//
// For each provider policy (a row: GCRA at burst 1, 2 and 10, a fixed
// window with and without usage headers, bare 429, 503, a silent
// slow-down, a ban after 5 violations a minute, a limit that halves
// mid-run, random 502/503 noise on top of a limit, a fast provider) and
// each client (a column), it starts a fresh providertest server on its own
// 127.0.0.1 port, runs the client against it for the run's duration, and
// reports:
//
//   - goodput: the 200 answers the server wrote during the run, over what
//     the provider could serve in it (the limit times the run, a fixed
//     window's count pro-rated, the schedule integrated, less the share
//     random faults take);
//   - refused: the requests the server refused for its limit (429, the
//     limit's 503, 418) over all it received; noise is not a refusal;
//   - bans: the bans the server entered;
//   - t90: the time from the first request until the successes within one
//     second first reach 90% of the limit (net of noise), or "never".
//
// The clients: ohlcv-1 and ohlcv-3, the built examples/ohlcv binary run as
// a user runs it (1 or 3 symbols, 1m candles, 100 a page, from a listing
// far enough back that it never finishes, into a fresh file store,
// -timeout the run); crawl, an http.Client over forage's budget.Transport
// with 8 workers; and forage's peers with the same workers: aws, the AWS
// SDK for Go v2's adaptive retry mode, and rate0.5x, rate1x, rate2x, a
// hand-written client pacing on golang.org/x/time/rate at 0.5, 1 and 2
// times the true limit. The clients are bench/internal/clients, the same
// code bench's TestPeers runs in simulated time.
//
// The opt-in pg clients (make goodput-pg) measure processes sharing one
// provider through one PostgreSQL (-pg, default $FORAGE_PG_DSN): pg-1,
// pg-3 and pg-8 run 1, 3 and 8 ohlcv processes, each collecting one symbol
// of its own into a fresh database for the cell; pg-3-kill and pg-8-kill
// SIGKILL the last process at half the run (under a host name of its own
// when unshare -u may be run, so the others must wait for its lease to
// end, as for a process on another machine). They run against the shared
// rows only (gcra 17/s burst 1, gcra 50/s burst 10, gcra 15/s that bans
// after 5 refusals a minute, a fixed window of
// 200/10s with 429) and print a table of their own: besides goodput, each process's
// part of the 200s, the statements the processes sent per process and
// second (pg_stat_statements, when the server preloads it) split into
// page commits, lease renewals and the rest, the transactions
// (pg_stat_database), and what the kill did to the share of the limit
// served.
//
// Every run of 30s or less measures every cell. Longer runs measure only
// what the long run adds (unless -full): ohlcv-3 and crawl on the rows
// where the climb's cost or a slow drift matters, and aws on the fixed
// windows, whose whole quota it bursts.
//
// Usage:
//
//	cd bench && go run ./cmd/goodput-http [flags]
//
// Flags:
//
//	-dur 30s,120s    run lengths (default 30s)
//	-rows REGEXP     only rows whose name matches
//	-clients A,B     only these clients (default all but rate0.7x, rate0.8x,
//	                 rate0.9x and rate0.95x, which measure the machine's
//	                 arrival jitter, and the pg clients)
//	-parallel N      cells run at once (default 4)
//	-workers N       workers of the in-process clients (default 8)
//	-full            every cell at every duration
//	-json            one JSON object per cell instead of the Markdown table
//	-md              the Markdown table (the default)
//	-trace DIR       write each cell's per-second ok/refused/other counts as CSV
//	                 and every request as the server saw it (.events.csv: arrival, answer,
//	                 status), and the ohlcv binary's -v log: its streams, pauses and rate cuts
//	-tmp DIR         where cells' file stores go (default the system's temp dir)
//	-ohlcv PATH      a built ohlcv binary (default: build examples/ohlcv)
//	-seed N          the servers' seed (default 1)
//	-pg DSN          PostgreSQL for the pg clients (default $FORAGE_PG_DSN)
//	-latency 3ms     the provider's latency on top of loopback (default 3ms)
//	-jitter 4ms      a uniform extra latency of up to this much (default 4ms):
//	                 -latency 100ms -jitter 40ms is a provider across an ocean
//	-random N        N rows drawn at random instead of the fixed rows (0, the
//	                 default: off; at most 500); the clients default to ohlcv-3
//	                 and crawl; -latency and -jitter do not apply
//	-random-from K   the first drawn row's number (default 0): -random 1
//	                 -random-from 7 re-runs row #7 alone (as does -random 8
//	                 -rows '#7:')
//
// With -random N the rows are providers drawn at random, in real time, as
// budget's sweep draws them in simulated time (make goodput-random): row i
// is drawn from i and -seed alone (see drawRow) and named by everything
// drawn, e.g. "random #7: gcra 23.4/s burst 5, bare 429, bans, +5% 503,
// 37+12ms" (37 ms of latency plus up to 12 more). After the table, a line
// per client and run length sums the rows up: the goodput's mean, tenth
// percentile and median, the mean refused share, and which of the rows
// that ban banned the client.
//
// Progress goes to stderr, the table to stdout. Every cell stops by itself:
// the in-process clients at the end of the run, ohlcv by its -timeout (and
// is killed 20s past it).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// shortRun is the longest run that measures every cell by default.
const shortRun = 30 * time.Second

// options is a parsed command line.
type options struct {
	durs     []time.Duration
	rows     *regexp.Regexp
	clients  []string // empty: all
	parallel int
	workers  int
	full     bool
	json     bool
	traceDir string
	trace    bool // per-second counts wanted (-trace or -json)
	tmp      string
	ohlcv    string
	seed     uint64
	pg       string        // the pg clients' PostgreSQL server
	latency  time.Duration // the provider's latency on top of loopback
	jitter   time.Duration // a uniform extra latency of up to this much
	pgAdmin  *pgAdmin      // connected when a pg client runs
	// random is the number of rows drawn at random in place of the fixed
	// rows (0: the fixed rows); randomFrom the first one's number.
	random, randomFrom int
}

// randomClients are the clients measured against the rows drawn at random
// when -clients names none: forage's two (the peers on request).
var randomClients = []string{"ohlcv-3", "crawl"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "goodput-http:", err)
		os.Exit(1)
	}
}

// parseFlags parses and validates args.
func parseFlags(args []string) (options, error) {
	var o options
	var durs, rows, cls string
	fs := flag.NewFlagSet("goodput-http", flag.ContinueOnError)
	fs.StringVar(&durs, "dur", "30s", "comma-separated run lengths")
	fs.StringVar(&rows, "rows", "", "regexp: only rows whose name matches")
	fs.StringVar(&cls, "clients", "", "comma-separated clients (default all)")
	fs.IntVar(&o.parallel, "parallel", 4, "cells run at once")
	fs.IntVar(&o.workers, "workers", 8, "workers of the in-process clients")
	fs.BoolVar(&o.full, "full", false, "every cell at every duration")
	fs.BoolVar(&o.json, "json", false, "JSON lines instead of the Markdown table")
	fs.Bool("md", true, "the Markdown table (the default)")
	fs.StringVar(&o.traceDir, "trace", "", "directory for per-second CSV traces (and the ohlcv -v logs)")
	fs.StringVar(&o.tmp, "tmp", "", "directory for the cells' file stores (default the system's temp dir)")
	fs.StringVar(&o.ohlcv, "ohlcv", "", "a built ohlcv binary (default: build examples/ohlcv)")
	fs.Uint64Var(&o.seed, "seed", 1, "the servers' seed")
	fs.StringVar(&o.pg, "pg", os.Getenv("FORAGE_PG_DSN"), "PostgreSQL DSN for the pg clients (default $FORAGE_PG_DSN)")
	fs.DurationVar(&o.latency, "latency", defaultLatency, "the provider's latency on top of loopback")
	fs.DurationVar(&o.jitter, "jitter", defaultJitter, "a uniform extra latency of up to this much")
	fs.IntVar(&o.random, "random", 0, "measure this many rows drawn at random instead of the fixed rows (0: off)")
	fs.IntVar(&o.randomFrom, "random-from", 0, "the number of the first row drawn at random")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.validateRandom(fs); err != nil {
		return o, err
	}
	for d := range strings.SplitSeq(durs, ",") {
		v, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || v < time.Second || v > time.Hour {
			return o, fmt.Errorf("-dur: %q is not a duration in [1s, 1h]", d)
		}
		o.durs = append(o.durs, v)
	}
	var err error
	if o.rows, err = regexp.Compile(rows); err != nil {
		return o, fmt.Errorf("-rows: %w", err)
	}
	names := make([]string, 0, 8)
	for _, c := range allClients("") {
		names = append(names, c.name)
	}
	for c := range strings.SplitSeq(cls, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if !slices.Contains(names, c) {
			return o, fmt.Errorf("-clients: unknown client %q (have %s)", c, strings.Join(names, ", "))
		}
		o.clients = append(o.clients, c)
	}
	switch {
	case o.parallel < 1 || o.parallel > 64:
		return o, fmt.Errorf("-parallel must be in [1, 64] (got %d)", o.parallel)
	case o.workers < 1 || o.workers > 256:
		return o, fmt.Errorf("-workers must be in [1, 256] (got %d)", o.workers)
	case o.latency < 0 || o.latency > 10*time.Second:
		return o, fmt.Errorf("-latency must be in [0, 10s] (got %v)", o.latency)
	case o.jitter < 0 || o.jitter > 10*time.Second:
		return o, fmt.Errorf("-jitter must be in [0, 10s] (got %v)", o.jitter)
	}
	if o.random > 0 && len(o.clients) == 0 {
		o.clients = slices.Clone(randomClients)
	}
	o.trace = o.traceDir != "" || o.json
	return o, nil
}

// validateRandom checks -random and -random-from, and that neither
// -latency nor -jitter is set with -random: each drawn row has its own.
func (o options) validateRandom(fs *flag.FlagSet) error {
	switch {
	case o.random < 0 || o.random > maxRandom:
		return fmt.Errorf("-random must be in [0, %d] (got %d)", maxRandom, o.random)
	case o.randomFrom < 0 || o.randomFrom > maxRandomFrom:
		return fmt.Errorf("-random-from must be in [0, %d] (got %d)", maxRandomFrom, o.randomFrom)
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case err != nil:
		case o.random > 0 && (f.Name == "latency" || f.Name == "jitter"):
			err = fmt.Errorf("-%s: the rows drawn at random (-random) draw their own latency and jitter", f.Name)
		case o.random == 0 && f.Name == "random-from":
			err = errors.New("-random-from: needs -random N")
		}
	})
	return err
}

// rowSet returns the rows o measures: the fixed rows, or with -random the
// rows drawn at random.
func (o options) rowSet() []row {
	if o.random > 0 {
		return randomRows(o.randomFrom, o.random, o.seed)
	}
	return rows()
}

// cellPlan is one cell to run.
type cellPlan struct {
	row    int // index into the rows (options.rowSet)
	client int // index into the clients
	run    time.Duration
}

// planned reports whether client cl runs against rw for run. The pg
// clients run against the shared rows only (unless full), the others never
// against the rows only the pg clients run against. Runs up to
// shortRun (or all, with full) measure every cell; longer ones only what
// they add: ohlcv-3 and crawl on the long rows, ohlcv-1 on the long solo
// rows (a fast provider), aws on the fixed windows.
func planned(rw row, cl string, run time.Duration, full bool) bool {
	if strings.HasPrefix(cl, "pg-") {
		return rw.shared || full
	}
	if rw.pgOnly {
		return false
	}
	if full || run <= shortRun {
		return true
	}
	switch cl {
	case "ohlcv-3", "crawl":
		return rw.long
	case "ohlcv-1":
		return rw.long && rw.solo // a fast provider: can one stream use it?
	case "aws":
		return rw.fixedWindow()
	}
	return false
}

// plan lists the cells o selects, longest runs first (so the parallel
// cells finish together), then in table order; the solo rows' cells last.
func plan(o options, rs []row, cls []client) []cellPlan {
	var out []cellPlan
	for _, d := range o.durs {
		for i, rw := range rs {
			if !o.rows.MatchString(rw.name) {
				continue
			}
			for j, cl := range cls {
				if (len(o.clients) == 0 && !cl.optIn || slices.Contains(o.clients, cl.name)) && planned(rw, cl.name, d, o.full) {
					out = append(out, cellPlan{i, j, d})
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b cellPlan) int { return int(b.run - a.run) })
	slices.SortStableFunc(out, func(a, b cellPlan) int { // the solo rows last
		return cmp.Compare(b2i(rs[a.row].solo), b2i(rs[b.row].solo))
	})
	return out
}

// run is the whole command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	rs := o.rowSet()
	cells := plan(o, rs, allClients(""))
	if len(cells) == 0 {
		return errors.New("no cell selected (see -rows, -clients, -dur)")
	}
	tmp, err := os.MkdirTemp(o.tmp, "goodput-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	o.tmp = tmp
	if usesGroup(cells, allClients("")) {
		if o.pg == "" {
			return errors.New("the pg clients need a PostgreSQL server: -pg DSN or FORAGE_PG_DSN (make goodput-pg starts a throwaway one)")
		}
		if o.pgAdmin, err = newPGAdmin(ctx, o.pg); err != nil {
			return err
		}
		if !o.pgAdmin.statements {
			fmt.Fprintln(stderr, "pg_stat_statements is not loaded: statements are not counted, transactions are")
		}
	}
	if o.ohlcv == "" && usesOhlcv(cells, allClients("")) {
		fmt.Fprintln(stderr, "building examples/ohlcv ...")
		if o.ohlcv, err = buildOhlcv(ctx, tmp); err != nil {
			return err
		}
	}
	if o.traceDir != "" {
		if err := os.MkdirAll(o.traceDir, 0o755); err != nil {
			return err
		}
	}
	cls := allClients(o.ohlcv)
	results := runAll(ctx, o, rs, cls, cells, stderr)
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.traceDir != "" {
		if err := writeTraces(o.traceDir, results); err != nil {
			return err
		}
	}
	if o.json {
		return writeJSON(stdout, results)
	}
	_, err = io.WriteString(stdout, markdown(o, rs, cls, results))
	return err
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// usesOhlcv reports whether any cell runs the ohlcv binary.
func usesOhlcv(cells []cellPlan, cls []client) bool {
	for _, c := range cells {
		if strings.HasPrefix(cls[c.client].name, "ohlcv") || cls[c.client].group != nil {
			return true
		}
	}
	return false
}

// usesGroup reports whether any cell runs a pg client.
func usesGroup(cells []cellPlan, cls []client) bool {
	for _, c := range cells {
		if cls[c.client].group != nil {
			return true
		}
	}
	return false
}

// buildOhlcv builds examples/ohlcv into dir and returns the binary's path.
// The source is found by walking up from the working directory.
func buildOhlcv(ctx context.Context, dir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		src := filepath.Join(d, "examples", "ohlcv")
		if _, err := os.Stat(filepath.Join(src, "go.mod")); err == nil {
			bin := filepath.Join(dir, "ohlcv")
			cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
			cmd.Dir = src
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("go build examples/ohlcv: %v\n%s", err, out)
			}
			return bin, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("examples/ohlcv not found above %s: run from the repository, or pass -ohlcv", wd)
		}
	}
}

// runAll runs the cells, o.parallel at once (a solo row's alone), printing
// progress to stderr, and returns the results in plan order.
func runAll(ctx context.Context, o options, rs []row, cls []client, cells []cellPlan, stderr io.Writer) []result {
	results := make([]result, len(cells))
	sem := make(chan struct{}, o.parallel)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start, done := time.Now(), 0
	for i, c := range cells {
		slots := 1
		if rs[c.row].solo {
			slots = o.parallel // alone: every slot, once the cells before it are done
		}
		for range slots {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() {
				for range slots {
					<-sem
				}
			}()
			rw, cl := rs[c.row], cls[c.client]
			results[i] = runCell(ctx, rw, cl, c.run, o)
			mu.Lock()
			defer mu.Unlock()
			done++
			r := results[i]
			fmt.Fprintf(stderr, "[%d/%d %s] %s %s × %s: %s; %d requests, %d ok, %d refused, %d noise  %s\n",
				done, len(cells), time.Since(start).Round(time.Second), c.run, rw.name, cl.name,
				r.cell(), r.Requests, r.OK, r.Refused, r.Noise, r.Note)
		})
	}
	wg.Wait()
	return results
}
