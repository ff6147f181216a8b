package providertest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The endpoints the server answers.
const (
	pathKlines       = "/api/v3/klines"
	pathExchangeInfo = "/api/v3/exchangeInfo"
	pathTime         = "/api/v3/time"
	pathPing         = "/api/v3/ping"
)

// Server is the simulated provider. It is an [http.Handler]: reach it
// through [Server.Client] in memory, or serve it on a listener (with
// [net/http/httptest.NewServer], for one on loopback). Server is safe for
// concurrent use.
type Server struct {
	cfg     Config
	start   time.Time
	symbols map[string]series

	mu      sync.Mutex
	rng     *rand.Rand
	lim     limiter
	changes []change // Config.Schedule by offset, ascending
	next    int      // index of the first change not yet applied
	ban     banState
	stats   Stats
	minute  int64 // start of the current UTC minute, ns
	used    int64 // weight counted in that minute
	arrived peak
	passed  peak
	klines  int64 // klines answers decided, for Config.Lie.After
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for cfg, or an error wrapping [ErrInvalidConfig]. It
// reads cfg.Now once: that instant is the server's start, from which
// [Config.Schedule] offsets and default listing dates count. It starts no
// goroutines.
func New(cfg Config) (*Server, error) {
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	start := now()
	cfg, err := cfg.normalize(start)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		start:   start,
		symbols: make(map[string]series, len(cfg.Symbols)),
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
	}
	for _, sym := range cfg.Symbols {
		s.symbols[sym.Name] = newSeries(sym, cfg.Seed)
	}
	for _, after := range slices.Sorted(maps.Keys(cfg.Schedule)) {
		s.changes = append(s.changes, change{after, cfg.Schedule[after]})
	}
	s.lim.set(cfg.Limit)
	return s, nil
}

// SetLimit replaces the limit in force now, for example to model a provider
// tightening its limit mid-run. Schedule entries that fall due later still
// apply. An invalid limit is an error wrapping [ErrInvalidConfig] and changes
// nothing.
func (s *Server) SetLimit(l Limit) error {
	l, err := l.normalize("Limit")
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applySchedule(now)
	s.lim.set(l)
	return nil
}

// change is one entry of Config.Schedule: from after past the server's
// start, the true limit is limit.
type change struct {
	after time.Duration
	limit Limit
}

// applySchedule installs the schedule entries due at now. Callers hold mu.
func (s *Server) applySchedule(now time.Time) {
	for s.next < len(s.changes) && !now.Before(s.start.Add(s.changes[s.next].after)) {
		s.lim.set(s.changes[s.next].limit)
		s.next++
	}
}

// reply is a decided response; reset means drop the connection instead.
type reply struct {
	status int
	header http.Header
	body   []byte
	delay  time.Duration // latency plus any slow-down, waited before answering
	reset  bool
}

// ServeHTTP answers one request: the uplink delay is waited out, the limit
// policy decides at arrival, the response waits out the latency (or returns
// early if the client goes away), and an injected reset hijacks and drops
// the connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if sleep(r.Context(), s.uplink()) != nil {
		return
	}
	rep := s.serve(r)
	if sleep(r.Context(), rep.delay) != nil {
		return
	}
	if rep.reset {
		resetConn(w)
		return
	}
	h := w.Header()
	for k, v := range rep.header {
		h[k] = v
	}
	s.date(h)
	w.WriteHeader(rep.status)
	w.Write(rep.body)
}

// date sets h's Date, unless set, to the server's clock (Config.Now), as a
// real server's Date says its own: net/http would write this process's
// clock, and the in-memory transport none.
func (s *Server) date(h http.Header) {
	if _, set := h["Date"]; !set {
		h.Set("Date", s.cfg.Now().UTC().Format(http.TimeFormat))
	}
}

// serve decides the response to r at the clock's now.
func (s *Server) serve(r *http.Request) reply {
	now := s.cfg.Now()
	rep, admitted := s.admit(now, int64(max(s.cfg.Weight(r.URL.Path), 0)))
	if !admitted {
		return rep
	}
	var candles int
	rep.status, rep.body, candles = s.route(now, r, rep.header)
	rep.header.Set("Content-Type", "application/json;charset=UTF-8")
	s.mu.Lock()
	if rep.status < 400 {
		s.stats.OK++
		s.stats.Candles += int64(candles)
	} else {
		s.stats.BadRequests++
	}
	s.mu.Unlock()
	return rep
}

