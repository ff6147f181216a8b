package klines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/cfgerr"
	"github.com/forage-go/forage/internal/redact"
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
// names the last candle it covered, in Unix milliseconds, and what is
// pending after it (see the package doc); [DecodeCursor] reads it. Each
// request asks for the first Page candles after the cursor, up to Until,
// so a stretch without
// candles (before the symbol's listing, a halted market) costs one
// request and its confirmation, the next slice, not one per page. The
// cursor only ever moves to the last candle received before any hole in
// the answer that is not corroborated, or past a stretch the provider said
// is empty and confirmed by a candle, never past a candle that was not
// received. Every Fetch makes exactly one request, one attempt to the
// budget, and refuses redirects. An answer that breaks the klines contract
// is a permanent provider error (see the package doc). Source is a
// [slice.Predictor], so a stream run fetches ahead. It is safe for
// concurrent use if its Client is.
type Source struct {
	// Client makes the requests; nil means http.DefaultClient. Init uses a
	// copy that refuses redirects: the klines API never redirects, and a
	// followed redirect would be a request the budget never counted.
	Client *http.Client
	// Base is the REST base URL, e.g. "https://api.binance.com".
	Base string
	// Symbol and Interval name the series, e.g. "BTCUSDT" and "1m".
	Symbol, Interval string
	// Page is the candles per request, at most 1000. Zero means 1000.
	Page int
	// From is the first open time to collect when the cursor is empty.
	From time.Time
	// Until bounds the collection: only candles that open before Until()
	// are planned. Nil means the last closed candle: Now() floored to the
	// interval, so the forming candle is never stored. Nor is one the
	// provider may still be forming, its clock behind Now: a candle closed
	// less than 10 minutes ago (two intervals, for longer ones) is stored
	// once an answer shows the one after it.
	Until func() time.Time
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	step time.Duration
	// noRedirect is Client with redirects refused, made by Init.
	noRedirect *http.Client
	// mu guards pending: the confirmations this Source asked for and has
	// not concluded, by encoded cursor.
	mu      sync.Mutex
	pending map[string]bool
	// most is the most rows one answer has held: a provider that caps its
	// answers below Page is predicted at its cap.
	most atomic.Int64
	// behind is how far the provider's clock runs behind this one, by the
	// Date of its last answer that had one (see clockOf); 0 within
	// clockSlack.
	behind atomic.Int64
}

var _ slice.Predictor = (*Source)(nil)

// ErrInvalidConfig is wrapped by every error [Source.Init] returns for a bad
// field; the message names the field, the rule and the value.
var ErrInvalidConfig = errors.New("klines: invalid config")

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("klines", ErrInvalidConfig)

// maxStep bounds an interval: a year, more than any exchange's longest
// candle (a month).
const maxStep = 366 * 24 * time.Hour

