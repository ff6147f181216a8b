package providertest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"
)

// Binance's kline paging limits.
const (
	// defaultKlineLimit is the number of candles returned when no limit is given.
	defaultKlineLimit = 500
	// maxKlineLimit is the most candles one request returns; larger limits
	// are capped to it.
	maxKlineLimit = 1000
)

// Query is one klines request, the typed form of the query string.
type Query struct {
	// Symbol is the symbol name, e.g. "BTCUSDT". Required.
	Symbol string
	// Interval is the candle interval: 1s, 1m, 3m, 5m, 15m, 30m, 1h, 2h, 4h,
	// 6h, 8h, 12h, 1d, 3d or 1w. Required.
	Interval string
	// Start keeps candles whose open time is at or after it. Zero means no
	// start: the most recent candles are returned.
	Start time.Time
	// End keeps candles whose open time is at or before it. Zero means no end.
	End time.Time
	// Limit is the most candles returned. Zero means 500, Binance's default;
	// more than 1000, Binance's most, is capped to 1000; negative is an
	// error.
	Limit int
}

// Kline is one candle as Binance sends it: times in milliseconds since the
// Unix epoch, prices and volumes as decimal strings with 8 decimals.
type Kline struct {
	OpenTime    int64  // start of the candle, ms
	Open        string // price at OpenTime
	High        string // highest price in the candle so far
	Low         string // lowest price in the candle so far
	Close       string // price at CloseTime+1ms, or at now for the forming candle
	Volume      string // base asset volume
	CloseTime   int64  // OpenTime + interval - 1ms, also for the forming candle
	QuoteVolume string // quote asset volume
	Trades      int64  // number of trades
	TakerBase   string // taker buy base asset volume
	TakerQuote  string // taker buy quote asset volume
}

// apiError is a Binance-style error answer: an HTTP status and the JSON body
// {"code": Code, "msg": Msg}.
type apiError struct {
	Status int    // HTTP status, e.g. 400
	Code   int    // Binance error code, e.g. -1121
	Msg    string // Binance message, e.g. "Invalid symbol."
}

// Error returns "providertest: <status> <code> <msg>".
func (e *apiError) Error() string {
	return fmt.Sprintf("providertest: %d %d %s", e.Status, e.Code, e.Msg)
}

// body returns the JSON body Binance sends for e.
func (e *apiError) body() []byte {
	b, _ := json.Marshal(struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}{e.Code, e.Msg})
	return b
}

// badRequest returns a 400 apiError.
func badRequest(code int, msg string) *apiError {
	return &apiError{Status: 400, Code: code, Msg: msg}
}

// interval is a candle length and the alignment of its open times, both ms.
type interval struct{ d, off int64 }

// intervals are the supported Binance intervals. 1w opens on Mondays (the
// epoch was a Thursday); everything else is aligned to the epoch.
var intervals = map[string]interval{
	"1s": {1e3, 0}, "1m": {6e4, 0}, "3m": {18e4, 0}, "5m": {3e5, 0}, "15m": {9e5, 0},
	"30m": {18e5, 0}, "1h": {36e5, 0}, "2h": {72e5, 0}, "4h": {144e5, 0}, "6h": {216e5, 0},
	"8h": {288e5, 0}, "12h": {432e5, 0}, "1d": {864e5, 0}, "3d": {2592e5, 0},
	"1w": {6048e5, 4 * 864e5},
}

// floor returns the open time of the candle containing t.
func (iv interval) floor(t int64) int64 { return t - floorMod(t-iv.off, iv.d) }

// ceil returns the first open time at or after t.
func (iv interval) ceil(t int64) int64 {
	if f := iv.floor(t); f < t {
		return f + iv.d
	}
	return t
}

