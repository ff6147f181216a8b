package klines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
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
// Source is safe for concurrent use if its Client is.
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
	// are planned. Nil means the last closed candle: Now() truncated to the
	// interval, so the forming candle is never stored.
	Until func() time.Time
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	step time.Duration
}

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
	return s.now().Truncate(s.step)
}

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

// Next plans the window after cursor: up to Page candles, never past Until.
func (s *Source) Next(_ context.Context, cursor []byte, within checkpoint.Range) (slice.Slice, bool, error) {
	if s.step == 0 {
		return slice.Slice{}, false, errors.New("klines: Source used before Init")
	}
	start := s.From.Truncate(s.step)
	if len(cursor) > 0 {
		last, err := DecodeCursor(cursor)
		if err != nil {
			return slice.Slice{}, false, err
		}
		start = last.Add(s.step)
	}
	end := s.until()
	if !within.IsZero() {
		start = maxTime(start, within.Start.Truncate(s.step))
		end = minTime(end, within.End)
	}
	if w := start.Add(time.Duration(s.Page) * s.step); w.Before(end) {
		end = w
	}
	if !start.Before(end) {
		return slice.Slice{}, false, nil
	}
	return slice.Slice{Range: checkpoint.Range{Start: start, End: end}}, true, nil
}

// Fetch asks for the slice's window: exactly one request.
func (s *Source) Fetch(ctx context.Context, sl slice.Slice) (slice.Page[Candle], budget.Outcome) {
	q := url.Values{
		"symbol":    {s.Symbol},
		"interval":  {s.Interval},
		"startTime": {strconv.FormatInt(sl.Range.Start.UnixMilli(), 10)},
		"endTime":   {strconv.FormatInt(sl.Range.End.UnixMilli()-1, 10)},
		"limit":     {strconv.Itoa(s.Page)},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Base+"/api/v3/klines?"+q.Encode(), nil)
	if err != nil {
		return slice.Page[Candle]{}, budget.Outcome{Err: budget.Permanent(err)}
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	out := budget.FromHTTP(resp, err)
	if err != nil {
		return slice.Page[Candle]{}, out
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		out.Err = budget.Transient(err) // a truncated body: worth a retry
		return slice.Page[Candle]{}, out
	}
	if resp.StatusCode != http.StatusOK {
		out.Err = apiError(resp.StatusCode, body)
		return slice.Page[Candle]{}, out
	}
	candles, err := parse(body)
	if err != nil {
		out.Err = budget.Permanent(err) // garbage from the provider: classified, never a panic
		return slice.Page[Candle]{}, out
	}
	return s.page(sl.Range, candles), out
}

// page keeps the closed candles inside r and says how far the answer covers.
func (s *Source) page(r checkpoint.Range, all []Candle) slice.Page[Candle] {
	closed := s.now().Truncate(s.step)
	recs := all[:0]
	for _, c := range all {
		if !c.OpenTime.Before(r.Start) && c.OpenTime.Before(r.End) && c.OpenTime.Before(closed) {
			recs = append(recs, c)
		}
	}
	covered := r
	// A full page may stop short of r.End; so may a short answer near the
	// head, where the provider may not have published the last closed
	// candle yet. Either way, only what was returned is covered.
	nearHead := !r.End.Before(closed.Add(-2 * s.step))
	if len(all) >= s.Page || nearHead {
		covered.End = r.Start
		if len(recs) > 0 {
			covered.End = recs[len(recs)-1].OpenTime.Add(s.step)
		}
	}
	page := slice.Page[Candle]{Records: recs, Next: EncodeCursor(covered.End.Add(-s.step))}
	if covered.End.After(covered.Start) {
		page.Covered = covered
	}
	return page
}

// apiError turns a provider's error body ({"code":-1121,"msg":"Invalid
// symbol."}) into an error carrying its message.
func apiError(status int, body []byte) error {
	var e struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}
	if json.Unmarshal(body, &e) == nil && e.Msg != "" {
		return fmt.Errorf("klines: provider said %d %s (code %d)", status, e.Msg, e.Code)
	}
	return fmt.Errorf("klines: provider said %d", status)
}

// parse decodes Binance's array-of-arrays kline format.
func parse(body []byte) ([]Candle, error) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal(body, &rows); err != nil {
		return nil, fmt.Errorf("klines: decode: %w", err)
	}
	out := make([]Candle, 0, len(rows))
	for i, row := range rows {
		if len(row) < 6 {
			return nil, fmt.Errorf("klines: row %d has %d fields, want at least 6", i, len(row))
		}
		var ms int64
		if err := json.Unmarshal(row[0], &ms); err != nil {
			return nil, fmt.Errorf("klines: row %d open time: %w", i, err)
		}
		c := Candle{OpenTime: time.UnixMilli(ms).UTC()}
		for j, dst := range []*string{&c.Open, &c.High, &c.Low, &c.Close, &c.Volume} {
			if err := json.Unmarshal(row[j+1], dst); err != nil {
				return nil, fmt.Errorf("klines: row %d field %d: %w", i, j+1, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
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
