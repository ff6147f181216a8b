// Command ohlcv collects closed candles (klines) from any Binance-compatible
// REST API into a file store or PostgreSQL, within a budget, exactly once,
// resuming where the last run stopped.
//
// Each symbol is one stream declared to a [schedule.Scheduler], which runs
// it through one [budget.Provider] per exchange: its backfill fills
// [since, until) in catch-up mode (until is fixed when the run starts) and,
// with -follow, its incremental job collects from until on in steady-state
// mode, just after each candle closes, first whenever both are due and
// never at the same time as the backfill, until SIGINT or SIGTERM.
// Catch-up and steady-state keep separate checkpoints. Only closed
// candles are stored, each once (upsert on the open time), and the
// checkpoint never runs ahead of the data: with a file store a crash replays
// at most one page, which the upsert absorbs; with PostgreSQL the candles
// of a page and the checkpoint after them commit in one transaction.
//
// With no flags it starts a simulated exchange on loopback (symbols BTCUSDT,
// ETHUSDT, BNBUSDT, SOLUSDT, XRPUSDT, with a rate limit the collector is not
// told) and collects the last 24 hours of BTCUSDT 1m candles, two requests,
// into ./ohlcv-data.
//
// Usage:
//
//	ohlcv [flags]                      collect
//	ohlcv export [-store S] [-symbol S] [-interval I]
//	                                   print open_time_ms,open,high,low,close,volume
//	                                   per stored candle, ascending
//
// Flags:
//
//	-base-url URL       REST base (default: the embedded simulated exchange)
//	-symbols A,B        symbols to collect (default BTCUSDT)
//	-interval 1m        candle interval: <n>s, <n>m, <n>h, <n>d or <n>w
//	-since RFC3339      catch-up start for a stream's first run (default 24h before -until)
//	-until RFC3339|now  catch-up end, exclusive (default now: the last closed candle)
//	-page N             candles per request, 1 to 1000 (default 1000)
//	-store DIR|DSN      file store directory (default ./ohlcv-data), or a PostgreSQL DSN:
//	                    a postgres:// URL or a key=value string ("host=db dbname=market")
//	-pg-schema NAME     PostgreSQL schema for checkpoints, provider shares and candles (default forage)
//	-max-requests N     request cap of the run, 0 = none
//	-timeout DUR        wall-clock budget of the run, 0 = none
//	-max-pause DUR      longest pause one answer of the provider may impose (default 1h)
//	-follow             after catch-up, collect each new candle until SIGINT/SIGTERM
//	-json               print the summary as one JSON line on stdout
//	-v                  print one line per stream run, and the provider's pauses and rate cuts, on stderr
//	-progress           show progress on stderr (default true): on a terminal a bar per stream
//	                    (candles and pages fetched, how far from now its cursor is, and whether it
//	                    is catching up, steady or waiting until a time); otherwise one line every 10s
//
// Exit status: 0 when the run finished (status done, or empty when the
// provider sent no candle at all for a stream, e.g. a symbol not listed
// yet: nothing is covered and the next run asks again), deferred on its
// budget (a gap is recorded and the summary says why) or was interrupted; 2 for bad flags; 1
// for an unreachable store, a provider that answered no request of the run
// (a wrong -base-url, a host that is down or serves something else than
// the API; an API that answers 5xx is an outage, waited out), or a
// permanent provider error, e.g. an unknown
// symbol ("Invalid symbol.") or a provider that broke the klines contract
// (a gap record names it); 3 when another live process holds a stream, or
// the whole file store (status "yielded": nothing was done for it; the
// summary says who holds a stream and until when). Errors are one line on
// stderr, with no credential in them (the klines Source redacts the
// provider's text, budget the request URLs); with -json, stdout has its
// one line whatever happened.
//
// Examples:
//
//	go run ./examples/ohlcv
//	go run ./examples/ohlcv -symbols BTCUSDT,ETHUSDT -since 2024-01-01T00:00:00Z -json
//	go run ./examples/ohlcv -base-url https://api.binance.com -symbols BTCUSDT -interval 1h -follow
//	go run ./examples/ohlcv -store postgres://localhost/market -symbols ETHUSDT -max-requests 50
//	go run ./examples/ohlcv export -symbol BTCUSDT -interval 1m
//
// Several processes may share one PostgreSQL store, each with its own
// symbols: leases keep two of them off one stream, and the provider's pacing
// state lives in the database, so together they stay within one budget.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/forage-go/forage/providertest"
)