// KlinesAt answers q as the klines endpoint would at now, without touching
// the limit or the stats. Candles are ascending and contiguous, from the one
// containing the symbol's listing up to the forming one (containing now),
// restricted to open times in [q.Start, q.End]. With a Start it returns the
// first q.Limit of those, without one the last q.Limit. Closed candles
// depend only on the seed, the symbol (name and Price), the interval and the
// open time; the forming candle's Close, High, Low and volumes move with
// now. An empty range gives an empty, non-nil slice. An invalid query is an
// error whose message carries Binance's status, code and text, e.g.
// "providertest: 400 -1121 Invalid symbol.". KlinesAt never lies, whatever
// [Config.Lie]: it is the truth a lying server's answers are compared with.
func (s *Server) KlinesAt(now time.Time, q Query) ([]Kline, error) {
	r, err := s.span(now, q)
	if err != nil {
		return nil, err
	}
	out := make([]Kline, 0, r.len())
	for t := r.lo; t <= r.hi; t += r.iv.d {
		out = append(out, r.sr.candle(r.iv, t, r.now).kline())
	}
	return out, nil
}

// span is the run of candles a query selects: open times lo..hi (ms) of
// interval iv, as seen at now (ms). lo > hi means none.
type span struct {
	sr          series
	iv          interval
	lo, hi, now int64
}

// len is the number of candles in r.
func (r span) len() int { return int(max((r.hi-r.lo)/r.iv.d+1, 0)) }

// span validates q and selects its candles at now; see KlinesAt.
func (s *Server) span(now time.Time, q Query) (span, error) {
	if q.Symbol == "" {
		return span{}, badRequest(-1102, "Mandatory parameter 'symbol' was not sent, was empty/malformed.")
	}
	if q.Interval == "" {
		return span{}, badRequest(-1102, "Mandatory parameter 'interval' was not sent, was empty/malformed.")
	}
	sym, ok := s.symbols[q.Symbol]
	if !ok {
		return span{}, badRequest(-1121, "Invalid symbol.")
	}
	iv, ok := intervals[q.Interval]
	if !ok {
		return span{}, badRequest(-1120, "Invalid interval.")
	}
	limit := q.Limit
	switch {
	case limit < 0:
		return span{}, badRequest(-1130, "Data sent for parameter 'limit' is not valid.")
	case limit == 0:
		limit = defaultKlineLimit
	case limit > maxKlineLimit:
		limit = maxKlineLimit
	}
	hasStart, hasEnd := !q.Start.IsZero(), !q.End.IsZero()
	if hasStart && hasEnd && q.Start.After(q.End) {
		return span{}, badRequest(-1023, "Start time is greater than end time.")
	}
	r := span{sr: sym, iv: iv, now: now.UnixMilli()}
	r.lo, r.hi = iv.floor(sym.listed), iv.floor(r.now)
	if hasStart {
		r.lo = max(r.lo, iv.ceil(q.Start.UnixMilli()))
	}
	if hasEnd {
		r.hi = min(r.hi, iv.floor(q.End.UnixMilli()))
	}
	if r.len() > limit {
		if hasStart {
			r.hi = r.lo + int64(limit-1)*iv.d
		} else {
			r.lo = r.hi - int64(limit-1)*iv.d
		}
	}
	return r, nil
}

// appendJSON appends r's candles as Binance's JSON array of arrays.
func (r span) appendJSON(b []byte) []byte {
	b = append(b, '[')
	for t := r.lo; t <= r.hi; t += r.iv.d {
		if t > r.lo {
			b = append(b, ',')
		}
		b = r.sr.candle(r.iv, t, r.now).appendJSON(b)
	}
	return append(b, ']')
}

// series is one symbol's deterministic price path.
type series struct {
	name   string
	listed int64   // ms
	key    uint64  // seed-and-name hash every draw starts from
	base   float64 // price level
	phase  [3]float64
}

// newSeries derives the price path of sym under seed.
func newSeries(sym Symbol, seed uint64) series {
	h := fnv.New64a()
	h.Write([]byte(sym.Name))
	key := mix(h.Sum64() ^ mix(seed))
	sr := series{name: sym.Name, listed: sym.Listed.UnixMilli(), key: key, base: sym.Price}
	if sr.base == 0 {
		sr.base = math.Pow(10, 1+4*unit(mix(key+1)))
	}
	for i := range sr.phase {
		sr.phase[i] = 2 * math.Pi * unit(mix(key+2+uint64(i)))
	}
	return sr
}

