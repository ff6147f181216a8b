package providertest

import (
	"net/http"
	"slices"
	"strconv"
)

// Lie is a way the klines endpoint breaks its contract, for testing that a
// collector never stores a lie and never reports done with a hole. A lying
// [Server] still enforces its limit and injects its faults; the lie changes
// only the 200 answers of GET /api/v3/klines (and, for [LieRedirectLoop],
// turns them into redirects). [Server.KlinesAt] always tells the truth: it
// is what a test compares the stored candles with. The zero Lie is
// [LieNone].
type Lie int

const (
	// LieNone answers honestly.
	LieNone Lie = iota
	// LieShortPages answers at most [Config.LieCap] rows, whatever limit
	// was asked: a provider whose page cap is below the collector's page.
	LieShortPages
	// LieNull answers the JSON literal null instead of an array.
	LieNull
	// LieEmpty answers [] to every request with a startTime (a ranged
	// query into history), whatever candles exist in the range. Requests
	// without a startTime (the latest candles, up to an endTime) are
	// answered honestly: a history query path that lost its data while
	// the recent-candles path works. One that answers [] to every query
	// alike is [LieEmptyAll].
	LieEmpty
	// LieDropRows drops the middle row of every answer of three rows or
	// more: the rows left are still oldest first and aligned, with a hole.
	LieDropRows
	// LieReversed sends the rows newest first.
	LieReversed
	// LieShifted moves every row's open and close times by
	// [Config.LieShift].
	LieShifted
	// LieNewline appends a newline and a forged CSV line to the volume of
	// the last row of every answer: the forged line claims the first row's
	// open time with a price of 6.66, to overwrite it in a naive CSV file.
	LieNewline
	// LieRedirectLoop answers every klines request with 302 Found to the
	// same URL, forever.
	LieRedirectLoop
	// LieEmptyAll answers [] to every klines request, with a startTime or
	// without: the confirming request of a collector gets nothing either.
	// Against a collector that has already received a candle, this is a
	// lie it can expose (its candle is gone); before any, it cannot be
	// told from a symbol without candles.
	LieEmptyAll
)

// lieNames are the Lie constants' names, for String.
var lieNames = [...]string{"none", "short pages", "null", "empty", "dropped rows", "reversed", "shifted", "newline", "redirect loop", "empty to every request"}

// String returns the lie's name, e.g. "short pages".
func (l Lie) String() string {
	if l < 0 || int(l) >= len(lieNames) {
		return "Lie(" + strconv.Itoa(int(l)) + ")"
	}
	return lieNames[l]
}

// defaultLieCap is the rows a LieShortPages answer holds at most when
// Config.LieCap is zero: Binance's default limit, half its maximum.
const defaultLieCap = defaultKlineLimit

// lies reports whether the klines answer about to be served is to lie, and
// counts it. Callers hold no lock.
func (s *Server) lies() bool {
	if s.cfg.Lie == LieNone {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.klines++
	return s.klines > int64(s.cfg.LieAfter)
}

// klinesAnswer renders the answer to the klines request r selecting sp: the
// status, the body and the rows in it, sparse if the server is configured
// so, lying if it is configured to and the lie has started. A redirect
// sets Location in h.
func (s *Server) klinesAnswer(r *http.Request, sp span, h http.Header) (int, []byte, int) {
	lying := s.lies()
	if !lying && !s.cfg.Sparse {
		return http.StatusOK, sp.appendJSON(make([]byte, 0, 2+200*sp.len())), sp.len()
	}
	if lying {
		switch s.cfg.Lie {
		case LieRedirectLoop:
			h.Set("Location", r.URL.RequestURI())
			return http.StatusFound, nil, 0
		case LieNull:
			return http.StatusOK, []byte("null"), 0
		case LieEmpty:
			if r.URL.Query().Get("startTime") != "" {
				return http.StatusOK, []byte("[]"), 0
			}
		case LieEmptyAll:
			return http.StatusOK, []byte("[]"), 0
		}
	}
	var rows []candle
	if s.cfg.Sparse {
		rows = sparse(r, sp)
	} else {
		rows = make([]candle, 0, sp.len())
		for t := sp.lo; t <= sp.hi; t += sp.iv.d {
			rows = append(rows, sp.sr.candle(sp.iv, t, sp.now))
		}
	}
	tail := ""
	if lying {
		rows, tail = s.distort(rows, sp.iv)
	}
	b := []byte{'['}
	for i, c := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		if i == len(rows)-1 {
			b = c.appendJSONTail(b, tail)
		} else {
			b = c.appendJSON(b)
		}
	}
	return http.StatusOK, append(b, ']'), len(rows)
}

// distort applies the row-level lies to rows of interval iv; tail is the
// forged text LieNewline appends to the last row's volume.
func (s *Server) distort(rows []candle, iv interval) ([]candle, string) {
	switch s.cfg.Lie {
	case LieShortPages:
		most := s.cfg.LieCap
		if most == 0 {
			most = defaultLieCap
		}
		rows = rows[:min(len(rows), most)]
	case LieDropRows:
		if len(rows) >= 3 {
			rows = slices.Delete(rows, len(rows)/2, len(rows)/2+1)
		}
	case LieReversed:
		slices.Reverse(rows)
	case LieShifted:
		d := s.cfg.LieShift.Milliseconds()
		if d == 0 {
			d = iv.d / 2
		}
		for i := range rows {
			rows[i].open += d
			rows[i].close += d
		}
	case LieNewline:
		if len(rows) > 0 {
			return rows, "\n" + strconv.FormatInt(rows[0].open, 10) + ",6.66,6.66,6.66,6.66,6.66"
		}
	}
	return rows, ""
}

// sparse returns the rows of the klines request r, whose limited
// selection is sp, from a provider without the candles at odd intervals
// (see [Config.Sparse]).
func sparse(r *http.Request, sp span) []candle {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 {
		limit = defaultKlineLimit
	}
	limit = min(limit, maxKlineLimit)
	lo, hi := sp.iv.floor(sp.sr.listed), sp.iv.floor(sp.now)
	if v, err := strconv.ParseInt(q.Get("startTime"), 10, 64); err == nil {
		lo = max(lo, sp.iv.ceil(v))
	}
	if v, err := strconv.ParseInt(q.Get("endTime"), 10, 64); err == nil {
		hi = min(hi, sp.iv.floor(v))
	}
	var rows []candle
	for t := lo; t <= hi; t += sp.iv.d {
		if (t-sp.iv.off)/sp.iv.d%2 == 0 {
			rows = append(rows, sp.sr.candle(sp.iv, t, sp.now))
		}
	}
	if len(rows) > limit {
		if q.Get("startTime") != "" {
			rows = rows[:limit]
		} else {
			rows = rows[len(rows)-limit:]
		}
	}
	return rows
}
