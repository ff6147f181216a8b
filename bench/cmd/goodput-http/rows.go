package main

import (
	"net/http"
	"time"

	"github.com/forage-go/forage/providertest"
)

// listed is when every symbol of the simulated exchange was listed: far
// enough back that no run catches up (200 req/s for 120 s at 100 one-minute
// candles a page is 4.6 years of one symbol; 2010 leaves 16).
var listed = time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC)

// symbols are the exchange's symbols; ohlcv-1 collects the first, ohlcv-3
// the first three, and the pg clients' processes one each. (A symbol's
// candles depend on its name and the seed only: adding one changes no
// other's.)
var symbols = []string{"BTCUSDT", "ETHUSDT", "BNBUSDT", "SOLUSDT", "XRPUSDT", "ADAUSDT", "DOGEUSDT", "TRXUSDT"}

// The provider's default latency on top of loopback (-latency, -jitter): a
// few milliseconds, as a nearby API answers.
const (
	defaultLatency = 3 * time.Millisecond
	defaultJitter  = 4 * time.Millisecond
)

// row is one provider policy: the true limit and how the provider answers,
// none of which the clients are told.
type row struct {
	// name labels the row.
	name string
	// limit is the true limit from the start.
	limit providertest.Limit
	// answer is how over-limit requests are answered.
	answer providertest.Answer
	// headers are the usage headers sent.
	headers providertest.Headers
	// faultRate is the share of admitted requests failed with one of faults:
	// noise, not a refusal.
	faultRate float64
	faults    []providertest.Fault
	// halves makes the limit halve at half the run.
	halves bool
	// long marks the rows measured at long durations too (see plan).
	long bool
	// shared marks the rows the pg clients run against (see plan); pgOnly
	// the rows only they run against.
	shared, pgOnly bool
	// solo runs the row's cells one at a time, after the others: at 200
	// requests/s a cell measures the machine's scheduling as much as the
	// client when three other cells share its two cores (one symbol: 40%
	// of the limit beside them, 58% alone), and a user runs one collector.
	solo bool
	// latency, when not zero, is the provider's own latency and jitter,
	// in place of -latency and -jitter (the rows drawn at random, -random).
	latency, jitter time.Duration
}

// rows returns every provider policy the benchmark measures, at limits
// forage is not told (13 to 200 requests/s).
func rows() []row {
	gcra := func(r float64, b int) providertest.Limit { return providertest.Limit{Rate: r, Burst: b} }
	window := providertest.Limit{Count: 600, Window: 30 * time.Second}
	noise := func(name string, rate float64, f providertest.Fault, long bool) row {
		return row{name: name, limit: gcra(17, 1), faultRate: rate, faults: []providertest.Fault{f}, long: long}
	}
	return []row{
		{name: "gcra 17/s burst 1, 429+retry-after", limit: gcra(17, 1), long: true, shared: true},
		{name: "gcra 13/s burst 2, 429+retry-after", limit: gcra(13, 2), long: true},
		{name: "gcra 50/s burst 10, 429+retry-after", limit: gcra(50, 10), shared: true},
		{name: "fixed window 600/30s, 429+retry-after", limit: window, long: true},
		{name: "fixed window 600/30s, IETF headers", limit: window, headers: providertest.Headers{IETF: true}, long: true},
		{name: "fixed window 600/30s, IETF + X-MBX-USED-WEIGHT-1M", limit: window, headers: providertest.Headers{IETF: true, Binance: true}, long: true},
		{name: "gcra 17/s burst 1, IETF headers (remaining 0, reset 1)", limit: gcra(17, 1), headers: providertest.Headers{IETF: true}},
		{name: "gcra 17/s, bare 429", limit: gcra(17, 1), answer: providertest.Answer{NoRetryAfter: true}},
		{name: "gcra 17/s, 503", limit: gcra(17, 1), answer: providertest.Answer{Status: 503}},
		{name: "gcra 17/s, slow-down", limit: gcra(17, 1), answer: providertest.Answer{SlowDown: true}},
		{name: "gcra 15/s, ban after 5 violations/min", limit: gcra(15, 1), answer: providertest.Answer{BanAfter: 5, BanWindow: time.Minute, BanFor: 2 * time.Minute}, long: true, shared: true},
		{name: "gcra 20/s halving to 10/s mid-run", limit: gcra(20, 1), halves: true, long: true},
		noise("gcra 17/s + 5% random 502", 0.05, http.StatusBadGateway, false),
		noise("gcra 17/s + 5% random 503", 0.05, http.StatusServiceUnavailable, false),
		noise("gcra 17/s + 10% random 502", 0.10, http.StatusBadGateway, false),
		noise("gcra 17/s + 10% random 503", 0.10, http.StatusServiceUnavailable, true),
		{name: "gcra 200/s burst 1 (fast provider)", limit: gcra(200, 1), long: true, solo: true},
		{name: "gcra 200/s burst 20 (fast provider)", limit: gcra(200, 20), long: true, solo: true},
		// For the pg clients, a window shorter than their run: 600/30s is
		// spent in the first second or two, after which every process
		// defers to the next window, past the run, and exits.
		{name: "fixed window 200/10s, 429+retry-after", limit: providertest.Limit{Count: 200, Window: 10 * time.Second}, shared: true, pgOnly: true},
	}
}

// rate returns the limit in force at offset t of a run of length run, in
// requests per second: a fixed window's count spread over its window.
func (r row) rate(t, run time.Duration) float64 {
	if r.halves && t >= run/2 {
		return perSec(r.half())
	}
	return perSec(r.limit)
}

// half is the limit in force from half the run of a row that halves: the
// rate, or a fixed window's count, halved.
func (r row) half() providertest.Limit {
	h := r.limit
	if h.Count > 0 {
		h.Count = max(h.Count/2, 1)
	} else {
		h.Rate /= 2
	}
	return h
}

// perSec returns l in requests per second: a fixed window's count spread
// over its window.
func perSec(l providertest.Limit) float64 {
	if l.Count > 0 {
		return float64(l.Count) / l.Window.Seconds()
	}
	return l.Rate
}

// servable is what the provider could serve over a run: the limit
// integrated over it (a fixed window's count pro-rated to the run), less the
// share its random faults take from admitted requests.
func (r row) servable(run time.Duration) float64 {
	n := r.rate(0, run) * run.Seconds()
	if r.halves {
		n = (r.rate(0, run) + r.rate(run, run)) * run.Seconds() / 2
	}
	return n * (1 - r.faultRate)
}

// fixedWindow reports whether the row's limit is a fixed window.
func (r row) fixedWindow() bool { return r.limit.Count > 0 }

// config returns the server's configuration for a run of length run. now is
// the server's clock; seed seeds its draws; each answer takes latency and
// up to jitter more, unless the row has a latency of its own.
func (r row) config(run time.Duration, now func() time.Time, seed uint64, latency, jitter time.Duration) providertest.Config {
	if r.latency > 0 {
		latency, jitter = r.latency, r.jitter
	}
	cfg := providertest.Config{
		Now: now, Seed: seed, Limit: r.limit, Answer: r.answer, Headers: r.headers,
		FaultRate: r.faultRate, Faults: r.faults, Latency: latency, Jitter: jitter,
	}
	for _, s := range symbols {
		cfg.Symbols = append(cfg.Symbols, providertest.Symbol{Name: s, Listed: listed})
	}
	if r.halves {
		cfg.Schedule = map[time.Duration]providertest.Limit{run / 2: r.half()}
	}
	return cfg
}