// price is the price at t (ms): slow waves plus per-millisecond noise, so the
// close of one candle is exactly the open of the next at every interval.
func (sr series) price(t int64) float64 {
	days := float64(t) / 864e5
	x := 0.25*math.Sin(2*math.Pi*days/37+sr.phase[0]) +
		0.08*math.Sin(2*math.Pi*days/3.1+sr.phase[1]) +
		0.02*math.Sin(2*math.Pi*days*24/5+sr.phase[2]) +
		0.002*(2*unit(mix(sr.key^uint64(t)))-1)
	return sr.base * math.Exp(x)
}

// candle is one candle's numbers before formatting.
type candle struct {
	open, close               int64 // open and close times, ms
	o, h, l, c, v, qv, tb, tq float64
	trades                    int64
}

// candle builds the candle of interval iv opening at open, as seen at now.
// The forming candle's wicks and volumes scale with the elapsed fraction.
func (sr series) candle(iv interval, open, now int64) candle {
	o, c, frac := sr.price(open), sr.price(open+iv.d), 1.0
	if now < open+iv.d {
		c = sr.price(now)
		frac = float64(now-open+1) / float64(iv.d)
	}
	k := mix(sr.key ^ mix(uint64(iv.d)) ^ uint64(open)*0x9e3779b97f4a7c15)
	u := func(i uint64) float64 { return unit(mix(k + i)) }
	avg := (o + c) / 2
	minutes := float64(iv.d) / 6e4
	vol := 50000 * minutes * (0.5 + u(3)) * frac / avg
	taker := vol * u(4)
	return candle{
		open: open, close: open + iv.d - 1,
		o: o, c: c,
		h: max(o, c) * (1 + 0.004*u(1)*frac),
		l: min(o, c) * (1 - 0.004*u(2)*frac),
		v: vol, qv: vol * avg, tb: taker, tq: taker * avg,
		trades: 1 + int64(40*minutes*(0.5+u(5))*frac),
	}
}

// kline formats c as a Kline.
func (c candle) kline() Kline {
	return Kline{
		OpenTime: c.open, Open: decimal(c.o), High: decimal(c.h), Low: decimal(c.l), Close: decimal(c.c),
		Volume: decimal(c.v), CloseTime: c.close, QuoteVolume: decimal(c.qv), Trades: c.trades,
		TakerBase: decimal(c.tb), TakerQuote: decimal(c.tq),
	}
}

// appendJSON appends c as one Binance kline array.
func (c candle) appendJSON(b []byte) []byte { return c.appendJSONTail(b, "") }

// appendJSONTail appends c as one Binance kline array whose volume string
// ends with tail (escaped as JSON): the forged text of [Lie.Newline].
func (c candle) appendJSONTail(b []byte, tail string) []byte {
	q := func(b []byte, x float64) []byte {
		return append(appendDecimal(append(b, ',', '"'), x), '"')
	}
	b = strconv.AppendInt(append(b, '['), c.open, 10)
	b = q(q(q(q(b, c.o), c.h), c.l), c.c)
	if tail == "" {
		b = q(b, c.v)
	} else {
		b = strconv.AppendQuoteToASCII(append(b, ','), string(appendDecimal(nil, c.v))+tail)
	}
	b = strconv.AppendInt(append(b, ','), c.close, 10)
	b = q(b, c.qv)
	b = strconv.AppendInt(append(b, ','), c.trades, 10)
	b = q(q(b, c.tb), c.tq)
	return append(b, `,"0"]`...)
}

// decimal formats x with Binance's 8 decimals.
func decimal(x float64) string { return string(appendDecimal(nil, x)) }

// appendDecimal appends x with 8 decimals, rounding x·1e8 to an integer (much
// faster than strconv's exact decimal rounding; the digits may differ from it
// in the last place, but always the same way).
func appendDecimal(b []byte, x float64) []byte {
	scaled := math.Round(x * 1e8)
	if !(scaled >= 0 && scaled < 9e18) {
		return strconv.AppendFloat(b, x, 'f', 8, 64)
	}
	n := int64(scaled)
	b = strconv.AppendInt(b, n/1e8, 10)
	frac := n % 1e8
	b = append(b, '.', '0', '0', '0', '0', '0', '0', '0', '0')
	for i := len(b) - 1; frac > 0; i-- {
		b[i] = byte('0' + frac%10)
		frac /= 10
	}
	return b
}

// mix is the splitmix64 finalizer: a cheap, well-spread hash of x.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// unit maps a hash to [0, 1).
func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }
