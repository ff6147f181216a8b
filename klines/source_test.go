package klines_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/slice"
)

// counting is a transport that counts requests and, with cap > 0, lowers
// every limit asked above cap to cap: a provider that answers at most cap
// rows whatever is asked.
type counting struct {
	rt  http.RoundTripper
	cap int
	n   atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	q := r.URL.Query()
	if l, _ := strconv.Atoi(q.Get("limit")); c.cap > 0 && l > c.cap {
		q.Set("limit", strconv.Itoa(c.cap))
		r = r.Clone(r.Context())
		r.URL.RawQuery = q.Encode()
	}
	return c.rt.RoundTrip(r)
}

// collect runs a catch-up stream of src into a memory sink until it stops
// and returns the report and the candles' open times in the order written.
func collect(t *testing.T, src *klines.Source, store checkpoint.Store) (slice.Report, []time.Time) {
	t.Helper()
	return runCapped(t, src, store, 0)
}

// contiguous fails unless got is every candle open time in [from, to), once,
// in order.
func contiguous(t *testing.T, got []time.Time, from, to time.Time, step time.Duration) {
	t.Helper()
	if want := int(to.Sub(from) / step); len(got) != want {
		t.Fatalf("%d candles, want %d in [%v, %v)", len(got), want, from, to)
	}
	for i, o := range got {
		if want := from.Add(time.Duration(i) * step); !o.Equal(want) {
			t.Fatalf("candle %d opens at %v, want %v: a hole or a duplicate", i, o, want)
		}
	}
}

// TestBeforeListingCostsThreeRequests: a month before the symbol's
// listing is answered by the first request with the candles from the
// listing on; the next slice confirms that nothing precedes them, and the
// one after asks from the listing: collecting 10 hours of candles in pages
// of 100 takes 8 requests, each its own slice, not the 432 more a window
// per page of the empty month would, and the month is covered.
func TestBeforeListingCostsThreeRequests(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		listed := time.Now().Add(-10 * time.Hour).Truncate(time.Minute)
		srv, err := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "NEWUSDT", Listed: listed}}})
		if err != nil {
			t.Fatal(err)
		}
		tr := &counting{rt: srv.Client().Transport}
		from := listed.Add(-30 * 24 * time.Hour)
		src := &klines.Source{Client: &http.Client{Transport: tr}, Base: "http://sim", Symbol: "NEWUSDT", Interval: "1m", Page: 100, From: from}
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		rep, got := collect(t, src, store)
		now := time.Now().Truncate(time.Minute)
		contiguous(t, got, listed, now, time.Minute)
		if tr.n.Load() != 8 || rep.Slices != 8 || rep.Discarded != 0 {
			t.Fatalf("%d requests, report %+v: want 8 requests (7 pages and a confirmation), 8 slices, none discarded", tr.n.Load(), rep)
		}
		cov, err := store.Coverage(context.Background(), "sim/NEWUSDT")
		if err != nil || !cov.Covers(checkpoint.Range{Start: from, End: now}) {
			t.Fatalf("coverage %v, %v: want [%v, %v), the month before the listing included", cov, err, from, now)
		}
	})
}

// TestCappedProviderLeavesNoHole: a provider that answers at most 500 rows
// while 1000 are asked: every slice continues from the last candle
// received, so two days of candles arrive whole, in 6 requests, and the
// prediction learns the cap (nothing fetched ahead is discarded).
func TestCappedProviderLeavesNoHole(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		listed := time.Now().Add(-48 * time.Hour).Truncate(time.Minute)
		srv, err := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
		if err != nil {
			t.Fatal(err)
		}
		tr := &counting{rt: srv.Client().Transport, cap: 500}
		src := &klines.Source{Client: &http.Client{Transport: tr}, Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", Page: 1000, From: listed}
		rep, got := collect(t, src, checkpoint.NewMemoryStore(checkpoint.Config{}))
		contiguous(t, got, listed, time.Now().Truncate(time.Minute), time.Minute)
		if tr.n.Load() != 6 || rep.Discarded != 0 {
			t.Fatalf("%d requests, report %+v: want 6 requests (2880 candles, 500 an answer), none discarded", tr.n.Load(), rep)
		}
	})
}