// Step returns the length of a Binance interval ("1m", "4h", "1w"), or an
// error for an unknown one: the rule [Source.Init] checks its Interval by.
func Step(interval string) (time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	if len(interval) < 2 {
		return 0, fmt.Errorf("klines: unknown interval %q", interval)
	}
	n, err := strconv.Atoi(interval[:len(interval)-1])
	u, ok := units[interval[len(interval)-1]]
	if err != nil || !ok || n <= 0 || time.Duration(n) > maxStep/u {
		// A count past maxSteps overflowed to a step of nanoseconds (a
		// step of 512 ns for 20211507185753197s), or to a negative one.
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

// theirs returns the provider's clock: this one, less how far the Date
// of its answers says it runs behind. Which candle is forming, which are
// settled history, and where a stream that follows the head is caught up
// are the provider's to say: a provider 15 minutes behind had its forming
// candle stored as final, and the minutes after it covered as a halt.
func (s *Source) theirs() time.Time { return s.now().Add(-time.Duration(s.behind.Load())) }

// clockOf notes how far behind this clock the provider's runs, by the Date
// (plus Age, for a cached answer) of an answer received now: 0 within
// clockSlack (a Date has whole seconds), and a Date more than maxBehind
// behind, or ahead, is no clock (a stale cache's, a hostile one's) and
// says nothing.
func (s *Source) clockOf(h http.Header) {
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return
	}
	if age, err := strconv.Atoi(h.Get("Age")); err == nil && age > 0 && age < int(maxBehind/time.Second) {
		date = date.Add(time.Duration(age) * time.Second)
	}
	switch d := s.now().Sub(date); {
	case d > maxBehind || d < -maxBehind:
	case d > clockSlack:
		s.behind.Store(int64(d - clockSlack/2))
	default:
		s.behind.Store(0)
	}
}

// clockSlack is how far behind a provider's Date may be with its clock in
// step with this one (whole seconds, and the answer's way back); and
// maxBehind, how far behind or ahead a Date may be and still be a clock.
const (
	clockSlack = 2 * time.Second
	maxBehind  = 24 * time.Hour
)

func (s *Source) until() time.Time {
	if s.Until != nil {
		return s.Until()
	}
	return s.floor(s.theirs())
}

// floor returns the open time of the candle that contains t.
func (s *Source) floor(t time.Time) time.Time { return Floor(t, s.step) }

// Floor returns the open time of the candle of length step (see [Step])
// that contains t, as Binance aligns candles: to the Unix epoch, and weeks to Mondays
// (1970-01-05). It is not [time.Time.Truncate], which counts from the
// year 1: the two differ for 3d candles by two days.
func Floor(t time.Time, step time.Duration) time.Time {
	var off int64
	if step%(7*24*time.Hour) == 0 {
		off = (4 * 24 * time.Hour).Milliseconds()
	}
	ms, d := t.UnixMilli(), step.Milliseconds()
	if d <= 0 {
		return t.UTC()
	}
	m := (ms - off) % d
	if m < 0 {
		m += d
	}
	return time.UnixMilli(ms - m).UTC()
}

// lastBefore returns the open time of the last candle that opens before t.
func (s *Source) lastBefore(t time.Time) time.Time { return s.floor(t.Add(-time.Millisecond)) }

// Init checks the source and must be called before use. A bad field is
// an error wrapping [ErrInvalidConfig] that names it.
func (s *Source) Init() error {
	step, err := Step(s.Interval)
	if s.Page == 0 {
		s.Page = maxPage
	}
	switch {
	case err != nil:
		return invalid.Must("Source.Interval", `be a count and a unit s, m, h, d or w, e.g. "1m"`, fmt.Sprintf("%q", s.Interval))
	case s.Page <= 0 || s.Page > maxPage:
		return invalid.Must("Source.Page", "be in [1, 1000]", s.Page)
	case s.Symbol == "":
		return invalid.Must("Source.Symbol", `name the series, e.g. "BTCUSDT"`, `""`)
	case s.Base == "":
		return invalid.Must("Source.Base", `be the REST base URL, e.g. "https://api.binance.com"`, `""`)
	case !baseURL(s.Base):
		return invalid.Must("Source.Base", "be an http or https URL with a host (and a port in [1, 65535]), and no query or fragment: the request's path and query follow it",
			fmt.Sprintf("%q", redact.URL(s.Base)))
	}
	s.step = step
	client := http.DefaultClient
	if s.Client != nil {
		client = s.Client
	}
	nr := *client // a copy: the caller's client keeps its own policy
	nr.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.noRedirect = &nr
	return nil
}

// Sources returns the two sources of one series' stream, as a scheduler's
// stream takes them (github.com/forage-go/forage/schedule.Stream): backfill
// collects history from base.From up to boundary (catch-up), incremental
// the closed candles from boundary on (steady state). Both share base's
// Client, Base, Symbol, Interval, Page and Now (its Until is not used),
// and both are checked with [Source.Init]: the error names a bad field.
//
// A backfill near boundary may find the provider's last candles before it
// not published yet (a provider whose clock runs behind the host's has
// them still forming): its run then stops behind ([forage.ReasonBehind],
// see [slice.Page.NotYet]), never caught up short of boundary, and says
// when to ask again, at which a scheduler runs it again.
//
// boundary is where the head began when the stream was first collected,
// e.g. the host's start time. A later start may pass a later boundary: the
// steady-state cursor already committed is where the head resumes, and the
// backfill then also covers the candles between, which the sink's upsert
// absorbs. Nothing is skipped either way.
func Sources(base *Source, boundary time.Time) (backfill, incremental *Source, err error) {
	mk := func(from time.Time, until func() time.Time) (*Source, error) {
		s := &Source{Client: base.Client, Base: base.Base, Symbol: base.Symbol, Interval: base.Interval,
			Page: base.Page, From: from, Until: until, Now: base.Now}
		return s, s.Init()
	}
	if backfill, err = mk(base.From, func() time.Time { return boundary }); err != nil {
		return nil, nil, err
	}
	if incremental, err = mk(boundary, nil); err != nil {
		return nil, nil, err
	}
	return backfill, incremental, nil
}

// Next plans the slice after cursor: the candles from the one after the
// cursor up to Until, or up to the end of within for a fill; or, when the
// cursor holds a confirmation this Source asked for (see [Source.Fetch]),
// the stretch to confirm. Its Range is that whole span.
func (s *Source) Next(_ context.Context, after []byte, within checkpoint.Range) (slice.Slice, bool, error) {
	if s.step == 0 {
		return slice.Slice{}, false, errors.New("klines: Source used before Init")
	}
	c, err := parseCursor(after)
	if err != nil {
		return slice.Slice{}, false, err
	}
	start := s.floor(s.From)
	if c.hasLast {
		start = msTime(c.last).Add(s.step)
	}
	end := s.until()
	if !within.IsZero() {
		// A fill plans its whole range (up to Until, when set): the part
		// the provider has not reached yet is behind (see empty), never
		// left out as if filled (with the provider's clock behind ours, a
		// drained range gap ending at the head was resolved without its
		// last candles).
		start, end = maxTime(start, s.floor(within.Start)), within.End
		if s.Until != nil {
			end = minTime(end, s.Until())
		}
	}
	switch {
	case s.confirming(c, after):
		end = msTime(c.confirm)
	case c.hasSeen:
		end = msTime(c.seen).Add(s.step) // the verification
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
// From, so nothing is fetched ahead of it; nor has a confirmation, which
// ends wherever the provider's answer says.
func (s *Source) Expect(sl slice.Slice) ([]byte, bool) {
	c, err := parseCursor(sl.After)
	switch {
	case err != nil || s.step == 0 || !c.hasLast || c.hasConfirm:
		return nil, false // the first slice, or a claim: it ends wherever the answer says
	case c.hasSeen:
		return onCandle(msTime(c.seen)).bytes(), true // a verification that agrees
	}
	n := int64(s.Page)
	if most := s.most.Load(); most > 0 {
		n = min(n, most)
	}
	last := minTime(sl.Range.Start.Add(time.Duration(n-1)*s.step), s.lastBefore(sl.Range.End))
	return onCandle(last).bytes(), true
}

// confirming reports whether the slice after cursor c (encoded as after)
// is a confirmation: c asks for one and this Source asked for it, so the
// claim it confirms is this process's own answer. A confirmation left by
// an earlier process, or one already concluded, is asked again from the
// ranged request: a claim is confirmed against the answer that made it.
func (s *Source) confirming(c cursor, after []byte) bool {
	if !c.hasConfirm {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[string(after)]
}

// await notes that the cursor c asks for a confirmation, and returns it
// encoded.
func (s *Source) await(c cursor) []byte {
	b := c.bytes()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = make(map[string]bool)
	}
	s.pending[string(b)] = true
	return b
}

// concluded forgets the confirmation asked by the cursor after.
func (s *Source) concluded(after []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, string(after))
}

// get sends one klines request with the query q (symbol and interval
// added) and returns its rows, checked against the window w and at most
// limit of them. A failure is in the Outcome's Err, classified.
func (s *Source) get(ctx context.Context, q url.Values, w checkpoint.Range, limit int) ([]Candle, forage.Outcome) {
	q.Set("symbol", s.Symbol)
	q.Set("interval", s.Interval)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Base+"/api/v3/klines?"+q.Encode(), nil)
	if err != nil {
		return nil, forage.Outcome{Err: forage.Mark(err, forage.Permanent)}
	}
	resp, err := s.noRedirect.Do(req)
	out := forage.FromHTTP(resp, err)
	if resp != nil {
		s.clockOf(resp.Header)
	}
	if err != nil {
		return nil, out // classified by FromHTTP
	}
	defer resp.Body.Close()
	body, err := readBody(resp.Body)
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// The klines API never redirects: following would be requests the
		// budget never counted, and a loop would end as something else.
		out.Err = forage.Mark(fmt.Errorf("klines: provider redirected to %q (HTTP %d): the klines API never redirects",
			redact.URL(resp.Header.Get("Location")), resp.StatusCode), forage.Permanent)
		return nil, out
	case errors.Is(err, errTooLarge):
		out.Err = forage.Mark(err, forage.Permanent) // the same answer next time
		return nil, out
	case err != nil:
		out.Err = forage.Mark(err, forage.Transient) // a truncated body: worth a retry
		return nil, out
	case resp.StatusCode != http.StatusOK:
		out.Err = apiError(resp.StatusCode, body)
		return nil, out
	}
	rows, err := s.decode(body, w, limit)
	switch {
	case err != nil && !json.Valid(body):
		// Not JSON at all: a gateway's or a CDN's page, or a body cut
		// short yet framed as whole. The next answer is likely the
		// provider's own: worth a retry, within the run's retry budget
		// and the breaker (one such page ended every stream of a
		// follower for good).
		out.Err = forage.Mark(fmt.Errorf("klines: the answer is not JSON: %w", err), forage.Transient)
		return nil, out
	case err != nil:
		if e := errorObject(body); e != nil {
			// An error object where the array was due, with a 200: what
			// the provider said, classified by its code (its words were
			// lost in "cannot unmarshal object", and an unknown error
			// (-1000) ended a stream for good).
			out.Err = e
			return nil, out
		}
		out.Err = forage.Mark(err, forage.Permanent) // a broken contract: classified, never a panic
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

// baseURL reports whether base can be the start of a request URL: http or
// https, a host, a port (if any) in [1, 65535], and no query or fragment.
func baseURL(base string) bool {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return false
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		return err == nil && n >= 1 && n <= 65535
	}
	return true
}

// maxPage is the most candles Binance answers one request with.
const maxPage = 1000

// settleAfter is how long after it closes, by this clock, a candle is
// history for certain (with two intervals, whichever is longer): a
// provider whose clock or candle engine runs behind ours (by seconds of
// clock skew, or minutes of a lagging feed) may not have closed, or even
// published, a candle this clock says closed.
const settleAfter = 10 * time.Minute

// settled returns the open time from which candles may not be published,
// or closed, at the provider yet: settleAfter (at least two intervals)
// before the forming candle. Earlier ones are history.
func (s *Source) settled() time.Time {
	return s.floor(s.theirs().Add(-max(settleAfter, 2*s.step)))
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
