package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/slice"
)

// embeddedSymbols are the symbols the embedded exchange lists, each with
// 30 days of history; any other symbol is "Invalid symbol.".
var embeddedSymbols = []string{"BTCUSDT", "ETHUSDT", "BNBUSDT", "SOLUSDT", "XRPUSDT"}

// embeddedLimit is the embedded exchange's true limit, in requests per
// second (burst 5), answered with 429 and Retry-After. The collector is not
// told: its provider discovers it.
const embeddedLimit = 20

// maxStoreRetries is how many times in a row a stream is run again after
// its store failed with an error that may pass (see backend.transient);
// storeRetryWait is the first wait, doubled each time (0.5 s to 8 s, 15.5 s
// in all).
const (
	maxStoreRetries = 5
	storeRetryWait  = 500 * time.Millisecond
)

// longWait is the shortest wait after source pressure that is reported on
// stderr.
const longWait = 5 * time.Second

// pressureWait is how long a stream waits after source pressure that came
// without a time to resume at.
const pressureWait = time.Second

// collector runs every stream of one collect command and keeps the tally.
type collector struct {
	o        options
	base     string
	client   *http.Client
	be       backend
	provider budget.Provider
	run      *budget.Run
	verbose  io.Writer // nil unless -v
	stderr   io.Writer

	mu      sync.Mutex
	streams []*streamStats // in the order they started
}

// collect runs the collect command: it reaches the exchange, opens the
// store, runs every symbol's streams, and prints the summary.
func collect(ctx context.Context, e env, o options, stdout, stderr io.Writer) error {
	start := time.Now()
	c := &collector{o: o, base: o.baseURL, client: &http.Client{}, stderr: stderr}
	key := "sim"
	if c.base != "" {
		u, _ := url.Parse(c.base) // validated by parseCollect
		key = u.Host
	}
	be, err := openBackend(ctx, o.store, o.schema)
	if err != nil {
		locked := errors.Is(err, checkpoint.ErrLocked)
		if uerr := (usageError{}); o.json && !errors.As(err, &uerr) {
			// A program reading -json gets its one line even now (a bad
			// flag's line is run's).
			s := failedToStart(o, key, time.Since(start), err)
			if locked {
				s.Status = "yielded"
			}
			_ = s.print(stdout, true)
		}
		if locked {
			// Another live process holds the whole store: nothing done,
			// and not a failure (exit 3, as for a stream held elsewhere).
			return errYielded{[]string{"any stream: " + oneLine(err)}}
		}
		return err
	}
	defer be.Close()
	c.be = be
	if c.base == "" {
		srv, err := providertest.New(embeddedConfig())
		if err != nil {
			return err
		}
		var stop func()
		if c.base, c.client, stop, err = e.serve(srv); err != nil {
			return err
		}
		defer stop()
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{
		NewPacer: be.newPacer(), Pauses: be.pauses(),
		// A pause longer than longWait comes back to loop, which says so.
		Defaults: budget.Config{MaxPause: o.maxPause, MaxWait: longWait},
	})
	if err != nil {
		return err
	}
	if c.provider, err = reg.Get(key); err != nil {
		return err
	}
	env := budget.Envelope{MaxRequests: o.maxRequests}
	if o.timeout > 0 {
		env.Deadline = start.Add(o.timeout)
	}
	if c.run, err = budget.NewRun(env); err != nil {
		return err
	}
	if o.verbose {
		c.verbose = stderr
	}
	err = c.all(ctx)
	sum := c.summary(time.Since(start), ctx.Err() != nil, err)
	if perr := sum.print(stdout, o.json); err == nil {
		err = perr
	}
	if err == nil && sum.Status == "yielded" {
		err = errYielded{sum.held()}
	}
	return err
}

// errYielded ends a run in which a stream was held by another live
// process: nothing was done for it. Exit status 3.
type errYielded struct{ held []string }

func (e errYielded) Error() string {
	return "nothing done for " + strings.Join(e.held, "; ")
}

// embeddedConfig configures the embedded exchange.
func embeddedConfig() providertest.Config {
	syms := make([]providertest.Symbol, len(embeddedSymbols))
	for i, s := range embeddedSymbols {
		syms[i] = providertest.Symbol{Name: s}
	}
	return providertest.Config{Symbols: syms, Limit: providertest.RateLimit(embeddedLimit, 5), Answer: providertest.Answer429}
}