// Exit statuses.
const (
	exitOK    = 0 // finished, deferred on the budget, or interrupted
	exitError = 1 // unreachable store, permanent provider error, I/O failure
	exitUsage = 2 // bad flags
	exitHeld  = 3 // a stream is leased by another live process: nothing done for it
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the first signal stops gracefully; a second one kills
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// env is what run reaches outside its arguments: how the embedded exchange
// is served. Tests serve it in memory, inside a testing/synctest bubble.
type env struct {
	// serve makes srv reachable and returns its base URL, the client to
	// reach it with, and a func that stops it.
	serve func(srv *providertest.Server) (base string, client *http.Client, stop func(), err error)
	// bars reports whether stderr is a terminal, where progress is drawn
	// as a bar per stream. Nil means never.
	bars func(stderr io.Writer) bool
	// lineEvery is how often progress is written as one line when it is
	// not drawn as bars. Zero means never (the tests', whose stderr holds
	// only what they check).
	lineEvery time.Duration
	// wrap, if set, wraps the store the command opened (the tests', to
	// make it fail or hang). Nil leaves it as it is.
	wrap func(backend) backend
}

// loopback serves the embedded exchange on a 127.0.0.1 port, over real HTTP.
func loopback(srv *providertest.Server) (string, *http.Client, func(), error) {
	lb := httptest.NewServer(srv)
	return lb.URL, &http.Client{}, lb.Close, nil
}

// run is the whole command: it parses args, collects or exports, writes the
// summary or the export to stdout and errors to stderr, and returns the
// exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runEnv(ctx, env{serve: loopback, bars: isTerminal, lineEvery: lineEvery}, args, stdout, stderr)
}

// runEnv is run with the embedded exchange served by e.
func runEnv(ctx context.Context, e env, args []string, stdout, stderr io.Writer) int {
	var err error
	if len(args) > 0 && args[0] == "export" {
		var opts exportOptions
		if opts, err = parseExport(args[1:]); err == nil {
			err = export(ctx, opts, stdout)
		}
	} else {
		var opts options
		if opts, err = parseCollect(args); err == nil {
			err = collect(ctx, e, opts, stdout, stderr)
		}
	}
	var uerr usageError
	var yerr errYielded
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &yerr):
		fmt.Fprintf(stderr, "ohlcv: %s\n", oneLine(err))
		return exitHeld
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stderr, usage)
		return exitOK
	case errors.As(err, &uerr):
		if wantsJSON(args) {
			// A program reading -json gets its one line for a bad
			// command line too.
			_ = json.NewEncoder(stdout).Encode(summary{Status: "failed", Error: oneLine(err), Gaps: []gapInfo{}, Streams: []*streamStats{}})
		}
		fmt.Fprintf(stderr, "ohlcv: %s (see -h)\n", oneLine(err))
		return exitUsage
	default:
		fmt.Fprintf(stderr, "ohlcv: %s\n", oneLine(err))
		return exitError
	}
}

// wantsJSON reports whether a collect command line asks for -json, as
// the flag package would read it, so that even a bad one gets its line.
func wantsJSON(args []string) bool {
	if len(args) > 0 && args[0] == "export" {
		return false
	}
	for _, a := range args {
		switch a {
		case "-json", "--json", "-json=true", "--json=true", "-json=1", "--json=1":
			return true
		case "--":
			return false
		}
	}
	return false
}

// oneLine returns err's message on one line (some drivers' errors span
// several: pgx lists every address it dialed). The message needs no
// redaction here: the klines Source redacts the provider's text it puts in
// an error, and budget redacts the request URLs of failed attempts.
func oneLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "; ")
}

// usage is what -h prints.
const usage = `usage:
  ohlcv [flags]            collect closed candles (see the flags below)
  ohlcv export [-store DIR|postgres://...] [-pg-schema NAME] [-symbol S] [-interval I]
                           print open_time_ms,open,high,low,close,volume per candle, ascending

flags:
  -base-url URL       REST base of a Binance-compatible API (default: an embedded simulated exchange on loopback)
  -symbols A,B        symbols to collect (default BTCUSDT)
  -interval I         candle interval, e.g. 1m, 1h, 1d (default 1m)
  -since RFC3339      catch-up start for a stream's first run (default 24h before -until)
  -until RFC3339|now  catch-up end, exclusive (default now)
  -page N             candles per request, 1 to 1000 (default 1000)
  -store DIR|DSN      file store directory, or a PostgreSQL postgres:// URL or key=value DSN (default ./ohlcv-data)
  -pg-schema NAME     PostgreSQL schema (default forage)
  -max-requests N     request cap of the run, 0 = none (default 0)
  -timeout DUR        wall-clock budget of the run, 0 = none (default 0)
  -max-pause DUR      longest pause one provider answer may impose: a longer Retry-After or quota reset
                      is cut to it (default 1h); a pause past -timeout ends the run deferred, saying when
                      the provider may be called again
  -follow             keep collecting each new candle after catch-up, until SIGINT/SIGTERM
  -json               print the summary as one JSON line on stdout
  -v                  print one line per stream run, and the provider's pauses and rate cuts, on stderr
  -progress           show progress on stderr: a bar per stream on a terminal, else a line every 10s
                      (default true; -progress=false for none)
`
