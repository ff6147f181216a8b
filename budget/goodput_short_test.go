package budget_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/providertest"
)

// The short goodput table: what a user meets in a 30-second run, where the
// climb is not amortised over minutes. Each row serves providertest under
// testing/synctest, with and without a send-to-server jitter measured on a
// real network stack (see uplinkJitter: back-to-back requests sometimes
// arrive closer than they were sent), small and large limits, bursts from 1
// to 40 (small and large next to the rate), fixed windows with and without
// usage headers, mixed header families, and random 5xx noise. It is the
// fast stand-in for the real-time table of make goodput-http, and is held to
// that table's targets.

// shortRun is the simulated length of each row.
const shortRun = 30 * time.Second

// uplinkJitter is the send-to-server jitter of the jittered table: each
// request is held a uniform [0, 0.8ms) before the provider sees it. It is
// what the real-time benchmark measured on a quiet 2-core machine over
// loopback: a client pacing at 0.95 of a 17/s limit that allows no burst is
// never refused, at 0.9 of 200/s it is refused 5.6% (make goodput-http
// -clients rate0.9x,rate0.95x).
const uplinkJitter = 800 * time.Microsecond

// uplinkTail and uplinkTailShare are the tail of the busy-machine table: on
// top of uplinkJitter, 3% of the requests are held an exponential extra of
// mean 3 ms, as a 2-core machine running the provider, the collector and
// the benchmark at once held them (a third of a millisecond at the median,
// 1-3% over 3 ms, a few per thousand over 10 ms). There, a client told the
// limit and honouring every pause, pacing at 0.85, 0.9 and 0.95 of 17/s
// with no burst, got 82-85%, 71-84% and 62-66% of it (make goodput-http -clients
// told0.85x,told0.9x,told0.95x), and the rows of this table over five
// seeds came within a few points of the real-time ones measured the same
// day (17/s burst 1: 74% here, 70-78% there; the ban: 76%, 77-82%; 5%
// random 502 or 503: 73-74%, 69-75%), the noise-free bare 429 and 503
// and the 10% noise rows 4-10 points under theirs (81-85%, 87-92%;
// 70-76%, 76-82%).
const (
	uplinkTail      = 3 * time.Millisecond
	uplinkTailShare = 0.03
)

// sendJitter is how requests reach the provider in a run of the short
// table: as sent, with uplinkJitter, or with uplinkJitter and its tail.
type sendJitter int

const (
	noJitter sendJitter = iota
	uniformJitter
	tailJitter
)

// String names the table of each jitter.
func (j sendJitter) String() string {
	return [...]string{"30s, no jitter", "30s, send jitter", "30s, send jitter and its tail"}[j]
}

// shortRow is one row of the short table: a provider the client is not
// told about, and how many workers call it.
type shortRow struct {
	name    string
	cfg     providertest.Config
	rate    float64 // what the provider can serve, requests/s (after noise)
	workers int
	// target overrides the goodput target of the row (default 0.90).
	target float64
	// run overrides the simulated length of the row (default shortRun).
	run time.Duration
}