// all runs every symbol at once and returns the first failure; a failure
// stops the other symbols too.
func (c *collector) all(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(c.o.symbols))
	var wg sync.WaitGroup
	for i, sym := range c.o.symbols {
		wg.Go(func() {
			if errs[i] = c.symbol(ctx, sym); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// symbol runs one symbol: catch-up over [since, until), then, with
// -follow, steady-state from until on.
func (c *collector) symbol(ctx context.Context, sym string) error {
	catchUp := c.source(sym)
	catchUp.Until = func() time.Time { return c.o.until }
	more, err := c.loop(ctx, sym, checkpoint.CatchUp, catchUp)
	if err != nil || !more || !c.o.follow {
		return err
	}
	steady := c.source(sym)
	steady.From = c.o.until
	_, err = c.loop(ctx, sym, checkpoint.SteadyState, steady)
	return err
}

// source returns the klines source of sym.
func (c *collector) source(sym string) *klines.Source {
	return &klines.Source{Client: c.client, Base: c.base, Symbol: sym, Interval: c.o.interval, Page: c.o.page, From: c.o.since}
}

// loop runs one stream until it is caught up (a catch-up stream), or until
// the run's budget is spent or ctx ends (a steady-state stream, which runs
// again after every candle closes). It waits out source pressure and runs
// again. more is false when the whole run must stop: the budget is spent
// or ctx ended.
func (c *collector) loop(ctx context.Context, sym string, mode checkpoint.Mode, src *klines.Source) (more bool, err error) {
	if err := src.Init(); err != nil {
		return false, err
	}
	cfg := slice.Config[klines.Candle]{
		Stream: "ohlcv/" + sym + "/" + c.o.interval, Mode: mode,
		Provider: c.provider, Source: src,
	}
	if err := c.be.stream(&cfg, sym, c.o.interval); err != nil { // Store, and Sink or TxSink
		return false, err
	}
	r, err := slice.New(cfg)
	if err != nil {
		return false, err
	}
	st := c.stats(sym, mode)
	blips := 0 // store failures in a row
	for {
		rep, err := r.Run(ctx, c.run)
		c.record(st, rep, err)
		switch {
		case ctx.Err() != nil:
			return false, nil // interrupted: the checkpoint is the last commit
		case err != nil && c.be.transient(err) && blips < maxStoreRetries:
			// The store went away for a moment (PostgreSQL restarting, a
			// dropped connection): run again from the checkpoint, which
			// is the last commit, after a short wait.
			blips++
			wait := storeRetryWait << (blips - 1)
			fmt.Fprintf(c.stderr, "ohlcv: %s %s %s: store unavailable (%s); run again in %s (%d of %d)\n",
				sym, c.o.interval, mode, oneLine(err), wait, blips, maxStoreRetries)
			if !sleepUntil(ctx, time.Now().Add(wait)) {
				return false, nil
			}
			continue
		case err != nil:
			return false, streamError(sym, c.o.interval, mode, err)
		case rep.Reason.Exhausted():
			return false, nil // the gap is recorded; the budget ends every stream
		case rep.Yielded:
			// Another live process holds the stream: this run did nothing
			// for it, and says so (the summary's status "yielded", exit 3).
			return false, nil
		}
		blips = 0
		now := time.Now()
		var wake time.Time
		switch {
		case rep.Reason.SourcePressure():
			wake = rep.Until
			if !wake.After(now) {
				wake = now.Add(pressureWait)
			}
		case mode == checkpoint.CatchUp:
			return true, nil // caught up (or yielded to another process)
		default:
			wake = c.nextClose(now)
		}
		if d, ok := c.run.Deadline(); ok && !wake.Before(d) {
			return false, nil // the budget ends before the next chance to run
		}
		if rep.Reason.SourcePressure() && wake.Sub(now) >= longWait {
			// Never silent: a provider's pause may be long.
			fmt.Fprintf(c.stderr, "ohlcv: %s %s %s: the provider pushed back (%s); waiting until %s (%s)\n",
				sym, c.o.interval, mode, rep.Reason, wake.UTC().Format(time.RFC3339), wake.Sub(now).Round(time.Second))
		}
		if !sleepUntil(ctx, wake) {
			return false, nil
		}
	}
}

// nextClose returns when the candle forming at now will have closed, plus
// a moment for the provider to settle it.
func (c *collector) nextClose(now time.Time) time.Time {
	settle := min(c.o.step/10, 2*time.Second)
	return now.Truncate(c.o.step).Add(c.o.step + settle)
}

// sleepUntil waits until t, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// streamError names the stream a run failed on. A permanent provider error
// is reduced to the provider's own message (e.g. "Invalid symbol.").
func streamError(sym, interval string, mode checkpoint.Mode, err error) error {
	var be *budget.Error
	if errors.As(err, &be) && be.Reason == forage.ReasonPermanent && be.Err != nil {
		err = be.Err
	}
	return fmt.Errorf("%s %s %s: %w", sym, interval, mode, err)
}
