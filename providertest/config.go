package providertest

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/forage-go/forage/internal/cfgerr"
)

// ErrInvalidConfig is wrapped by every error [New] and [Server.SetLimit]
// return for a bad configuration.
var ErrInvalidConfig = errors.New("providertest: invalid config")

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("providertest", ErrInvalidConfig)

// defaultHistory is how long before the server's start (truncated to UTC
// midnight) a [Symbol] with a zero Listed time was listed.
const defaultHistory = 30 * 24 * time.Hour

// Config configures a [Server]. The zero Config is valid: three symbols with
// 30 days of candles, no limit, no faults, no latency, the real clock.
type Config struct {
	// Now is the clock. Defaults to time.Now, which testing/synctest fakes
	// inside a bubble. Latency and slow-down are waited out on the runtime's
	// timers (fake inside a bubble), not on Now, so a custom Now is meant for
	// runs without them.
	Now func() time.Time

	// Seed seeds the candle values, the latency jitter and the fault draws.
	// Every value is valid; the same seed and the same sequence of requests
	// give the same responses. Defaults to 0.
	Seed uint64

	// Symbols lists the tradable symbols in exchangeInfo order. Defaults to
	// BTCUSDT, ETHUSDT and BNBUSDT with zero Listed times.
	Symbols []Symbol

	// Limit is the true limit in force from the start. Defaults to none:
	// every request is admitted.
	Limit Limit

	// Schedule changes the true limit mid-run: from each offset past the
	// server's start (the clock reading in [New]), the limit it maps to is
	// in force. Offsets must be >= 0. A change takes effect at the first
	// request or Stats call at or after its time. Defaults to no changes.
	Schedule map[time.Duration]Limit

	// Answer is how over-limit requests are answered (see [Answer]): a
	// refusal, a ban after repeated refusals, or a slow-down. Defaults to
	// 429 with Retry-After, never banning.
	Answer Answer

	// Weight is the cost of one request to path against the limit; Binance
	// spot's weighs /api/v3/klines 2, /api/v3/exchangeInfo 20 and every
	// other path 1. Results below zero count as zero. Defaults to 1 for
	// every path.
	Weight func(path string) int

	// Headers selects the usage headers sent with every response the limit
	// policy saw. Defaults to none.
	Headers Headers

	// FaultRate is the probability, in [0, 1], that an admitted request fails
	// with one of Faults instead of being served. Defaults to 0.
	FaultRate float64

	// Faults are the kinds drawn from (uniformly) when a fault is injected:
	// HTTP statuses in [500, 599] and [FaultReset]. Defaults to 500, 502,
	// 504 and FaultReset; a 503 is drawn only when listed, since a 503 is
	// also how [Answer.Status] 503 refuses.
	Faults []Fault

	// Latency is added to every response. Must be >= 0. Defaults to 0.
	Latency time.Duration

	// Jitter adds a uniform random [0, Jitter) to every response's latency.
	// Must be >= 0. Defaults to 0.
	Jitter time.Duration

	// Uplink delays every request on its way to the server: it is waited out
	// before the ban, the limit and the fault draw see the request, so the
	// server judges it at its arrival, not at its sending. Requests sent back
	// to back at exactly the limit's interval then arrive jittered, as they
	// do through a real network stack, when UplinkJitter is set. A request
	// whose context ends during the uplink never reaches the server (it is
	// not counted). Applies to [Server.Client] and to a listener serving
	// the Server alike (over loopback it adds to the real stack's delay).
	// Must be >= 0. Defaults to 0.
	Uplink time.Duration

	// UplinkJitter adds a uniform random [0, UplinkJitter) to every request's
	// Uplink delay. Must be >= 0. Defaults to 0: no jitter, and no random
	// draw, so the responses of a seed are those of a Config without it.
	UplinkJitter time.Duration

	// UplinkTail adds to a share UplinkTailShare of requests, drawn at
	// random, an extra uplink delay drawn from an exponential distribution
	// of mean UplinkTail: the rare long holds a busy machine's scheduler
	// and network stack give a request between its sending and its
	// arrival. A uniform UplinkJitter misses them: over loopback on a
	// 2-core machine, requests reach the server a third of a millisecond
	// after they are sent at the median, but 1-3% of them 3-10 ms late and
	// a few per thousand 10-30 ms late, and against a limit that allows no
	// burst each such hold is a refusal for the request sent after it,
	// even when the client paces under the limit (a client told the
	// limit, pacing at 0.9 of it, was refused 0.5-1.9%; at 0.95, 3%).
	// About 3% at a mean of 3 ms matches that machine. Must be >= 0.
	// Defaults to 0: no tail, and no random draw.
	UplinkTail time.Duration

	// UplinkTailShare is the share of requests UplinkTail holds, in [0, 1].
	// Must be 0 when UplinkTail is. Defaults to 0.
	UplinkTailShare float64

	// Sparse makes the provider leave quiet intervals out, as some
	// exchanges do: every candle whose open time is an odd number of
	// intervals since the epoch (weeks: since the first Monday) is missing
	// from every klines answer, from the first one (Lie.After does not
	// apply). Every answer, ranged or not, agrees: a ranged one holds the
	// first candles of the sparse series at or after its startTime, one
	// without a startTime the last ones up to its endTime, at most limit.
	// Sparse is not a lie, and combines with one: the lie is told about
	// the sparse answer. [Server.KlinesAt] still returns every candle: keep
	// the even ones to compare. Defaults to false.
	Sparse bool

	// Lie makes the klines endpoint break its contract (see [Lie]), for
	// testing a collector against a lying provider. Defaults to the zero
	// Lie: honest.
	Lie Lie
}