// admit runs the ban, the limit and the fault draw for a request of weight w
// at now, counting it. It returns the reply so far and whether the request is
// to be served; if not, the reply is complete.
func (s *Server) admit(now time.Time, w int64) (reply, bool) {
	ns := now.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applySchedule(now)
	s.stats.Requests++
	s.arrived.add(ns)
	rep := reply{header: http.Header{}, delay: s.latency()}
	if ns < s.ban.until {
		s.stats.Banned++
		return s.banned(rep, ns), false
	}
	if m := ns - floorMod(ns, int64(time.Minute)); m != s.minute {
		s.minute, s.used = m, 0
	}
	s.used += w
	over, wait := false, time.Duration(0)
	if w > 0 {
		over, wait = s.lim.take(ns, w, s.cfg.Answer.SlowDown)
	}
	s.usageHeaders(rep.header, ns)
	if over {
		if !s.cfg.Answer.SlowDown {
			return s.refuse(rep, ns, wait), false
		}
		s.stats.SlowedDown++
		rep.delay += wait
	}
	s.passed.add(ns)
	if s.cfg.FaultRate > 0 && s.rng.Float64() < s.cfg.FaultRate {
		s.stats.Faults++
		return rep.fault(s.cfg.Faults[s.rng.IntN(len(s.cfg.Faults))]), false
	}
	return rep, true
}

// refuse completes rep as the refusal of an over-limit request at now (ns)
// that would conform after wait, counting it: a ban if this refusal starts
// one, else the configured 429 or 503. Callers hold mu.
func (s *Server) refuse(rep reply, now int64, wait time.Duration) reply {
	a := s.cfg.Answer
	if a.BanAfter > 0 && s.ban.violate(now, a.BanAfter, a.BanWindow, a.BanFor) {
		s.stats.Bans++
		s.stats.Banned++
		return s.banned(rep, now)
	}
	if a.Status == http.StatusServiceUnavailable {
		s.stats.Unavailable++
		return rep.apiError(&apiError{503, -1008, "Server is currently overloaded with other requests. Please try again in a few minutes."})
	}
	s.stats.Throttled++
	if !a.NoRetryAfter {
		rep.header.Set("Retry-After", retryAfter(wait))
	}
	return rep.apiError(&apiError{429, -1003, fmt.Sprintf("Too much request weight used; current limit is %s. Please use WebSocket Streams for live updates to avoid polling the API.", s.lim.limit)})
}

// uplink draws one request's delay on its way to the server ([Config.Uplink]
// plus jitter and tail). It draws nothing without UplinkJitter or
// UplinkTailShare.
func (s *Server) uplink() time.Duration {
	d := s.cfg.Uplink
	if s.cfg.UplinkJitter > 0 || s.cfg.UplinkTailShare > 0 {
		s.mu.Lock()
		if s.cfg.UplinkJitter > 0 {
			d += time.Duration(s.rng.Int64N(int64(s.cfg.UplinkJitter)))
		}
		if s.cfg.UplinkTailShare > 0 && s.rng.Float64() < s.cfg.UplinkTailShare {
			d += time.Duration(s.rng.ExpFloat64() * float64(s.cfg.UplinkTail))
		}
		s.mu.Unlock()
	}
	return d
}

// latency draws one response latency. Callers hold mu.
func (s *Server) latency() time.Duration {
	d := s.cfg.Latency
	if s.cfg.Jitter > 0 {
		d += time.Duration(s.rng.Int64N(int64(s.cfg.Jitter)))
	}
	return d
}

// banned completes rep as Binance's 418 for the ban in force at now (ns).
// Callers hold mu.
func (s *Server) banned(rep reply, now int64) reply {
	until := s.ban.until
	rep.header = http.Header{"Retry-After": {retryAfter(time.Duration(until - now))}}
	return rep.apiError(&apiError{418, -1003, fmt.Sprintf("Way too much request weight used; IP banned until %d. Please use WebSocket Streams for live updates to avoid bans.", until/1e6)})
}

// usageHeaders adds the configured usage headers at now. Callers hold mu.
func (s *Server) usageHeaders(h http.Header, now int64) {
	if s.cfg.Headers.Binance {
		used := strconv.FormatInt(s.used, 10)
		h.Set("X-Mbx-Used-Weight", used)
		h.Set("X-Mbx-Used-Weight-1m", used)
	}
	if s.cfg.Headers.IETF {
		if limit, remaining, reset, ok := s.lim.usage(now); ok {
			h.Set("RateLimit-Limit", strconv.FormatInt(limit, 10))
			h.Set("RateLimit-Remaining", strconv.FormatInt(remaining, 10))
			h.Set("RateLimit-Reset", strconv.FormatInt(int64((reset+time.Second-1)/time.Second), 10))
		}
	}
	if s.cfg.Headers.IETFPolicy {
		if count, seconds, ok := s.lim.policy(); ok {
			h.Set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", count, seconds))
		}
	}
}

