package providertest

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"pgregory.net/rapid"
)

// Lie is how the klines endpoint breaks its contract, for testing that a
// collector never stores a lie and never reports done with a hole. A lying
// [Server] still enforces its limit and injects its faults; the lie changes
// only the 200 answers of GET /api/v3/klines (and, for RedirectLoop, turns
// them into redirects). [Server.KlinesAt] always tells the truth: it is
// what a test compares the stored candles with. The zero Lie is honest.
// Lie is a value; copy it freely.
//
// The row lies (ShortPages, DropRows, Shifted, Reversed, Newline) change
// the rows of an answer and combine, applied in that order, the order of
// the fields: Lie{ShortPages: 100, Reversed: true} answers at most 100
// rows, newest first. The answer lies (Null, Empty, EmptyAll,
// RedirectLoop) replace the whole answer and combine with no other lie.
type Lie struct {
	// After is how many klines answers are served honestly before the lies
	// start, so a collector can store some candles before it meets one.
	// Must be >= 0, and 0 without a lie. Defaults to 0: every answer lies.
	After int

	// ShortPages, when > 0, answers at most this many rows, whatever limit
	// was asked: a provider whose page cap is below the collector's page
	// (Binance's default page is 500). Must be >= 0; zero tells no such lie.
	ShortPages int

	// DropRows drops the middle row of every answer of three rows or more:
	// the rows left are still oldest first and aligned, with a hole.
	DropRows bool

	// Shifted moves every row's open and close times by Shift.
	Shifted bool

	// Shift is how far Shifted moves open and close times; it may be
	// negative. Whole milliseconds only, and 0 unless Shifted is set. Zero
	// means half the interval. A shift by whole intervals keeps the rows
	// aligned: earlier, from an answer that starts after a stretch without
	// candles (before the listing, a quiet interval of a Sparse server),
	// it tells a consistent history, which no collector asking one
	// provider can tell from the truth (see package klines).
	Shift time.Duration

	// Reversed sends the rows newest first.
	Reversed bool

	// Newline appends a newline and a forged CSV line to the volume of the
	// last row of every answer: the forged line claims the first row's open
	// time with a price of 6.66, to overwrite it in a naive CSV file.
	Newline bool

	// Null answers the JSON literal null instead of an array.
	Null bool

	// Empty answers [] to every request with a startTime (a ranged query
	// into history), whatever candles exist in the range. Requests without
	// a startTime (the latest candles, up to an endTime) are answered
	// honestly: a history query path that lost its data while the
	// recent-candles path works. One that answers [] to every query alike
	// is EmptyAll.
	Empty bool

	// EmptyAll answers [] to every klines request, with a startTime or
	// without: the confirming request of a collector gets nothing either.
	// Against a collector that has already received a candle, this is a lie
	// it can expose (its candle is gone); before any, it cannot be told from
	// a symbol without candles.
	EmptyAll bool

	// RedirectLoop answers every klines request with 302 Found to the same
	// URL, forever.
	RedirectLoop bool
}

// Lies returns a [rapid] generator of every Lie the server tells about
// candles of length step, for a property test of a collector: one answer
// lie (Null, Empty, EmptyAll, RedirectLoop), or any set of the row lies
// (pages capped at 1 to 600 rows, the middle row dropped, rows shifted by
// half an interval, by -3 to 3 whole intervals or by any whole number of
// milliseconds within two intervals, newest first, a forged line), after 0
// to 5 honest answers. It draws shifts earlier by whole intervals too;
// where the lie may start after a stretch without candles, such a shift
// tells a history no collector can tell from the truth (see Shift), and a
// test of that case turns it later:
//
//	lie := providertest.Lies(step).Draw(t, "lie")
//	if lie.Shift < 0 && lie.Shift%step == 0 && !early {
//		lie.Shift = -lie.Shift
//	}
func Lies(step time.Duration) *rapid.Generator[Lie] {
	return rapid.Custom(func(t *rapid.T) Lie {
		var l Lie
		if rapid.Bool().Draw(t, "answer lie") {
			switch rapid.IntRange(0, 3).Draw(t, "which answer lie") {
			case 0:
				l.Null = true
			case 1:
				l.Empty = true
			case 2:
				l.EmptyAll = true
			default:
				l.RedirectLoop = true
			}
		} else {
			if rapid.Bool().Draw(t, "short pages") {
				l.ShortPages = rapid.IntRange(1, 600).Draw(t, "short pages of")
			}
			l.DropRows = rapid.Bool().Draw(t, "drop rows")
			if l.Shifted = rapid.Bool().Draw(t, "shifted"); l.Shifted {
				l.Shift = rapid.OneOf(
					rapid.Just(time.Duration(0)), // half an interval
					rapid.Map(rapid.IntRange(-3, 3), func(n int) time.Duration { return time.Duration(n) * step }),
					rapid.Map(rapid.Int64Range(-2*step.Milliseconds(), 2*step.Milliseconds()), func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }),
				).Draw(t, "shift")
			}
			l.Reversed = rapid.Bool().Draw(t, "reversed")
			l.Newline = rapid.Bool().Draw(t, "newline")
		}
		if l != (Lie{}) {
			l.After = rapid.IntRange(0, 5).Draw(t, "honest answers first")
		}
		return l
	})
}