// TestEmptyHistoryIsNotCoveredWithoutACandle: nothing between From and a
// fixed Until in settled history, and nothing before (the symbol was
// listed after Until): one request and its confirmation find no candle to
// confirm the stretch, so nothing is covered and the cursor holds no
// candle; a second run asks again (the stretch and its confirmation, two
// requests, no progress, nothing covered).
func TestEmptyHistoryIsNotCoveredWithoutACandle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		now := time.Now().Truncate(time.Minute)
		srv, _ := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "NEWUSDT", Listed: now.Add(-time.Hour)}}})
		tr := &counting{rt: srv.Client().Transport}
		from, until := now.Add(-72*time.Hour), now.Add(-2*time.Hour)
		src := &klines.Source{Client: &http.Client{Transport: tr}, Base: "http://x", Symbol: "NEWUSDT", Interval: "1m", Page: 1000,
			From: from, Until: func() time.Time { return until }}
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		rep, got := collect(t, src, store)
		if _, err := klines.DecodeCursor(rep.Cursor); len(got) != 0 || tr.n.Load() != 2 || err == nil {
			t.Fatalf("%d candles in %d requests, report %+v: want none in 2 requests, a cursor on no candle", len(got), tr.n.Load(), rep)
		}
		if cov, _ := store.Coverage(context.Background(), "sim/NEWUSDT"); cov.Covers(checkpoint.Range{Start: from, End: from.Add(time.Minute)}) {
			t.Fatalf("coverage %v, want none", cov)
		}
		rep, got = collect(t, src, store)
		if _, err := klines.DecodeCursor(rep.Cursor); len(got) != 0 || tr.n.Load() != 4 || err == nil {
			t.Fatalf("a second run: %d candles, %d requests in all, report %+v; want none, 4, a cursor on no candle", len(got), tr.n.Load(), rep)
		}
		if cov, _ := store.Coverage(context.Background(), "sim/NEWUSDT"); cov.Covers(checkpoint.Range{Start: from, End: from.Add(time.Minute)}) {
			t.Fatalf("coverage %v after the second run, want none", cov)
		}
	})
}

// fixed serves body to every request, with status 200.
func fixed(body string) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: nopBody{strings.NewReader(body)}, Header: http.Header{}}, nil
	})}
}

type nopBody struct{ *strings.Reader }

func (nopBody) Close() error { return nil }

// row renders a kline row opening at ms.
func row(ms int64) string {
	return "[" + itoa(ms) + `,"1","2","0.5","1.5","10",` + itoa(ms+59999) + `,"15",3,"5","7","0"]`
}

// rows renders the rows opening at the given minutes after base.
func rows(base int64, minutes ...int64) string {
	var out []string
	for _, m := range minutes {
		out = append(out, row(base+m*60000))
	}
	return "[" + strings.Join(out, ",") + "]"
}

// rowOf renders a kline row opening at ms with the given open, high, low,
// close and volume, JSON-quoted.
func rowOf(ms int64, v ...string) string {
	var q []string
	for _, x := range v {
		q = append(q, strconv.Quote(x))
	}
	return "[" + itoa(ms) + "," + strings.Join(q, ",") + "," + itoa(ms+59999) + `,"15",3,"5","7","0"]`
}

