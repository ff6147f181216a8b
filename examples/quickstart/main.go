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
	"net/http/httptest"
	"os"
	"strconv"
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

// run is the whole host: an exchange to collect from, a file store, one
// budget.Provider per exchange, and one declared stream per symbol, run by
// the scheduler until every backfill reached the listing and the head has
// been followed for a few more seconds.
func run() error {
	start := time.Now()
	listed := start.Add(-days * 24 * time.Hour).Truncate(time.Minute)
	exchange, url, stop, err := simulatedExchange(listed)
	if err != nil {
		return err
	}
	defer stop()
	dir, err := os.MkdirTemp("", "forage-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(os.Stderr, "exchange on %s (limit %d req/s, not told); data in %s (removed at exit)\n", url, trueLimit, dir)

	store, err := checkpoint.OpenFileStore(dir+"/state", checkpoint.Config{})
	if err != nil {
		return err
	}
	defer store.Close()
	var t tally
	reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{Breaker: breaker.Config{OnTransition: t.transition}}})
	if err != nil {
		return err
	}
	sched, err := schedule.New(schedule.Config{MaxRunning: 8, MaxPerProvider: 6, Budget: reg, Checkpoints: store}, schedule.NewMemoryJobStore(), nil)
	if err != nil {
		return err
	}

	// One stream per symbol: its history backfilled (catch-up, up to the
	// last candle closed when the collector started) when the exchange has
	// room, its head
	// followed every few seconds (steady state, from that moment on),
	// never both at once. The checkpoints and candles are files, in a
	// directory made for this run and removed at its end; given a
	// directory of its own, a second run would resume where this one
	// committed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{}
	for _, symbol := range symbols {
		sink, err := klines.OpenFileSink(dir, symbol, "1m")
		if err != nil {
			return err
		}
		defer sink.Close()
		backfill, head, err := klines.Sources(&klines.Source{Client: client, Base: url, Symbol: symbol, Interval: "1m", Page: page, From: listed}, start.Truncate(time.Minute))
		if err != nil {
			return err
		}
		err = schedule.AddStream(ctx, sched, schedule.Stream[klines.Candle]{Name: "sim/" + symbol + "/1m", Provider: "sim-exchange",
			Backfill: backfill, Incremental: head, Every: 5 * time.Second, Sink: t.counted(sink, start), OnRun: t.run})
		if err != nil {
			return err
		}
	}
	provider, err := reg.Get("sim-exchange")
	if err != nil {
		return err
	}
	go t.progress(ctx, start, provider)
	ran := make(chan error, 1)
	go func() { ran <- sched.Run(ctx) }()

	// Every backfill caught up, or a backstop: the run takes about 30 s.
	wait, stopWaiting := context.WithTimeout(ctx, 3*time.Minute)
	defer stopWaiting()
	if err := sched.Backfilled(wait); err != nil {
		return err
	}
	caughtUp, okAtBackfill := time.Now(), exchange.Stats().OK
	time.Sleep(6 * time.Second) // the head, followed a little longer
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		return err
	}
	if err := t.report(start, caughtUp, okAtBackfill, exchange.Stats(), provider.Snapshot(), store); err != nil {
		return err
	}
	return t.verify(dir, listed, start.Truncate(time.Minute))
}

// verify reads every symbol's candles back from the files in dir and checks
// what the collector promises: every minute from listed on, up to the last
// one closed before boundary (the backfill's end; the head's candles
// follow), stored once, and the runs delivered each once (the files hold as
// many distinct minutes as the runs reported). It prints one line, or
// returns an error naming the first symbol that breaks the promise.
func (t *tally) verify(dir string, listed, boundary time.Time) error {
	stored := int64(0)
	var last time.Time
	for _, symbol := range symbols {
		lines, err := klines.Export(dir, symbol, "1m") // ascending, one per minute stored
		if err != nil {
			return err
		}
		want := listed
		for _, line := range lines {
			first, _, _ := strings.Cut(line, ",")
			ms, err := strconv.ParseInt(first, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: a record read back has no open time: %w", symbol, err)
			}
			if at := time.UnixMilli(ms).UTC(); !at.Equal(want) {
				return fmt.Errorf("%s: no candle at %s (the next stored is at %s): a hole", symbol, want.Format(time.DateTime), at.Format(time.DateTime))
			}
			want = want.Add(time.Minute)
		}
		if want.Before(boundary) {
			return fmt.Errorf("%s: the last candle stored is %s; want %s or later", symbol, want.Add(-time.Minute).Format(time.DateTime), boundary.Add(-time.Minute).Format(time.DateTime))
		}
		stored += int64(len(lines))
		last = want.Add(-time.Minute)
	}
	if runs := t.backfilled.Load() + t.head.Load(); runs != stored {
		return fmt.Errorf("the runs reported %d candles, the files hold %d", runs, stored)
	}
	fmt.Printf("%-28s %d candles, every minute from %s to %s, each once\n", "read back from the files", stored,
		listed.Format("01-02 15:04"), last.Format("01-02 15:04"))
	return nil
}