// Symbol is one tradable pair.
type Symbol struct {
	// Name is the Binance symbol, e.g. "BTCUSDT": 1 to 20 characters of
	// A-Z, 0-9, '-', '_' and '.'. Required and unique.
	Name string
	// Listed is when trading started: the first candle of every interval is
	// the one containing Listed. Zero means 30 days before the
	// server's start truncated to UTC midnight. A Listed after now yields no
	// candles yet.
	Listed time.Time
	// Price is the level the price wanders around (the series stays within
	// about x0.7 to x1.5 of it). Must be >= 0 and finite; zero means a level
	// derived from Name and the seed, between 10 and 100000.
	Price float64
}

// Headers selects the usage headers the server sends; any may be combined.
// The zero Headers sends none. Headers is a value; copy it freely.
type Headers struct {
	// Binance sends X-MBX-USED-WEIGHT and X-MBX-USED-WEIGHT-1M: the weight
	// of all non-banned requests in the current UTC minute, whatever the
	// Limit (as Binance does, rejected requests count).
	Binance bool
	// IETF sends RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
	// (seconds, rounded up) for the GCRA or fixed-window Limit in force
	// (draft-ietf-httpapi-ratelimit-headers). Nothing is sent without a
	// limit. A GCRA limit announces its burst as the limit, so a burst-1
	// limiter says "Remaining 0, Reset 1" after each admitted request.
	IETF bool
	// IETFPolicy sends RateLimit-Policy: <count>;w=<seconds> (the window in
	// whole seconds, rounded up) for a fixed-window Limit in force, the
	// quota policy of the same draft, which names the window that
	// RateLimit-Limit leaves implicit. Nothing is sent for GCRA (no
	// whole-second quota describes it exactly) or without a limit. Set IETF
	// too to send both.
	IETFPolicy bool
}

