package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/forage-go/forage/bench/internal/clients"
)

// klinesURL is what the in-process clients request: one candle, weight 1.
const klinesURL = "/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=1"

// ohlcvGrace is how long past its -timeout the ohlcv process may take to
// stop before it is killed.
const ohlcvGrace = 20 * time.Second

// client is one column: a way of calling the provider.
type client struct {
	// name is the column's name and the -clients filter's word.
	name string
	// run drives the client against the server at e.base until e.run has
	// passed (or ctx ends), and returns a note on what it did, or an error
	// if it failed. rw is the row: the peers' fixed guesses are multiples
	// of its true limit.
	run func(ctx context.Context, rw row, e env) (note string, err error)
	// optIn keeps the column out of the default table: it runs only when
	// -clients names it.
	optIn bool
	// group, when not nil, makes the client a group of ohlcv processes
	// sharing the provider through PostgreSQL (-pg); run is then unused.
	group *group
}

// allClients returns the columns, forage's first. bin is the built ohlcv
// binary.
func allClients(bin string) []client {
	rate := func(mult float64) func(context.Context, row, env) (string, error) {
		return func(ctx context.Context, rw row, e env) (string, error) {
			return inProcess(clients.Rate(mult*rw.rate(0, e.run)))(ctx, rw, e)
		}
	}
	told := func(mult float64) func(context.Context, row, env) (string, error) {
		return func(ctx context.Context, rw row, e env) (string, error) {
			return inProcess(clients.Told(mult*rw.rate(0, e.run)))(ctx, rw, e)
		}
	}
	return []client{
		{"ohlcv-1", ohlcv(bin, 1), false, nil},
		{"ohlcv-3", ohlcv(bin, 3), false, nil},
		{"crawl", inProcess(clients.Crawl), false, nil},
		{"aws", inProcess(clients.AWS), false, nil},
		{"rate0.5x", rate(0.5), false, nil},
		{"rate1x", rate(1), false, nil},
		{"rate2x", rate(2), false, nil},
		// How much arrival jitter the machine has: a client pacing just
		// under a limit that allows no burst is refused only by jitter.
		{"rate0.7x", rate(0.7), true, nil},
		{"rate0.8x", rate(0.8), true, nil},
		{"rate0.9x", rate(0.9), true, nil},
		{"rate0.95x", rate(0.95), true, nil},
		// The most a client told the limit can reach when it honours
		// every Retry-After for all its workers: the bound arrival jitter
		// and the provider's pauses set on a row (see clients.Told).
		{"told0.5x", told(0.5), true, nil},
		{"told0.6x", told(0.6), true, nil},
		{"told0.7x", told(0.7), true, nil},
		{"told0.8x", told(0.8), true, nil},
		{"told0.85x", told(0.85), true, nil},
		{"told0.9x", told(0.9), true, nil},
		{"told0.95x", told(0.95), true, nil},
		// Processes sharing one provider through one PostgreSQL (make
		// goodput-pg): 1, 3 and 8, and one of them killed mid-run.
		{"pg-1", nil, true, &group{procs: 1}},
		{"pg-3", nil, true, &group{procs: 3}},
		{"pg-8", nil, true, &group{procs: 8}},
		{"pg-3-kill", nil, true, &group{procs: 3, kill: true}},
		{"pg-8-kill", nil, true, &group{procs: 8, kill: true}},
	}
}

// inProcess runs f in this process for e.run, with e.workers workers over
// a transport of its own that keeps a connection per worker alive.
func inProcess(f clients.Func) func(context.Context, row, env) (string, error) {
	return func(ctx context.Context, _ row, e env) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, e.run)
		defer cancel()
		tr := &http.Transport{
			MaxIdleConns:        2 * e.workers,
			MaxIdleConnsPerHost: 2 * e.workers,
			IdleConnTimeout:     30 * time.Second,
		}
		defer tr.CloseIdleConnections()
		f(ctx, tr, e.base+klinesURL, e.workers)
		return "", nil
	}
}

// ohlcvSummary is the part of ohlcv's -json summary the table notes.
type ohlcvSummary struct {
	Status      string  `json:"status"`
	Error       string  `json:"error"`
	Requests    uint64  `json:"requests"`
	Throttled   uint64  `json:"throttled"`
	Retries     int64   `json:"retries"`
	Candles     int     `json:"candles"`
	ElapsedS    float64 `json:"elapsed_s"`
	LearnedRate float64 `json:"learned_rate"`
	Ceiling     float64 `json:"ceiling"`
}

// ohlcv runs the built examples/ohlcv binary as a user would, collecting
// the first n symbols' 1m candles since the listing, 100 a page, into a
// fresh file store, for e.run (-timeout), and reads its JSON summary.
func ohlcv(bin string, n int) func(context.Context, row, env) (string, error) {
	return func(ctx context.Context, _ row, e env) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, e.run+ohlcvGrace)
		defer cancel()
		args := []string{"-base-url", e.base, "-symbols", strings.Join(symbols[:n], ","),
			"-interval", "1m", "-page", "100", "-since", listed.Format(time.RFC3339),
			"-store", filepath.Join(e.dir, "store"), "-timeout", e.run.String(), "-json"}
		if e.log != "" {
			args = append(args, "-v", "-progress=false") // the provider's pauses and cuts, for the trace
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		if e.log != "" {
			_ = os.WriteFile(e.log, stderr.Bytes(), 0o644)
		}
		var s ohlcvSummary
		note := "no summary"
		if jerr := json.Unmarshal(stdout.Bytes(), &s); jerr == nil {
			note = fmt.Sprintf("%s, %d candles, %d throttled, learned %.1f/s (ceiling %.1f), %.1fs",
				s.Status, s.Candles, s.Throttled, s.LearnedRate, s.Ceiling, s.ElapsedS)
			if s.Error != "" {
				note += ": " + s.Error
			}
		}
		if err != nil {
			return note, fmt.Errorf("ohlcv: %v: %s (%s)", err, lastLine(stderr.String()), note)
		}
		return note, nil
	}
}

// lastLine returns the last non-empty line of s, at most 300 bytes.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := lines[len(lines)-1]
	if len(l) > 300 {
		l = l[:300] + "..."
	}
	return l
}