// TestBrokenAnswersAreProviderErrors: rows newest first, repeated, off the
// interval's boundaries, outside the asked span, more than asked, values
// that are not decimal numbers (a newline that would forge a CSV line,
// NaN, Inf, empty, an exponent, a sign), a null answer or one past the 8
// MiB cap are permanent provider errors that say what broke, never skipped
// and never stored; an answer that is not JSON at all (empty, a gateway's
// HTML page, cut short) is a transient one, retried within the run's
// budget (one such page ended every stream of a follower for good).
func TestBrokenAnswersAreProviderErrors(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	from := now.Add(-24 * time.Hour)
	base := from.UnixMilli()
	value := func(i int, v string) string {
		vs := []string{"1", "2", "0.5", "1.5", "10"}
		vs[i] = v
		return "[" + row(base) + "," + rowOf(base+60000, vs...) + "]"
	}
	for _, tc := range []struct{ name, body, want string }{
		{"newest first", rows(base, 2, 1, 0), "rows must be oldest first"},
		{"duplicate", rows(base, 0, 1, 1, 2), "repeats the open time"},
		{"shifted", "[" + row(base+1000) + "]", "not on a 1m boundary"},
		{"before the span", rows(base, -1, 0), "outside the asked window"},
		{"after the span", rows(base, 0, 24*60+1), "outside the asked window"},                // one past it is asked for, as the proof the last one closed
		{"more than asked", rows(base, 0, 1, 2, 3, 4, 5, 6), "7 rows, more than the 6 asked"}, // a page of 5 and the one after
		{"a newline in a value", value(3, "1.5\n"+itoa(base)+",6.66,6.66,6.66,6.66,6.66"), `row 1: the close at 2030-01-01 00:01:00 +0000 UTC is "1.5\n`},
		{"NaN", value(0, "NaN"), `the open at 2030-01-01 00:01:00 +0000 UTC is "NaN", not a decimal number`},
		{"Inf", value(1, "+Inf"), `the high at 2030-01-01 00:01:00 +0000 UTC is "+Inf"`},
		{"empty value", value(2, ""), `the low at 2030-01-01 00:01:00 +0000 UTC is ""`},
		{"exponent", value(4, "1e5"), `the volume at 2030-01-01 00:01:00 +0000 UTC is "1e5"`},
		{"negative", value(4, "-1"), `"-1", not a decimal number`},
		{"null value", "[" + strings.Replace(row(base), `"10"`, "null", 1) + "]", `the volume at 2030-01-01 00:00:00 +0000 UTC is ""`},
		{"null", "null", "answered null"},
		{"empty body", "", "not JSON"},
		{"a gateway's page", "<html><body>502 Bad Gateway</body></html>", "not JSON"},
		{"cut short", "[" + row(base) + ",[", "not JSON"},
		{"not klines", `{"foo":1}`, "decode"},
		// Binance's error object with a 200: its words, classed by its code.
		{"an error object", `{"code":-1121,"msg":"Invalid symbol."}`, `provider said "Invalid symbol." (code -1121) with HTTP 200`},
		{"an unknown error", `{"code":-1000,"msg":"An unknown error occurred while processing the request."}`, "An unknown error occurred"},
		{"an error object without words", `{"code":-1000,"msg":""}`, `provider said "" (code -1000)`},
		{"past the cap", "[" + strings.Repeat(" ", klines.MaxAnswer) + "]", "answer larger than 8 MiB"},
	} {
		synctest.Test(t, func(t *testing.T) {
			src := &klines.Source{Client: fixed(tc.body), Base: "http://x", Symbol: "A", Interval: "1m", Page: 5, From: from,
				Now: func() time.Time { return now }}
			if err := src.Init(); err != nil {
				t.Fatal(err)
			}
			sl, ok, err := src.Next(context.Background(), nil, checkpoint.Range{})
			if !ok || err != nil {
				t.Fatalf("%s: Next = %v, %v", tc.name, ok, err)
			}
			p, _ := budget.NewLocal("x", budget.Config{})
			var attempts int
			err = p.Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
				attempts++
				page, out := src.Fetch(ctx, sl)
				if out.Err != nil && len(page.Records) > 0 {
					t.Errorf("%s: a failed fetch returned %d records", tc.name, len(page.Records))
				}
				return out
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s: Do = %v, want an error on one line saying %q", tc.name, err, tc.want)
			}
			if strings.Contains(tc.want, "not JSON") || strings.Contains(tc.want, "(code -1000)") || tc.name == "an unknown error" {
				// Not the provider's own answer, likely (a gateway's page):
				// transient, retried within the run's budget.
				if reason, _ := budget.ReasonOf(err); reason == forage.ReasonPermanent || attempts < 2 {
					t.Fatalf("%s: reason %s after %d attempts, want transient, retried", tc.name, reason, attempts)
				}
				return
			}
			if reason, _ := budget.ReasonOf(err); reason != forage.ReasonPermanent || attempts != 1 {
				t.Fatalf("%s: reason %s after %d attempts, want permanent after 1", tc.name, reason, attempts)
			}
		})
	}
}

