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

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/klines"
	"github.com/forage-go/forage/internal/sim"
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
// and returns the report, the candles' open times in the order written,
// and the store.
func collect(t *testing.T, src *klines.Source, store checkpoint.Store) (slice.Report, []time.Time) {
	t.Helper()
	if err := src.Init(); err != nil {
		t.Fatal(err)
	}
	p, err := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Time
	r, err := slice.New(slice.Config[klines.Candle]{
		Stream: "sim/" + src.Symbol + "/" + src.Interval, Mode: checkpoint.CatchUp, Store: store, Provider: p, Source: src,
		Series: "sim/" + src.Symbol,
		Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, pg slice.Page[klines.Candle]) error {
			for _, c := range pg.Records {
				got = append(got, c.OpenTime)
			}
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background(), nil)
	if err != nil {
		t.Fatalf("Run = %+v, %v", rep, err)
	}
	return rep, got
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

// TestBeforeListingCostsOneRequest: a month before the symbol's listing is
// answered by the first request with the candles from the listing on:
// collecting 10 hours of candles in pages of 100 takes 6 requests, not the
// 432 more a window per page of the empty month would, and the month is
// covered.
func TestBeforeListingCostsOneRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		listed := time.Now().Add(-10 * time.Hour).Truncate(time.Minute)
		srv, err := sim.New(sim.Config{Symbols: []sim.Symbol{{Name: "NEWUSDT", Listed: listed}}})
		if err != nil {
			t.Fatal(err)
		}
		tr := &counting{rt: srv.Transport()}
		from := listed.Add(-30 * 24 * time.Hour)
		src := &klines.Source{Client: &http.Client{Transport: tr}, Base: "http://sim", Symbol: "NEWUSDT", Interval: "1m", Page: 100, From: from}
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		rep, got := collect(t, src, store)
		now := time.Now().Truncate(time.Minute)
		contiguous(t, got, listed, now, time.Minute)
		if tr.n.Load() != 6 || rep.Slices != 6 || rep.Discarded != 0 {
			t.Fatalf("%d requests, report %+v: want 6 requests, 6 slices, none discarded", tr.n.Load(), rep)
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
		srv, err := sim.New(sim.Config{Symbols: []sim.Symbol{{Name: "BTCUSDT", Listed: listed}}})
		if err != nil {
			t.Fatal(err)
		}
		tr := &counting{rt: srv.Transport(), cap: 500}
		src := &klines.Source{Client: &http.Client{Transport: tr}, Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", Page: 1000, From: listed}
		rep, got := collect(t, src, checkpoint.NewMemoryStore(checkpoint.Config{}))
		contiguous(t, got, listed, time.Now().Truncate(time.Minute), time.Minute)
		if tr.n.Load() != 6 || rep.Discarded != 0 {
			t.Fatalf("%d requests, report %+v: want 6 requests (2880 candles, 500 an answer), none discarded", tr.n.Load(), rep)
		}
	})
}

// TestEmptyHistoryIsCoveredInOneRequest: nothing between From and a fixed
// Until in settled history (the symbol was listed after it): one request
// covers the whole span and moves the cursor to its last candle, and a
// second run makes none.
func TestEmptyHistoryIsCoveredInOneRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		now := time.Now().Truncate(time.Minute)
		srv, _ := sim.New(sim.Config{Symbols: []sim.Symbol{{Name: "NEWUSDT", Listed: now.Add(-time.Hour)}}})
		tr := &counting{rt: srv.Transport()}
		from, until := now.Add(-72*time.Hour), now.Add(-2*time.Hour)
		src := &klines.Source{Client: &http.Client{Transport: tr}, Base: "http://sim", Symbol: "NEWUSDT", Interval: "1m", Page: 1000,
			From: from, Until: func() time.Time { return until }}
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		rep, got := collect(t, src, store)
		if len(got) != 0 || tr.n.Load() != 1 || string(rep.Cursor) != string(klines.EncodeCursor(until.Add(-time.Minute))) {
			t.Fatalf("%d candles in %d requests, report %+v: want none in 1 request, cursor at the last minute before Until", len(got), tr.n.Load(), rep)
		}
		if cov, _ := store.Coverage(context.Background(), "sim/NEWUSDT"); !cov.Covers(checkpoint.Range{Start: from, End: until}) {
			t.Fatalf("coverage %v, want [%v, %v)", cov, from, until)
		}
		if _, got = collect(t, src, store); len(got) != 0 || tr.n.Load() != 1 {
			t.Fatalf("a second run made %d requests in all", tr.n.Load())
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

// TestBrokenAnswersAreProviderErrors: rows newest first, repeated,
// off the interval's boundaries, outside the asked span, more than asked,
// or a null answer are classified provider errors (permanent, but a null
// answer is worth a retry), never skipped and never stored.
func TestBrokenAnswersAreProviderErrors(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	from := now.Add(-24 * time.Hour)
	base := from.UnixMilli()
	for _, tc := range []struct {
		name, body, want string
		transient        bool
	}{
		{"newest first", rows(base, 2, 1, 0), "rows must be oldest first", false},
		{"duplicate", rows(base, 0, 1, 1, 2), "repeats the open time", false},
		{"shifted", "[" + row(base+1000) + "]", "not on a 1m boundary", false},
		{"before the span", rows(base, -1, 0), "outside the asked window", false},
		{"after the span", rows(base, 0, 24*60), "outside the asked window", false},
		{"more than asked", rows(base, 0, 1, 2, 3, 4, 5), "6 rows, more than the 5 asked", false},
		{"null", "null", "answered null", true},
		{"not klines", `{"foo":1}`, "decode", false},
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
			err = p.Do(context.Background(), nil, func(ctx context.Context) budget.Outcome {
				attempts++
				page, out := src.Fetch(ctx, sl)
				if out.Err != nil && len(page.Records) > 0 {
					t.Errorf("%s: a failed fetch returned %d records", tc.name, len(page.Records))
				}
				return out
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: Do = %v, want an error saying %q", tc.name, err, tc.want)
			}
			reason, _ := budget.ReasonOf(err)
			if permanent := reason == budget.ReasonPermanent; permanent == tc.transient || permanent != (attempts == 1) {
				t.Fatalf("%s: reason %s after %d attempts, want transient %v", tc.name, reason, attempts, tc.transient)
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
		srv, _ := sim.New(sim.Config{Symbols: []sim.Symbol{{Name: "BTCUSDT", Listed: listed}}})
		reversed := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := srv.Transport().RoundTrip(r)
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
		if !errors.Is(err, budget.ErrStopped) || rep.Reason != budget.ReasonPermanent || !strings.Contains(err.Error(), "oldest first") {
			t.Fatalf("Run = %+v, %v: want a permanent provider error about the order", rep, err)
		}
		if cp, _ := store.Load(context.Background(), r.Key()); writes != 0 || cp.Version != 0 {
			t.Fatalf("%d writes, checkpoint %+v: want nothing stored or committed", writes, cp)
		}
	})
}

// TestPageCoversOnlyWhatWasReceived pins Fetch's page, row by row: the
// cursor moves to the last candle received, never past it; an empty answer
// covers its span in settled history and nothing near the head.
func TestPageCoversOnlyWhatWasReceived(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 0, 0, 30, 0, time.UTC) // the 00:00 candle is forming
	head := now.Truncate(time.Minute)
	from := head.Add(-24 * time.Hour)
	base := from.UnixMilli()
	m := func(n int64) time.Time { return from.Add(time.Duration(n) * time.Minute) }
	for _, tc := range []struct {
		name    string
		until   time.Time
		body    string
		next    time.Time
		covered checkpoint.Range
		records int
	}{
		{"full page", head, rows(base, 0, 1, 2, 3, 4), m(4), checkpoint.Range{Start: from, End: m(5)}, 5},
		{"short page in history", head, rows(base, 0, 1), m(1), checkpoint.Range{Start: from, End: m(2)}, 2},
		{"a halt inside the page", head, rows(base, 0, 1, 3), m(3), checkpoint.Range{Start: from, End: m(4)}, 3},
		{"starts late (a listing)", head, rows(base, 600, 601), m(601), checkpoint.Range{Start: from, End: m(602)}, 2},
		{"empty in settled history", m(60), "[]", m(59), checkpoint.Range{Start: from, End: m(60)}, 0},
		{"empty near the head", head, "[]", from.Add(-time.Minute), checkpoint.Range{}, 0},
		{"the forming candle is dropped", head.Add(time.Hour), rows(head.UnixMilli(), -1, 0), head.Add(-time.Minute),
			checkpoint.Range{Start: head.Add(-time.Minute), End: head}, 1},
	} {
		src := &klines.Source{Client: fixed(tc.body), Base: "http://x", Symbol: "A", Interval: "1m", Page: 5, From: from,
			Now: func() time.Time { return now }, Until: func() time.Time { return tc.until }}
		if err := src.Init(); err != nil {
			t.Fatal(err)
		}
		cursor := []byte(nil)
		if tc.name == "the forming candle is dropped" {
			cursor = klines.EncodeCursor(head.Add(-2 * time.Minute))
		}
		sl, ok, err := src.Next(context.Background(), cursor, checkpoint.Range{})
		if !ok || err != nil {
			t.Fatalf("%s: Next = %v, %v", tc.name, ok, err)
		}
		sl.After = cursor
		page, out := src.Fetch(context.Background(), sl)
		if out.Err != nil {
			t.Fatalf("%s: Fetch error %v", tc.name, out.Err)
		}
		if string(page.Next) != string(klines.EncodeCursor(tc.next)) || page.Covered != tc.covered || len(page.Records) != tc.records {
			next, _ := klines.DecodeCursor(page.Next)
			t.Fatalf("%s: page next %v covered %v with %d records, want next %v covered %v with %d",
				tc.name, next, page.Covered, len(page.Records), tc.next, tc.covered, tc.records)
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