// shortRows returns the rows of the short table.
func shortRows() []shortRow {
	base := func(l providertest.Limit, a providertest.Answer) providertest.Config {
		return providertest.Config{Seed: 7, Limit: l, Answer: a, Latency: 3 * time.Millisecond, Jitter: 3 * time.Millisecond,
			Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}}
	}
	noisy := func(f providertest.Fault, share float64) providertest.Config {
		c := base(providertest.Limit{Rate: 17, Burst: 1}, providertest.Answer{})
		c.FaultRate, c.Faults = share, []providertest.Fault{f}
		return c
	}
	ietf := base(providertest.Limit{Count: 600, Window: 30 * time.Second}, providertest.Answer{})
	ietf.Headers = providertest.Headers{IETF: true}
	mixed := base(providertest.Limit{Count: 600, Window: 30 * time.Second}, providertest.Answer{})
	mixed.Headers = providertest.Headers{IETF: true, Binance: true}
	bucket := base(providertest.Limit{Rate: 17, Burst: 1}, providertest.Answer{})
	bucket.Headers = providertest.Headers{IETF: true}
	ban := base(providertest.Limit{Rate: 15, Burst: 1}, providertest.Answer{BanAfter: 5})
	halves := base(providertest.Limit{Rate: 40, Burst: 1}, providertest.Answer{})
	halves.Schedule = map[time.Duration]providertest.Limit{shortRun / 2: {Rate: 20, Burst: 1}}
	halves20 := base(providertest.Limit{Rate: 20, Burst: 1}, providertest.Answer{})
	halves20.Schedule = map[time.Duration]providertest.Limit{shortRun / 2: {Rate: 10, Burst: 1}}
	return []shortRow{
		{name: "gcra 17/s burst 1, 429+RA", cfg: base(providertest.Limit{Rate: 17, Burst: 1}, providertest.Answer{}), rate: 17, workers: 3},
		{name: "gcra 13/s burst 2, 429+RA", cfg: base(providertest.Limit{Rate: 13, Burst: 2}, providertest.Answer{}), rate: 13, workers: 3},
		{name: "gcra 50/s burst 10, 429+RA", cfg: base(providertest.Limit{Rate: 50, Burst: 10}, providertest.Answer{}), rate: 50, workers: 8},
		{name: "gcra 40/s burst 40, 429+RA", cfg: base(providertest.Limit{Rate: 40, Burst: 40}, providertest.Answer{}), rate: 40, workers: 8},
		{name: "gcra 100/s burst 30, 429+RA", cfg: base(providertest.Limit{Rate: 100, Burst: 30}, providertest.Answer{}), rate: 100, workers: 16},
		{name: "gcra 200/s burst 1, 429+RA", cfg: base(providertest.Limit{Rate: 200, Burst: 1}, providertest.Answer{}), rate: 200, workers: 8},
		{name: "fixed 600/30s, 429+RA", cfg: base(providertest.Limit{Count: 600, Window: 30 * time.Second}, providertest.Answer{}), rate: 20, workers: 3},
		{name: "fixed 600/30s, IETF headers", cfg: ietf, rate: 20, workers: 3, target: 0.98},
		{name: "fixed 600/30s, IETF+X-MBX", cfg: mixed, rate: 20, workers: 3, target: 0.98},
		{name: "gcra 17/s, IETF headers", cfg: bucket, rate: 17, workers: 3},
		{name: "gcra 17/s, bare 429", cfg: base(providertest.Limit{Rate: 17, Burst: 1}, providertest.Answer{NoRetryAfter: true}), rate: 17, workers: 3},
		{name: "gcra 17/s, 503", cfg: base(providertest.Limit{Rate: 17, Burst: 1}, providertest.Answer{Status: 503}), rate: 17, workers: 3},
		{name: "gcra 17/s, slow-down", cfg: base(providertest.Limit{Rate: 17, Burst: 1}, providertest.Answer{SlowDown: true}), rate: 17, workers: 3},
		{name: "gcra 15/s, ban after 5/min", cfg: ban, rate: 15, workers: 3},
		{name: "gcra 40/s halving to 20/s", cfg: halves, rate: 30, workers: 3},
		{name: "gcra 20/s halving to 10/s", cfg: halves20, rate: 15, workers: 3},
		{name: "17/s + 5% 502", cfg: noisy(http.StatusBadGateway, 0.05), rate: 17 * 0.95, workers: 3, target: 0.85},
		{name: "17/s + 10% 502", cfg: noisy(http.StatusBadGateway, 0.10), rate: 17 * 0.90, workers: 3, target: 0.85},
		{name: "17/s + 10% 500", cfg: noisy(http.StatusInternalServerError, 0.10), rate: 17 * 0.90, workers: 3, target: 0.85},
		{name: "17/s + 5% 503", cfg: noisy(http.StatusServiceUnavailable, 0.05), rate: 17 * 0.95, workers: 3, target: 0.85},
		{name: "17/s + 10% 503", cfg: noisy(http.StatusServiceUnavailable, 0.10), rate: 17 * 0.90, workers: 3, target: 0.85},
	}
}

