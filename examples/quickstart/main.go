// Command quickstart shows forage doing its whole job on the embedded
// default, with no flags and no setup.
//
// It starts a simulated Binance-compatible exchange on loopback with a rate
// limit the collector is not told, then collects three symbols: a catch-up
// backfill of a few days of 1m candles and steady-state incremental runs,
// scheduled by schedule (fresh data first, history when there is room), each
// stream moved forward one commit-gated slice at a time into a file store in
// a temporary directory. One budget.Provider for the exchange
// discovers the limit from a conservative start. While it runs, a progress
// line on stderr shows the learned rate and what was collected; at the end a
// summary table compares goodput with the exchange's true limit and lists
// refused requests, gaps and breaker transitions.
//
// Run it with: go run ./examples/quickstart (about 30 seconds, no flags).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

const (
	trueLimit = 25 // requests/s the exchange allows; the collector is not told
	days      = 7  // history to backfill per symbol
	page      = 80
)

var symbols = []string{"BTCUSDT", "ETHUSDT", "SOLUSDT"}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	listed := time.Now().Add(-days * 24 * time.Hour).Truncate(time.Minute)
	var syms []providertest.Symbol
	for _, s := range symbols {
		syms = append(syms, providertest.Symbol{Name: s, Listed: listed})
	}
	exchange, err := providertest.New(providertest.Config{Symbols: syms, Limit: providertest.RateLimit(trueLimit, 1), Answer: providertest.Answer429})
	if err != nil {
		return err
	}
	lb, err := exchange.Listen()
	if err != nil {
		return err
	}
	defer lb.Close()

	dir, err := os.MkdirTemp("", "forage-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := checkpoint.OpenFileStore(dir+"/state", checkpoint.Config{})
	if err != nil {
		return err
	}
	defer store.Close()

	var transitions []string
	var tmu sync.Mutex
	reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{
		Breaker: breaker.Config{OnTransition: func(t breaker.Transition) {
			tmu.Lock()
			transitions = append(transitions, t.String())
			tmu.Unlock()
		}},
	}})
	if err != nil {
		return err
	}
	provider, err := reg.Get("sim-exchange") // for the progress line and the summary
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 10 * time.Second}

	fmt.Fprintf(os.Stderr, "exchange on %s (limit %d req/s, not told); data in %s\n", lb.URL, trueLimit, dir)
	start := time.Now()
	var candles, slices atomic.Int64
	done := make(chan struct{})
	go progress(done, start, provider, &candles, &slices)

	// The scheduler runs the streams: one per symbol, its history
	// backfilled (catch-up, up to the moment the collector started) when
	// the exchange has room, its head followed every few seconds (steady
	// state, from that moment on), never both at once. The checkpoints and
	// candles are files: a second run resumes where this one committed.
	sched, err := schedule.New(schedule.Config{MaxRunning: 8, MaxPerProvider: 6, Budget: reg, Checkpoints: store}, schedule.NewMemoryJobStore(), nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, symbol := range symbols {
		sink, err := klines.OpenFileSink(dir, symbol, "1m")
		if err != nil {
			return err
		}
		defer sink.Close()
		backfill, head, err := klines.Sources(&klines.Source{Client: client, Base: lb.URL, Symbol: symbol, Interval: "1m", Page: page, From: listed}, start)
		if err != nil {
			return err
		}
		err = schedule.AddStream(ctx, sched, schedule.Stream[klines.Candle]{
			Name: "sim/" + symbol + "/1m", Provider: "sim-exchange", Backfill: backfill, Incremental: head,
			Every: 5 * time.Second, Sink: counting{sink, &candles, &slices},
		})
		if err != nil {
			return err
		}
	}
	schedErr := make(chan error, 1)
	go func() { schedErr <- sched.Run(ctx) }()
	// Stop once every backfill reached the listing and the head has run a
	// few more cycles.
	var backfilled time.Time
	var okAtBackfill int64
	giveUp := time.Now().Add(3 * time.Minute) // a backstop: the run takes about 30s
	for ; ; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(giveUp) {
			return fmt.Errorf("quickstart: backfills not done after 3 minutes: %s", jobStates(ctx, sched))
		}
		jobs, err := sched.Jobs(ctx, schedule.Query{Kind: schedule.KindBackfill})
		if err != nil {
			return err
		}
		all := true
		for _, j := range jobs {
			all = all && j.State == schedule.StateSuccess
		}
		if all && backfilled.IsZero() {
			backfilled, okAtBackfill = time.Now(), exchange.Stats().OK
		}
		if !backfilled.IsZero() && time.Since(backfilled) > 6*time.Second {
			break
		}
	}
	cancel()
	if err := <-schedErr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	close(done)

	elapsed := time.Since(start)
	snap := provider.Snapshot()
	st := exchange.Stats()
	fmt.Printf("\ncollected %d candles of %d symbols in %d slices, %.1fs\n\n", candles.Load(), len(symbols), slices.Load(), elapsed.Seconds())
	fmt.Printf("%-28s %s\n", "requests sent", fmt.Sprint(st.Requests))
	fmt.Printf("%-28s %d (%.2f%%)\n", "refused by the exchange", st.Throttled+st.Unavailable+st.Banned, 100*float64(st.Throttled+st.Unavailable+st.Banned)/float64(max(st.Requests, 1)))
	fmt.Printf("%-28s %.1f req/s of a true %d (%.0f%%)\n", "learned rate", snap.Rate, trueLimit, 100*snap.Rate/trueLimit)
	catchUp := backfilled.Sub(start).Seconds()
	fmt.Printf("%-28s %.1f req/s over %.1fs (%.0f%% of the true limit, the climb from 4 req/s included)\n",
		"goodput during the backfill", float64(okAtBackfill)/catchUp, catchUp, 100*float64(okAtBackfill)/catchUp/trueLimit)
	// Every planned stop (a run's turn over, a 429) left a gap record at
	// its cursor, resolved by the run that went past it: none may be left.
	open, err := store.ListGaps(context.Background(), checkpoint.GapQuery{})
	if err != nil {
		return err
	}
	fmt.Printf("%-28s %d\n", "gaps left unresolved", len(open))
	for _, g := range open {
		fmt.Printf("  %s: %s\n", g.Key, g.Reason)
	}
	fmt.Printf("%-28s %d\n", "breaker transitions", len(transitions))
	for _, t := range transitions {
		fmt.Printf("  %s\n", t)
	}
	return nil
}

