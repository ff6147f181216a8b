package klines

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// Candle is one closed kline.
type Candle struct {
	// OpenTime is the candle's open time.
	OpenTime time.Time
	// Open, High, Low, Close and Volume are the provider's decimal strings,
	// kept verbatim so nothing is lost to float rounding.
	Open, High, Low, Close, Volume string
}

// Source fetches the closed candles of one symbol and interval. Its cursor
// is the open time, in Unix milliseconds, of the last candle it covered.
// Each request asks for the first Page candles after the cursor, up to
// Until, so a stretch without candles (before the symbol's listing, a
// halted market) costs one request and its confirmation, not one per page.
// The cursor only ever moves to the last candle received before any hole
// in the answer, or past a stretch the provider said is empty and
// confirmed, never past a candle that was not received. An answer that
// breaks the klines contract is a permanent provider error (see the
// package doc). Source is a [slice.Predictor], so a stream run fetches
// ahead. It is safe for concurrent use if its Client is.
type Source struct {
	// Client makes the requests; nil means http.DefaultClient.
	Client *http.Client
	// Base is the REST base URL, e.g. "https://api.binance.com".
	Base string
	// Symbol and Interval name the series, e.g. "BTCUSDT" and "1m".
	Symbol, Interval string
	// Page is the candles per request (at most 1000).
	Page int
	// From is the first open time to collect when the cursor is empty.
	From time.Time
	// Until bounds the collection: only candles that open before Until()
	// are planned. Nil means the last closed candle: Now() floored to the
	// interval, so the forming candle is never stored.
	Until func() time.Time
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	step time.Duration
	// most is the most rows one answer has held: a provider that caps its
	// answers below Page is predicted at its cap.
	most atomic.Int64
}

var _ slice.Predictor = (*Source)(nil)

// Step returns the interval's length, or an error for an unknown interval.
func Step(interval string) (time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	if len(interval) < 2 {
		return 0, fmt.Errorf("klines: unknown interval %q", interval)
	}
	n, err := strconv.Atoi(interval[:len(interval)-1])
	u, ok := units[interval[len(interval)-1]]
	if err != nil || !ok || n <= 0 {
		return 0, fmt.Errorf("klines: unknown interval %q", interval)
	}
	return time.Duration(n) * u, nil
}

func (s *Source) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Source) until() time.Time {
	if s.Until != nil {
		return s.Until()
	}
	return s.floor(s.now())
}

// floor returns the open time of the candle that contains t. Binance aligns
// candles to the Unix epoch and weeks to Mondays (1970-01-05).
func (s *Source) floor(t time.Time) time.Time {
	var off int64
	if s.step%(7*24*time.Hour) == 0 {
		off = (4 * 24 * time.Hour).Milliseconds()
	}
	ms, d := t.UnixMilli(), s.step.Milliseconds()
	m := (ms - off) % d
	if m < 0 {
		m += d
	}
	return time.UnixMilli(ms - m).UTC()
}

// lastBefore returns the open time of the last candle that opens before t.
func (s *Source) lastBefore(t time.Time) time.Time { return s.floor(t.Add(-time.Millisecond)) }

// Init checks the source and must be called before use.
func (s *Source) Init() error {
	step, err := Step(s.Interval)
	if err != nil {
		return err
	}
	if s.Page <= 0 || s.Page > 1000 {
		return fmt.Errorf("klines: Page must be in [1, 1000] (got %d)", s.Page)
	}
	if s.Symbol == "" || s.Base == "" {
		return errors.New("klines: Symbol and Base are required")
	}
	s.step = step
	return nil
}

// EncodeCursor returns the cursor of the candle that opens at t.
func EncodeCursor(t time.Time) []byte { return strconv.AppendInt(nil, t.UnixMilli(), 10) }