// normalize validates c and fills in defaults; start is the server's start.
func (c Config) normalize(start time.Time) (Config, error) {
	var err error
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Symbols, err = normalizeSymbols(c.Symbols, start); err != nil {
		return c, err
	}
	if c.Limit, err = c.Limit.normalize("Config.Limit"); err != nil {
		return c, err
	}
	schedule := make(map[time.Duration]Limit, len(c.Schedule))
	for _, after := range slices.Sorted(maps.Keys(c.Schedule)) {
		if after < 0 {
			return c, invalid.Must("Config.Schedule", "have offsets >= 0", after)
		}
		if schedule[after], err = c.Schedule[after].normalize(fmt.Sprintf("Config.Schedule[%v]", after)); err != nil {
			return c, err
		}
	}
	c.Schedule = schedule
	if c.Answer, err = c.Answer.normalize(); err != nil {
		return c, err
	}
	if c.Weight == nil {
		c.Weight = func(string) int { return 1 }
	}
	if !(c.FaultRate >= 0 && c.FaultRate <= 1) {
		return c, invalid.Must("Config.FaultRate", "be in [0, 1]", c.FaultRate)
	}
	if len(c.Faults) == 0 {
		c.Faults = []Fault{http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout, FaultReset}
	}
	for i, f := range c.Faults {
		if f != FaultReset && (f < 500 || f > 599) {
			return c, invalid.Must(fmt.Sprintf("Config.Faults[%d]", i), "be an HTTP status in [500, 599] or FaultReset", int(f))
		}
	}
	c.Faults = slices.Clone(c.Faults)
	if c.Latency < 0 {
		return c, invalid.Must("Config.Latency", "be >= 0", c.Latency)
	}
	if c.Jitter < 0 {
		return c, invalid.Must("Config.Jitter", "be >= 0", c.Jitter)
	}
	if c.Uplink < 0 {
		return c, invalid.Must("Config.Uplink", "be >= 0", c.Uplink)
	}
	if c.UplinkJitter < 0 {
		return c, invalid.Must("Config.UplinkJitter", "be >= 0", c.UplinkJitter)
	}
	if c.UplinkTail < 0 {
		return c, invalid.Must("Config.UplinkTail", "be >= 0", c.UplinkTail)
	}
	if !(c.UplinkTailShare >= 0 && c.UplinkTailShare <= 1) {
		return c, invalid.Must("Config.UplinkTailShare", "be in [0, 1]", c.UplinkTailShare)
	}
	if c.UplinkTailShare > 0 && c.UplinkTail == 0 {
		return c, invalid.Must("Config.UplinkTailShare", "be 0 when UplinkTail is 0", c.UplinkTailShare)
	}
	return c, c.Lie.validate()
}

// normalizeSymbols validates the symbols and fills Listed defaults.
func normalizeSymbols(in []Symbol, start time.Time) ([]Symbol, error) {
	if len(in) == 0 {
		in = []Symbol{{Name: "BTCUSDT"}, {Name: "ETHUSDT"}, {Name: "BNBUSDT"}}
	}
	out := slices.Clone(in)
	seen := make(map[string]bool, len(out))
	for i, s := range out {
		field := fmt.Sprintf("Config.Symbols[%d]", i)
		if !validSymbolName(s.Name) {
			return nil, invalid.Must(field+".Name", "be 1-20 of A-Z 0-9 - _ .", fmt.Sprintf("%q", s.Name))
		}
		if seen[s.Name] {
			return nil, invalid.Must(field+".Name", "be unique", s.Name)
		}
		seen[s.Name] = true
		if !(s.Price >= 0) || math.IsInf(s.Price, 0) {
			return nil, invalid.Must(field+".Price", "be >= 0 and finite", s.Price)
		}
		if s.Listed.IsZero() {
			out[i].Listed = start.UTC().Truncate(24 * time.Hour).Add(-defaultHistory)
		}
	}
	return out, nil
}

// validSymbolName reports whether name matches Binance's ^[A-Z0-9-_.]{1,20}$.
func validSymbolName(name string) bool {
	if len(name) == 0 || len(name) > 20 {
		return false
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