// traceLogger logs to stderr at level, each record timed in seconds since
// it was made (in a synctest bubble: since the simulated run began).
func traceLogger(level slog.Level) *slog.Logger {
	t0 := time.Now()
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: func(g []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Float64("t", time.Since(t0).Seconds())
		}
		return a
	}}))
}

// shortResult is one row's outcome.
type shortResult struct {
	goodput, refused float64
	bans             int64
	t90              time.Duration // first second with >= 90% of the rate; -1 never
	learned          float64
}

// runShort drives one provider with the default Config from row.workers
// workers for shortRun of simulated time.
func runShort(t *testing.T, row shortRow, jitter sendJitter) shortResult {
	t.Helper()
	var res shortResult
	synctest.Test(t, func(t *testing.T) {
		cfg := row.cfg
		if jitter != noJitter {
			cfg.UplinkJitter = uplinkJitter
		}
		if jitter == tailJitter {
			cfg.UplinkTail, cfg.UplinkTailShare = uplinkTail, uplinkTailShare
		}
		srv, err := providertest.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rt := srv.Client().Transport
		var bcfg budget.Config
		if v := os.Getenv("SHORT_TRACE"); v != "" {
			lv := slog.LevelInfo
			if v == "debug" {
				lv = slog.LevelDebug
			}
			bcfg.Logger = traceLogger(lv)
		}
		p, err := budget.NewLocal("sim", bcfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var mu sync.Mutex
		var oks []time.Duration
		run := cmp.Or(row.run, shortRun)
		if d, err := time.ParseDuration(os.Getenv("SHORT_RUN")); err == nil && d > 0 {
			run = d // SHORT_RUN=2m: every row that long
		}
		ctx, cancel := context.WithTimeout(context.Background(), run)
		defer cancel()
		attempt := simAttempt(rt, func() {
			mu.Lock()
			oks = append(oks, time.Since(start))
			mu.Unlock()
		})
		workers := row.workers
		if n, _ := strconv.Atoi(os.Getenv("SHORT_WORKERS")); n > 0 {
			workers = n // SHORT_WORKERS=n: n workers on every row
		}
		drive(ctx, p, workers, attempt)
		st := srv.Stats()
		res = shortResult{
			goodput: float64(st.OK) / (row.rate * run.Seconds()),
			refused: float64(st.Throttled+st.Unavailable+st.Banned) / float64(max(st.Requests, 1)),
			bans:    st.Bans,
			t90:     firstSustained(oks, 0.9*row.rate),
			learned: p.Snapshot().Rate,
		}
	})
	return res
}

// runShortSeeds runs row once with its own seed, or, with SHORT_SEEDS=n in
// the environment, with n seeds, and returns the mean of each column (a
// row that never reached 90% of the limit in some run counts that run's
// t90 as the whole run): the spread between runs is several points, more
// than most changes of the control law move a row.
func runShortSeeds(t *testing.T, row shortRow, jitter sendJitter) shortResult {
	n, _ := strconv.Atoi(os.Getenv("SHORT_SEEDS"))
	if n <= 1 {
		return runShort(t, row, jitter)
	}
	var sum shortResult
	for i := range n {
		row := row
		row.cfg.Seed += uint64(i)
		r := runShort(t, row, jitter)
		if os.Getenv("SHORT_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "seed %d: goodput %.1f%% refused %.2f%%\n", row.cfg.Seed, 100*r.goodput, 100*r.refused)
		}
		if r.t90 < 0 {
			r.t90 = shortRun
		}
		sum.goodput += r.goodput / float64(n)
		sum.refused += r.refused / float64(n)
		sum.bans += r.bans
		sum.t90 += r.t90 / time.Duration(n)
		sum.learned += r.learned / float64(n)
	}
	return sum
}

// firstSustained returns the end of the first one-second window (t-1s, t]
// holding at least n of the sorted times, or -1.
func firstSustained(times []time.Duration, n float64) time.Duration {
	lo := 0
	for hi, t := range times {
		for times[lo] <= t-time.Second {
			lo++
		}
		if float64(hi-lo+1) >= n {
			return t
		}
	}
	return -1
}

// TestGoodputShort runs the short table three times: without send jitter,
// where every row is held to a regression floor (goodput >= 65% of the
// limit, at most 1.5% refused, never banned), and with it, without and
// with its tail (a busy machine), which are reported. The
// real-time targets (>= 90%, 98% with usage headers, 85% under noise; at
// most 1% refused; 90% of the limit within 3s) are those of make
// goodput-http; the table shows how far each row is from them. Run it with
// -v to see both tables; SHORT_ROW=<substring> runs matching rows only,
// SHORT_SEEDS=n averages n seeds per row, SHORT_WORKERS=n runs every row
// with n workers (1 for a lone stream), SHORT_RUN=5m runs every row that
// long (a halving row still halves at 15 s, and its goodput is then off),
// and SHORT_TRACE=1 logs every cut
// and pause to stderr (SHORT_TRACE=debug every rate change too).
func TestGoodputShort(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		t.Skip("a measurement, ten times slower under the race detector: make goodput runs it")
	}
	for _, jitter := range []sendJitter{noJitter, uniformJitter, tailJitter} {
		var b strings.Builder
		fmt.Fprintf(&b, "\n%-30s %8s %8s %5s %6s %8s %7s\n", jitter,
			"goodput", "refused", "bans", "t90", "learned", "target")
		for _, row := range shortRows() {
			if only := os.Getenv("SHORT_ROW"); only != "" && !strings.Contains(row.name, only) {
				continue
			}
			r := runShortSeeds(t, row, jitter)
			target := row.target
			if target == 0 {
				target = 0.90
			}
			met := r.goodput >= target && r.refused <= 0.01 && r.bans == 0 && r.t90 >= 0 && r.t90 <= 3*time.Second
			fmt.Fprintf(&b, "%-30s %7.1f%% %7.2f%% %5d %6.1f %8.1f %7s\n", row.name, 100*r.goodput, 100*r.refused, r.bans,
				r.t90.Seconds(), r.learned, map[bool]string{true: "met", false: "missed"}[met])
			if jitter == noJitter && (r.goodput < 0.65 || r.refused > 0.015 || r.bans > 0) {
				t.Errorf("no jitter, %s: goodput %.1f%%, refused %.2f%%, bans %d; want >= 65%%, <= 1.5%%, 0",
					row.name, 100*r.goodput, 100*r.refused, r.bans)
			}
		}
		t.Log(b.String())
	}
}

// TestNoiseNeverHoldsTheRateUnderHalf: a provider that answers 5% or 10%
// of requests with a random 503 on top of a limit it names with 429 is
// served at 60% of what it can serve or more over 30 s, and left at half
// its limit or more, whatever the seed, with send jitter. The first random
// 503 of slow start, before any 429, was read as load shedding at the top
// of the climb, and held the rate at a third of the limit for the rest of
// the run (2 seeds in 8: 34% and 37%).
func TestNoiseNeverHoldsTheRateUnderHalf(t *testing.T) {
	t.Parallel()
	for _, row := range shortRows() {
		if !strings.HasSuffix(row.name, "% 503") {
			continue
		}
		for seed := range uint64(8) {
			row := row
			row.cfg.Seed += seed
			if r := runShort(t, row, uniformJitter); r.goodput < 0.6 || r.learned < 17.0/2 {
				t.Errorf("%s, seed %d: goodput %.1f%%, learned %.1f/s; want >= 60%%, >= 8.5/s", row.name, row.cfg.Seed, 100*r.goodput, r.learned)
			}
		}
	}
}