// apiError completes rep with e's status and JSON body.
func (rep reply) apiError(e *apiError) reply {
	rep.status, rep.body = e.Status, e.body()
	rep.header.Set("Content-Type", "application/json;charset=UTF-8")
	return rep
}

// fault completes rep as the injected fault f.
func (rep reply) fault(f Fault) reply {
	switch f {
	case http.StatusInternalServerError:
		return rep.apiError(&apiError{500, -1000, "An unknown error occurred while processing the request."})
	case FaultReset:
		rep.reset = true
	default:
		rep.status, rep.body = int(f), fmt.Appendf(nil, "%d %s\n", f, http.StatusText(int(f)))
	}
	rep.header.Set("Content-Type", "text/plain; charset=utf-8")
	return rep
}

// route serves an admitted request: the status, the body and the number of
// candles in it; a lie's redirect sets its Location in h.
func (s *Server) route(now time.Time, r *http.Request, h http.Header) (int, []byte, int) {
	if r.Method != http.MethodGet {
		e := &apiError{405, -1000, "Method not allowed."}
		return e.Status, e.body(), 0
	}
	switch r.URL.Path {
	case pathKlines:
		q, err := parseQuery(r)
		var sp span
		if err == nil {
			sp, err = s.span(now, q)
		}
		if err != nil {
			e := err.(*apiError)
			return e.Status, e.body(), 0
		}
		return s.klinesAnswer(r, sp, h)
	case pathExchangeInfo:
		return http.StatusOK, s.exchangeInfo(now), 0
	case pathTime:
		return http.StatusOK, fmt.Appendf(nil, `{"serverTime":%d}`, now.UnixMilli()), 0
	case pathPing:
		return http.StatusOK, []byte("{}"), 0
	}
	e := &apiError{404, -1000, "Unknown endpoint."}
	return e.Status, e.body(), 0
}

// parseQuery reads the klines query string into a Query.
func parseQuery(r *http.Request) (Query, error) {
	v := r.URL.Query()
	q := Query{Symbol: v.Get("symbol"), Interval: v.Get("interval")}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"startTime", &q.Start}, {"endTime", &q.End}} {
		if raw := v.Get(p.name); raw != "" {
			ms, err := strconv.ParseInt(raw, 10, 64)
			if err != nil || ms < 0 {
				return q, badRequest(-1100, fmt.Sprintf("Illegal characters found in parameter '%s'; legal range is '^[0-9]{1,20}$'.", p.name))
			}
			*p.dst = time.UnixMilli(ms)
		}
	}
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			return q, badRequest(-1100, "Illegal characters found in parameter 'limit'; legal range is '^[1-9][0-9]{0,19}$'.")
		}
		q.Limit = n
	}
	return q, nil
}

// exchangeInfo renders the exchangeInfo body at now.
func (s *Server) exchangeInfo(now time.Time) []byte {
	type symbol struct {
		Symbol     string `json:"symbol"`
		Status     string `json:"status"`
		BaseAsset  string `json:"baseAsset"`
		QuoteAsset string `json:"quoteAsset"`
	}
	info := struct {
		Timezone        string   `json:"timezone"`
		ServerTime      int64    `json:"serverTime"`
		RateLimits      []any    `json:"rateLimits"`
		ExchangeFilters []any    `json:"exchangeFilters"`
		Symbols         []symbol `json:"symbols"`
	}{Timezone: "UTC", ServerTime: now.UnixMilli(), RateLimits: []any{}, ExchangeFilters: []any{}}
	for _, sym := range s.cfg.Symbols {
		base, quote := splitSymbol(sym.Name)
		info.Symbols = append(info.Symbols, symbol{sym.Name, "TRADING", base, quote})
	}
	b, _ := json.Marshal(info)
	return b
}

// splitSymbol splits a symbol on a common quote asset suffix.
func splitSymbol(name string) (base, quote string) {
	for _, q := range []string{"USDT", "USDC", "FDUSD", "BUSD", "TUSD", "BTC", "ETH", "BNB", "EUR"} {
		if len(name) > len(q) && name[len(name)-len(q):] == q {
			return name[:len(name)-len(q)], q
		}
	}
	return name, ""
}