// TestNewestFirstStopsTheRun: a provider that sends rows newest first ends
// the run with a permanent provider error; nothing is stored or committed.
func TestNewestFirstStopsTheRun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		listed := time.Now().Add(-time.Hour).Truncate(time.Minute)
		srv, _ := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
		reversed := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := srv.Client().Transport.RoundTrip(r)
			if err != nil {
				return resp, err
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return nil, err
			}
			rs := strings.Split(strings.TrimSuffix(strings.TrimPrefix(string(body), "[["), "]]"), "],[")
			slices.Reverse(rs)
			resp.Body = nopBody{strings.NewReader("[[" + strings.Join(rs, "],[") + "]]")}
			return resp, nil
		})
		src := &klines.Source{Client: &http.Client{Transport: reversed}, Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", Page: 10, From: listed}
		if err := src.Init(); err != nil {
			t.Fatal(err)
		}
		p, _ := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 100}})
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		writes := 0
		r, _ := slice.New(slice.Config[klines.Candle]{
			Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp, Store: store, Provider: p, Source: src,
			Sink: slice.SinkFunc[klines.Candle](func(context.Context, slice.Page[klines.Candle]) error { writes++; return nil }),
		})
		rep, err := r.Run(context.Background(), nil)
		if !errors.Is(err, budget.ErrStopped) || rep.Reason != forage.ReasonPermanent || !strings.Contains(err.Error(), "oldest first") {
			t.Fatalf("Run = %+v, %v: want a permanent provider error about the order", rep, err)
		}
		if cp, _ := store.Load(context.Background(), checkpoint.Key{Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp}); writes != 0 || cp.Version != 0 {
			t.Fatalf("%d writes, checkpoint %+v: want nothing stored or committed", writes, cp)
		}
	})
}