// counting is a Sink that counts the slices and candles it makes durable.
type counting struct {
	*klines.FileSink
	n, slices *atomic.Int64
}

func (c counting) Write(ctx context.Context, p slice.Page[klines.Candle]) error {
	if err := c.FileSink.Write(ctx, p); err != nil {
		return err
	}
	c.n.Add(int64(len(p.Records)))
	c.slices.Add(1)
	return nil
}

// progress prints one live line on stderr until done: rewritten in place on
// a terminal, a plain line every few seconds otherwise.
func progress(done <-chan struct{}, start time.Time, p budget.Provider, candles, slices *atomic.Int64) {
	fi, _ := os.Stderr.Stat()
	tty := fi != nil && fi.Mode()&os.ModeCharDevice != 0
	every := 3 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	total := int64(len(symbols) * days * 24 * 60)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			if tty {
				fmt.Fprintln(os.Stderr)
			}
			return
		case <-t.C:
		}
		s := p.Snapshot()
		n := candles.Load()
		eta := "-"
		if el := time.Since(start); n > 0 && n < total {
			eta = (time.Duration(float64(el) * float64(total-n) / float64(n))).Round(time.Second).String()
		}
		line := fmt.Sprintf("rate %5.1f/s (learned ceiling %5.1f)  requests %5d  throttled %3d  candles %6d/%d  slices %4d  eta %s",
			s.Rate, s.Ceiling, s.Requests, s.Throttled, n, total, slices.Load(), eta)
		if tty {
			fmt.Fprintf(os.Stderr, "\r%s%s", line, strings.Repeat(" ", 4))
		} else {
			fmt.Fprintln(os.Stderr, line)
		}
	}
}

// jobStates describes every job's state and last error, for a run that did
// not finish in time.
func jobStates(ctx context.Context, s *schedule.Scheduler) string {
	jobs, err := s.Jobs(ctx, schedule.Query{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "%s %s %s (last error: %q); ", j.Stream, j.Kind, j.State, j.Stats.LastError)
	}
	return b.String()
}