// DecodeCursor returns the open time a cursor names.
func DecodeCursor(c []byte) (time.Time, error) {
	ms, err := strconv.ParseInt(string(c), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("klines: bad cursor %q: %w", c, err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// Next plans the slice after cursor: the candles from the one after the
// cursor up to Until, or up to the end of within for a fill. Its Range is
// that whole span; one request asks for its first Page candles.
func (s *Source) Next(_ context.Context, cursor []byte, within checkpoint.Range) (slice.Slice, bool, error) {
	if s.step == 0 {
		return slice.Slice{}, false, errors.New("klines: Source used before Init")
	}
	start := s.floor(s.From)
	if len(cursor) > 0 {
		last, err := DecodeCursor(cursor)
		if err != nil {
			return slice.Slice{}, false, err
		}
		start = last.Add(s.step)
	}
	end := s.until()
	if !within.IsZero() {
		start = maxTime(start, s.floor(within.Start))
		end = minTime(end, within.End)
	}
	if !start.Before(end) {
		return slice.Slice{}, false, nil
	}
	return slice.Slice{Range: checkpoint.Range{Start: start, End: end}}, true, nil
}

// Expect predicts the cursor after sl if the provider answers it in full:
// the last of the first Page candles of its span (or of as many as the
// provider's answers have held at most, if it caps them below Page). The
// first slice of a stream, after the empty cursor, has no prediction: its
// answer starts wherever the symbol's history does, perhaps long after
// From, so nothing is fetched ahead of it.
func (s *Source) Expect(sl slice.Slice) ([]byte, bool) {
	if len(sl.After) == 0 || s.step == 0 {
		return nil, false
	}
	n := int64(s.Page)
	if most := s.most.Load(); most > 0 {
		n = min(n, most)
	}
	last := minTime(sl.Range.Start.Add(time.Duration(n-1)*s.step), s.lastBefore(sl.Range.End))
	return EncodeCursor(last), true
}

// Fetch asks for the first Page candles of the slice's span: one request,
// and one more when the answer leaves the start of the span without
// candles in settled history (see [Source.confirm]); the two are one
// attempt to the provider's budget, and the rare second one is not paced
// apart. An answer that breaks the klines contract (see check), or that
// the second request shows to have left out candles, is a permanent
// provider error, never skipped.
func (s *Source) Fetch(ctx context.Context, sl slice.Slice) (slice.Page[Candle], budget.Outcome) {
	if s.step == 0 {
		return slice.Page[Candle]{}, budget.Outcome{Err: budget.Permanent(errors.New("klines: Source used before Init"))}
	}
	r := sl.Range
	rows, out := s.get(ctx, url.Values{
		"startTime": {strconv.FormatInt(r.Start.UnixMilli(), 10)},
		"endTime":   {strconv.FormatInt(r.End.UnixMilli()-1, 10)},
		"limit":     {strconv.Itoa(s.Page)},
	}, r, s.Page)
	if out.Err != nil {
		return slice.Page[Candle]{}, out
	}
	s.saw(len(rows))
	rows = s.contiguous(rows)
	if vout := s.confirm(ctx, s.leadingHole(r, rows)); vout.Err != nil {
		return slice.Page[Candle]{}, vout
	}
	return s.page(r, rows), out
}

// get sends one klines request with the query q (symbol and interval
// added) and returns its rows, checked against the window w and at most
// limit of them. A failure is in the Outcome's Err, classified.
func (s *Source) get(ctx context.Context, q url.Values, w checkpoint.Range, limit int) ([]Candle, budget.Outcome) {
	q.Set("symbol", s.Symbol)
	q.Set("interval", s.Interval)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Base+"/api/v3/klines?"+q.Encode(), nil)
	if err != nil {
		return nil, budget.Outcome{Err: budget.Permanent(err)}
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	out := budget.FromHTTP(resp, err)
	if err != nil {
		return nil, out // classified by FromHTTP (a redirect loop is permanent)
	}
	defer resp.Body.Close()
	body, err := readBody(resp.Body)
	switch {
	case errors.Is(err, errTooLarge):
		out.Err = budget.Permanent(err) // the same answer next time
		return nil, out
	case err != nil:
		out.Err = budget.Transient(err) // a truncated body: worth a retry
		return nil, out
	case resp.StatusCode != http.StatusOK:
		out.Err = apiError(resp.StatusCode, body)
		return nil, out
	}
	rows, err := s.decode(body, w, limit)
	if err != nil {
		out.Err = budget.Permanent(err) // garbage or a broken contract: classified, never a panic
		return nil, out
	}
	return rows, out
}

// saw notes that an answer held n rows.
func (s *Source) saw(n int) {
	for most := s.most.Load(); int64(n) > most; most = s.most.Load() {
		if s.most.CompareAndSwap(most, int64(n)) {
			return
		}
	}
}

// contiguous returns the rows up to the first hole between two of them.
// A hole inside an answer is a halt or rows the provider dropped, and the
// two look alike; cut there, the next slice asks from the hole, and its
// answer must start at the hole or be confirmed to ([Source.confirm]).
func (s *Source) contiguous(rows []Candle) []Candle {
	for i := 1; i < len(rows); i++ {
		if !rows[i].OpenTime.Equal(rows[i-1].OpenTime.Add(s.step)) {
			return rows[:i]
		}
	}
	return rows
}

// settled returns the open time from which candles may not be published
// yet: two intervals before the forming candle. Earlier ones are history.
func (s *Source) settled() time.Time { return s.floor(s.now()).Add(-2 * s.step) }

// leadingHole returns the start of r that the answer rows claims has no
// candle: up to its first row, or, for an empty answer, the whole span up
// to where history is settled. It is empty when the answer starts where
// it was asked to.
func (s *Source) leadingHole(r checkpoint.Range, rows []Candle) checkpoint.Range {
	end := minTime(r.End, s.settled())
	if len(rows) > 0 {
		end = rows[0].OpenTime
	}
	if !r.Start.Before(end) {
		return checkpoint.Range{}
	}
	return checkpoint.Range{Start: r.Start, End: end}
}

// confirm asks the provider for the last candle before hole's end,
// without a startTime: a provider that answered a ranged request without
// the candles it has (an empty page in history, rows dropped at the start)
// shows one inside the hole, and that is a classified provider error. A
// symbol's listing, a halt or a delisting shows a candle before the hole,
// or none. A provider that hides the candles from this request too cannot
// be told from one that has none. A zero hole asks nothing.
func (s *Source) confirm(ctx context.Context, hole checkpoint.Range) budget.Outcome {
	if hole.IsZero() {
		return budget.Outcome{}
	}
	rows, out := s.get(ctx, url.Values{
		"endTime": {strconv.FormatInt(hole.End.UnixMilli()-1, 10)},
		"limit":   {"1"},
	}, checkpoint.Range{End: hole.End}, 1)
	if out.Err == nil && len(rows) == 1 && !rows[0].OpenTime.Before(hole.Start) {
		out.Err = budget.Permanent(fmt.Errorf("klines: the provider answered no candle in %v, but has one at %v: an answer that leaves out candles",
			hole, rows[0].OpenTime))
	}
	return out
}

// page keeps the closed candles of a checked, contiguous answer for r and
// says how far it covers.
func (s *Source) page(r checkpoint.Range, rows []Candle) slice.Page[Candle] {
	closed := s.floor(s.now())
	n := len(rows)
	for n > 0 && !rows[n-1].OpenTime.Before(closed) {
		n-- // the forming candle: rows are oldest first, so it is last
	}
	recs := rows[:n]
	var covered checkpoint.Range
	var next time.Time
	switch end := minTime(r.End, s.settled()); {
	case n > 0:
		// Only what was received is covered, whether the page is full or
		// short: a provider may cap its answers below Page, cut short at a
		// hole, or not have published the newest candle yet. The next
		// slice asks again from the candle after the last one received.
		next = recs[n-1].OpenTime
		covered = checkpoint.Range{Start: r.Start, End: next.Add(s.step)}
	case !r.Start.Before(end):
		// Nothing near the head, where the newest closed candles may not be
		// published yet: nothing is covered and the cursor stays (no
		// progress: caught up for now).
		next = r.Start.Add(-s.step)
	default:
		// Nothing in the span's settled part (confirmed): no candle opens
		// there.
		next = s.lastBefore(end)
		covered = checkpoint.Range{Start: r.Start, End: end}
	}
	page := slice.Page[Candle]{Records: recs, Next: EncodeCursor(next)}
	if covered.End.After(covered.Start) {
		page.Covered = covered
	}
	return page
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