// TestPageCoversOnlyWhatWasReceived pins Fetch's pages, row by row,
// against an honest provider: one request per Fetch; the cursor moves to
// the last candle received, never past it, nor past a hole inside the
// answer until the next slice has verified the rows after the hole by the
// other path; an answer that starts late, or an empty one in settled
// history, keeps nothing and asks the next slice to confirm it, which then
// covers the stretch only if a candle confirms it; nothing near the head.
// Cursors are pinned in their text form (see cursor.go).
func TestPageCoversOnlyWhatWasReceived(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 0, 0, 30, 0, time.UTC) // the 00:00 candle is forming
	head := now.Truncate(time.Minute)
	from := head.Add(-24 * time.Hour)
	m := func(n int) time.Time { return from.Add(time.Duration(n) * time.Minute) }
	ms := func(n int) string { return strconv.FormatInt(m(n).UnixMilli(), 10) }
	const day = 24 * 60 // head is m(day)
	type step struct {
		next    string // the page's cursor, or its prefix ending in "~"
		covered checkpoint.Range
		records int
	}
	for _, tc := range []struct {
		name    string
		minutes []int // the provider's candles
		cap     int
		cursor  string // the cursor stored
		until   time.Time
		steps   []step // the pages of successive fetches, one request each
	}{
		{"full page", []int{0, 1, 2, 3, 4, 5, 6}, 0, "", head, []step{{ms(4) + "k", checkpoint.Range{Start: from, End: m(5)}, 5}}},
		{"short page in history", []int{0, 1, 2, 3, 4, 5}, 2, "", head, []step{{ms(1) + "k", checkpoint.Range{Start: from, End: m(2)}, 2}}},
		{"a hole inside the page, verified", []int{0, 1, 3, 4}, 0, "", head, []step{
			{ms(1) + "k~" + ms(4) + ":2:", checkpoint.Range{Start: from, End: m(2)}, 2},
			{ms(4) + "k", checkpoint.Range{Start: m(2), End: m(5)}, 2}}},
		{"the page after a halt (an old plain cursor)", []int{0, 1, 3, 4}, 0, ms(1), head, []step{
			{ms(1) + "?" + ms(3) + "k", checkpoint.Range{}, 0},
			{ms(2) + "k" + ms(1), checkpoint.Range{Start: m(2), End: m(3)}, 0},
			{ms(4) + "k", checkpoint.Range{Start: m(3), End: m(5)}, 2}}},
		{"the page after a halt", []int{0, 1, 5, 6}, 0, ms(1) + "k", head, []step{
			{ms(1) + "k?" + ms(5) + "k", checkpoint.Range{}, 0},
			{ms(4) + "k" + ms(1), checkpoint.Range{Start: m(2), End: m(5)}, 0}}},
		{"starts late (a listing)", []int{600, 601}, 0, "", head, []step{
			{"?" + ms(600) + "k", checkpoint.Range{}, 0},
			{ms(599), checkpoint.Range{Start: from, End: m(600)}, 0},
			{ms(601) + "k", checkpoint.Range{Start: m(600), End: m(602)}, 2}}},
		{"empty in settled history, nothing to confirm it", []int{600}, 0, "", m(60), []step{
			{"?" + ms(60), checkpoint.Range{}, 0},
			{"?" + ms(60), checkpoint.Range{}, 0}}}, // no progress: nothing covered
		{"empty up to the head after a candle", []int{0}, 0, ms(0) + "k", head, []step{ // settled: 10 minutes before the head
			{ms(0) + "k?" + ms(day-10), checkpoint.Range{}, 0},
			{ms(day-11) + "k" + ms(0), checkpoint.Range{Start: m(1), End: m(day - 10)}, 0}}},
		{"the last candle shown, not settled, waits for the next", []int{day - 3, day - 2}, 0, ms(day - 4), head, []step{
			{ms(day-3) + "k", checkpoint.Range{Start: m(day - 3), End: m(day - 2)}, 1}, // day-2 may be forming at the provider
			{ms(day-3) + "k", checkpoint.Range{}, 0}}},                                 // no progress until the provider shows day-1
		{"empty near the head", nil, 0, ms(day - 3), head, []step{{ms(day - 3), checkpoint.Range{}, 0}}},
		{"the forming candle is dropped", []int{day - 2, day - 1, day}, 0, ms(day - 2), head.Add(time.Hour), []step{
			{ms(day-1) + "k", checkpoint.Range{Start: m(day - 1), End: head}, 1}}},
	} {
		b := &book{t0: from, minutes: tc.minutes, cap: tc.cap}
		src := &klines.Source{Client: &http.Client{Transport: b}, Base: "http://x", Symbol: "A", Interval: "1m", Page: 5, From: from,
			Now: func() time.Time { return now }, Until: func() time.Time { return tc.until }}
		if err := src.Init(); err != nil {
			t.Fatal(err)
		}
		cursor := []byte(tc.cursor)
		for i, want := range tc.steps {
			sl, ok, err := src.Next(context.Background(), cursor, checkpoint.Range{})
			if !ok || err != nil {
				t.Fatalf("%s, step %d: Next = %v, %v", tc.name, i, ok, err)
			}
			sl.After = cursor
			page, out := src.Fetch(context.Background(), sl)
			if out.Err != nil {
				t.Fatalf("%s, step %d: Fetch error %v", tc.name, i, out.Err)
			}
			next := string(page.Next)
			match := next == want.next || strings.HasSuffix(want.next, ":") && strings.HasPrefix(next, want.next)
			if !match || page.Covered != want.covered || len(page.Records) != want.records || b.calls.Load() != int64(i+1) {
				t.Fatalf("%s, step %d: page next %q covered %v with %d records after %d requests, want next %q covered %v with %d after %d",
					tc.name, i, next, page.Covered, len(page.Records), b.calls.Load(), want.next, want.covered, want.records, i+1)
			}
			cursor = page.Next
		}
	}
}