// told returns the names of the lies l tells, in the order of the fields.
func (l Lie) told() []string {
	var names []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"ShortPages", l.ShortPages > 0}, {"DropRows", l.DropRows}, {"Shifted", l.Shifted},
		{"Reversed", l.Reversed}, {"Newline", l.Newline}, {"Null", l.Null},
		{"Empty", l.Empty}, {"EmptyAll", l.EmptyAll}, {"RedirectLoop", l.RedirectLoop},
	} {
		if f.set {
			names = append(names, f.name)
		}
	}
	return names
}

// validate checks l, the Config.Lie.
func (l Lie) validate() error {
	bad := func(sub, rule string, v any) error { return invalid.Must("Config.Lie."+sub, rule, v) }
	told := l.told()
	switch {
	case l.After < 0:
		return bad("After", "be >= 0", l.After)
	case l.After > 0 && len(told) == 0:
		return bad("After", "be 0 without a lie to start", l.After)
	case l.ShortPages < 0:
		return bad("ShortPages", "be >= 0", l.ShortPages)
	case l.Shift%time.Millisecond != 0:
		return bad("Shift", "be whole milliseconds", l.Shift)
	case l.Shift != 0 && !l.Shifted:
		return bad("Shift", "be 0 unless Shifted is set", l.Shift)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"Null", l.Null}, {"Empty", l.Empty}, {"EmptyAll", l.EmptyAll}, {"RedirectLoop", l.RedirectLoop}} {
		if f.set && len(told) > 1 {
			return bad(f.name, "combine with no other lie: it replaces the whole answer", strings.Join(told, ", "))
		}
	}
	return nil
}

// lies reports whether the klines answer about to be served is to lie, and
// counts it. Callers hold no lock.
func (s *Server) lies() bool {
	if s.cfg.Lie == (Lie{}) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.klines++
	return s.klines > int64(s.cfg.Lie.After)
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
		switch l := s.cfg.Lie; {
		case l.RedirectLoop:
			h.Set("Location", r.URL.RequestURI())
			return http.StatusFound, nil, 0
		case l.Null:
			return http.StatusOK, []byte("null"), 0
		case l.Empty && r.URL.Query().Get("startTime") != "":
			return http.StatusOK, []byte("[]"), 0
		case l.EmptyAll:
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

// distort tells the row lies about rows of interval iv, in the order of
// Lie's fields; tail is the forged text Newline appends to the last row's
// volume.
func (s *Server) distort(rows []candle, iv interval) (_ []candle, tail string) {
	l := s.cfg.Lie
	if l.ShortPages > 0 {
		rows = rows[:min(len(rows), l.ShortPages)]
	}
	if l.DropRows && len(rows) >= 3 {
		rows = slices.Delete(rows, len(rows)/2, len(rows)/2+1)
	}
	if l.Shifted {
		d := l.Shift.Milliseconds()
		if d == 0 {
			d = iv.d / 2
		}
		for i := range rows {
			rows[i].open += d
			rows[i].close += d
		}
	}
	if l.Reversed {
		slices.Reverse(rows)
	}
	if l.Newline && len(rows) > 0 {
		tail = "\n" + strconv.FormatInt(rows[0].open, 10) + ",6.66,6.66,6.66,6.66,6.66"
	}
	return rows, tail
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