// simulatedExchange starts a Binance-compatible exchange on loopback that
// lists every symbol since listed, at a limit the collector is not told.
func simulatedExchange(listed time.Time) (*providertest.Server, string, func(), error) {
	var syms []providertest.Symbol
	for _, s := range symbols {
		syms = append(syms, providertest.Symbol{Name: s, Listed: listed})
	}
	exchange, err := providertest.New(providertest.Config{Symbols: syms, Limit: providertest.Limit{Rate: trueLimit, Burst: 1}})
	if err != nil {
		return nil, "", nil, err
	}
	lb := httptest.NewServer(exchange)
	return exchange, lb.URL, lb.Close, nil
}

// tally counts what the streams made durable, from each run's report, and
// the breaker's transitions.
type tally struct {
	backfilled, head, slices atomic.Int64 // candles made durable by backfill and head runs, and slices
	written                  atomic.Int64 // candles of the history made durable so far, page by page (the progress line's)
	mu                       sync.Mutex
	transitions              []string
}

// counted is sink, counting the candles of the history (those open before
// start) it makes durable, for the progress line: a run reports its
// records only when it ends, every 5 s.
func (t *tally) counted(sink slice.Sink[klines.Candle], start time.Time) slice.Sink[klines.Candle] {
	return slice.SinkFunc[klines.Candle](func(ctx context.Context, p slice.Page[klines.Candle]) error {
		if err := sink.Write(ctx, p); err != nil {
			return err
		}
		for _, c := range p.Records {
			if c.OpenTime.Before(start) {
				t.written.Add(1)
			}
		}
		return nil
	})
}

// run is every stream's OnRun hook.
func (t *tally) run(job schedule.Job, rep slice.Report, _ error) {
	if job.Kind == schedule.KindBackfill {
		t.backfilled.Add(int64(rep.Records))
	} else {
		t.head.Add(int64(rep.Records))
	}
	t.slices.Add(int64(rep.Slices))
}

// transition is the breaker's OnTransition hook.
func (t *tally) transition(tr breaker.Transition) {
	t.mu.Lock()
	t.transitions = append(t.transitions, tr.String())
	t.mu.Unlock()
}

// report prints the summary: goodput against the exchange's true limit,
// refusals, the unresolved gap records (none may be left) and the breaker's
// transitions.
func (t *tally) report(start, backfilled time.Time, okAtBackfill int64, st providertest.Stats, snap budget.Snapshot, store *checkpoint.LocalStore) error {
	refused := st.Throttled + st.Unavailable + st.Banned
	catchUp := backfilled.Sub(start).Seconds()
	fmt.Printf("\ncollected %d candles of %d symbols (%d of history, %d new at the head) in %d slices, %.1fs\n\n",
		t.backfilled.Load()+t.head.Load(), len(symbols), t.backfilled.Load(), t.head.Load(), t.slices.Load(), time.Since(start).Seconds())
	fmt.Printf("%-28s %d\n", "requests sent", st.Requests)
	fmt.Printf("%-28s %d (%.2f%%)\n", "refused by the exchange", refused, 100*float64(refused)/float64(max(st.Requests, 1)))
	fmt.Printf("%-28s %.1f req/s of a true %d (%.0f%%)\n", "learned rate", snap.Rate, trueLimit, 100*snap.Rate/trueLimit)
	fmt.Printf("%-28s %.1f req/s over %.1fs (%.0f%% of the true limit, the climb from 4 req/s included)\n",
		"goodput during the backfill", float64(okAtBackfill)/catchUp, catchUp, 100*float64(okAtBackfill)/catchUp/trueLimit)
	// Every planned stop (a run's turn over, a 429) left a gap record at
	// its cursor, resolved by the run that went past it.
	open, err := store.ListGaps(context.Background(), checkpoint.GapQuery{})
	if err != nil {
		return err
	}
	fmt.Printf("%-28s %d\n", "gaps left unresolved", len(open))
	for _, g := range open {
		fmt.Printf("  %s: %s\n", g.Key, g.Reason)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Printf("%-28s %d\n", "breaker transitions", len(t.transitions))
	for _, tr := range t.transitions {
		fmt.Printf("  %s\n", tr)
	}
	return nil
}

// progress prints one live line on stderr until ctx ends: rewritten in
// place on a terminal, a plain line every few seconds otherwise.
func (t *tally) progress(ctx context.Context, start time.Time, p budget.Provider) {
	fi, _ := os.Stderr.Stat()
	tty := fi != nil && fi.Mode()&os.ModeCharDevice != 0
	every := 3 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	total := int64(len(symbols) * days * 24 * 60)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(os.Stderr)
			}
			return
		case <-tick.C:
		}
		s := p.Snapshot()
		n := min(t.written.Load(), total) // a page replayed after an error counts twice
		eta := "-"
		if el := time.Since(start); n > 0 && n < total {
			eta = (time.Duration(float64(el) * float64(total-n) / float64(n))).Round(time.Second).String()
		}
		line := fmt.Sprintf("rate %5.1f/s (learned ceiling %5.1f)  requests %5d  throttled %3d  history %6d/%d  new %3d  eta %s",
			s.Rate, s.Ceiling, s.Requests, s.Throttled, n, total, t.head.Load(), eta)
		if tty {
			fmt.Fprintf(os.Stderr, "\r%s%s", line, strings.Repeat(" ", 4))
		} else {
			fmt.Fprintln(os.Stderr, line)
		}
	}
}