// TestExpect: no prediction for the first slice of a stream; then the last
// of Page candles from the span's start, or the span's last candle, or, once
// the provider has answered fewer rows than asked, the last of as many.
func TestExpect(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 0, 0, 30, 0, time.UTC)
	from := now.Truncate(time.Minute).Add(-24 * time.Hour)
	src := &klines.Source{Client: fixed(rows(from.UnixMilli(), 0, 1, 2)), Base: "http://x", Symbol: "A", Interval: "1m", Page: 5, From: from,
		Now: func() time.Time { return now }}
	if err := src.Init(); err != nil {
		t.Fatal(err)
	}
	at := func(c []byte) time.Time { t.Helper(); tm, _ := klines.DecodeCursor(c); return tm }
	first, _, _ := src.Next(context.Background(), nil, checkpoint.Range{})
	if next, ok := src.Expect(first); ok {
		t.Fatalf("Expect(first slice) = %v, want no prediction", at(next))
	}
	after := klines.EncodeCursor(from.Add(9 * time.Minute))
	sl, _, _ := src.Next(context.Background(), after, checkpoint.Range{})
	sl.After = after
	if next, ok := src.Expect(sl); !ok || !at(next).Equal(from.Add(14*time.Minute)) {
		t.Fatalf("Expect = %v, %v: want the 5th candle after the cursor, %v", at(next), ok, from.Add(14*time.Minute))
	}
	near := klines.EncodeCursor(now.Truncate(time.Minute).Add(-3 * time.Minute))
	end, _, _ := src.Next(context.Background(), near, checkpoint.Range{})
	end.After = near
	if next, ok := src.Expect(end); !ok || !at(next).Equal(now.Truncate(time.Minute).Add(-time.Minute)) {
		t.Fatalf("Expect(last slice) = %v, %v: want the last closed candle", at(next), ok)
	}
	src.Fetch(context.Background(), first) // 3 rows of the 5 asked: the cap is learned
	if next, ok := src.Expect(sl); !ok || !at(next).Equal(from.Add(12*time.Minute)) {
		t.Fatalf("Expect after a 3-row answer = %v, %v: want the 3rd candle after the cursor", at(next), ok)
	}
}

// TestNextAlignsToBinanceBoundaries: candles open on multiples of the
// interval since the Unix epoch, weeks on Mondays.
func TestNextAlignsToBinanceBoundaries(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(1970, 1, d, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		interval   string
		from, want time.Time
	}{
		{"3d", day(6).Add(time.Hour), day(4)},
		{"1w", day(8).Add(time.Hour), day(5)}, // Thursday 8th: the week opened Monday 5th
		{"1d", day(8).Add(time.Hour), day(8)},
		{"4h", day(8).Add(5 * time.Hour), day(8).Add(4 * time.Hour)},
	} {
		src := &klines.Source{Base: "http://x", Symbol: "A", Interval: tc.interval, Page: 5, From: tc.from,
			Until: func() time.Time { return day(30) }}
		if err := src.Init(); err != nil {
			t.Fatal(err)
		}
		sl, ok, err := src.Next(context.Background(), nil, checkpoint.Range{})
		if !ok || err != nil || !sl.Range.Start.Equal(tc.want) {
			t.Fatalf("%s from %v: slice %v (%v, %v), want it to start at %v", tc.interval, tc.from, sl.Range, ok, err, tc.want)
		}
	}
}

// TestProviderTextIsRedacted: an error answer that echoes a signed request
// URL, and a value carrying one, become errors that name the URL without
// its secrets, so a host may log or store them as they are.
func TestProviderTextIsRedacted(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	from := now.Add(-24 * time.Hour)
	signed := "https://x.test/api?apikey=SECRET123&signature=abc"
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"error message", 400, `{"code":-1100,"msg":"bad request ` + signed + `"}`},
		{"value", 200, "[" + rowOf(from.UnixMilli(), "1", "2", "0.5", "1.5", "apikey=SECRET123") + "]"},
	} {
		synctest.Test(t, func(t *testing.T) {
			client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: tc.status, Body: nopBody{strings.NewReader(tc.body)}, Header: http.Header{}}, nil
			})}
			src := &klines.Source{Client: client, Base: "http://x", Symbol: "A", Interval: "1m", Page: 5, From: from,
				Now: func() time.Time { return now }}
			if err := src.Init(); err != nil {
				t.Fatal(err)
			}
			sl, _, err := src.Next(context.Background(), nil, checkpoint.Range{})
			if err != nil {
				t.Fatal(err)
			}
			_, out := src.Fetch(context.Background(), sl)
			if out.Err == nil || strings.Contains(out.Err.Error(), "SECRET123") || !strings.Contains(out.Err.Error(), "apikey=") {
				t.Fatalf("%s: Fetch error %v, want one naming apikey= without its value", tc.name, out.Err)
			}
		})
	}
}

// TestInitNamesTheBadField: Init refuses each bad field of a Source with an
// error that names it and wraps ErrInvalidConfig.
func TestInitNamesTheBadField(t *testing.T) {
	t.Parallel()
	valid := func() klines.Source {
		return klines.Source{Base: "http://x", Symbol: "BTCUSDT", Interval: "1m", Page: 10}
	}
	for _, tc := range []struct {
		edit  func(*klines.Source)
		field string
	}{
		{func(s *klines.Source) { s.Interval = "1M" }, "Interval"},
		{func(s *klines.Source) { s.Page = -1 }, "Page"},
		{func(s *klines.Source) { s.Page = 1001 }, "Page"},
		{func(s *klines.Source) { s.Symbol = "" }, "Symbol"},
		{func(s *klines.Source) { s.Base = "" }, "Base"},
		// A query would take the request's path into it (requests went to
		// "/" and failed 404); a port out of range fails every request.
		{func(s *klines.Source) { s.Base = "http://x/?apikey=SECRET" }, "Base"},
		{func(s *klines.Source) { s.Base = "http://x/#f" }, "Base"},
		{func(s *klines.Source) { s.Base = "http://x:99999999" }, "Base"},
		{func(s *klines.Source) { s.Base = "ftp://x" }, "Base"},
		{func(s *klines.Source) { s.Base = "x.example" }, "Base"},
	} {
		src := valid()
		tc.edit(&src)
		err := src.Init()
		want := "klines: Source." + tc.field + " must "
		if !errors.Is(err, klines.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("Init with a bad %s = %v, want ErrInvalidConfig starting %q, no secret", tc.field, err, want)
		}
	}
	for _, base := range []string{"http://x", "https://api.binance.com", "http://127.0.0.1:8080", "https://x/api/", "http://[::1]:80"} {
		src := valid()
		if src.Base = base; src.Init() != nil {
			t.Errorf("Init with Base %q = %v, want nil", base, src.Init())
		}
	}
	if def := (klines.Source{Base: "http://x", Symbol: "BTCUSDT", Interval: "1m"}); def.Init() != nil || def.Page != 1000 {
		t.Errorf("Init with Page 0: Page %d; want the default, 1000", def.Page)
	}
}
