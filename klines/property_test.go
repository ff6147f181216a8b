package klines_test

import (
	"context"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/slice"
)

// book is a provider's history: the minutes (after t0) that have a candle,
// ascending. It answers a klines request like Binance: with a startTime,
// the first candles at or after it, up to endTime inclusive; without one,
// the last candles up to endTime. It answers at most cap of them (0: no
// cap), and counts the requests and, of them, the confirmations (those
// without a startTime).
type book struct {
	t0       time.Time
	minutes  []int
	cap      int
	calls    atomic.Int64
	confirms atomic.Int64
	// drops makes it lie: the k-th ranged answer (from 0) leaves out its
	// row drops[k] (modulo its length; negative: none). Confirmations are
	// answered honestly.
	drops  []int
	ranged atomic.Int64
}

func (b *book) RoundTrip(r *http.Request) (*http.Response, error) {
	b.calls.Add(1)
	q := r.URL.Query()
	start, err := strconv.ParseInt(q.Get("startTime"), 10, 64)
	ranged := err == nil
	if !ranged {
		b.confirms.Add(1)
	}
	end, _ := strconv.ParseInt(q.Get("endTime"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	if b.cap > 0 {
		limit = min(limit, b.cap)
	}
	var out []int64
	for _, m := range b.minutes {
		if ms := b.t0.Add(time.Duration(m) * time.Minute).UnixMilli(); (!ranged || ms >= start) && ms <= end {
			out = append(out, ms)
		}
	}
	if len(out) > limit {
		if ranged {
			out = out[:limit]
		} else {
			out = out[len(out)-limit:]
		}
	}
	if k := int(b.ranged.Add(1)) - 1; ranged && k < len(b.drops) && b.drops[k] >= 0 && len(out) > 0 {
		out = slices.Delete(out, b.drops[k]%len(out), b.drops[k]%len(out)+1)
	}
	var rs []string
	for _, ms := range out {
		rs = append(rs, row(ms))
	}
	return &http.Response{StatusCode: 200, Body: nopBody{strings.NewReader("[" + strings.Join(rs, ",") + "]")}, Header: http.Header{}}, nil
}

// TestPropCollectsExactlyWhatTheProviderHas: whatever the provider's
// history (a late listing, halts, an early end), whatever cap it puts on
// its answers below the page asked for and however far the run fetches
// ahead, a catch-up run stores every candle once, in order, and every
// request is a slice of its own (one attempt to the budget): committed,
// discarded, or the last one, which made no progress. A page ends full,
// at a halt or at the last candle; a halt inside a page is corroborated by
// the next page, one at a page's start costs a confirmation; so there are
// at most one slice per capped answer's worth of candles, three per halt
// and three for the end, and at most one confirmation per halt and one for
// the empty rest.
func TestPropCollectsExactlyWhatTheProviderHas(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		const span = 600 // minutes between From and Until
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		minutes := rapid.SliceOfNDistinct(rapid.IntRange(0, span-1), 0, span, rapid.ID[int]).Draw(t, "minutes with a candle")
		slices.Sort(minutes)
		page := rapid.IntRange(1, 50).Draw(t, "page")
		b := &book{t0: t0, minutes: minutes, cap: rapid.IntRange(1, page).Draw(t, "provider cap")}
		src := &klines.Source{Client: &http.Client{Transport: b}, Base: "http://x", Symbol: "A", Interval: "1m", Page: page, From: t0,
			Until: func() time.Time { return t0.Add(span * time.Minute) }, Now: func() time.Time { return t0.Add(48 * time.Hour) }}
		if err := src.Init(); err != nil {
			t.Fatal(err)
		}
		prefetch := rapid.IntRange(slice.NoPrefetch, 6).Draw(t, "prefetch")
		p, _ := budget.NewLocal("x", budget.Config{Burst: 1000, Adaptive: aimd.Config{Initial: 1e5, Max: 1e5}})
		var got []int
		r, err := slice.New(slice.Config[klines.Candle]{
			Stream: "x/A/1m", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: p, Source: src,
			Prefetch: prefetch,
			Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, pg slice.Page[klines.Candle]) error {
				for _, c := range pg.Records {
					got = append(got, int(c.OpenTime.Sub(t0)/time.Minute))
				}
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.Run(context.Background(), nil)
		if err != nil || rep.Reason != "" {
			t.Fatalf("Run = %+v, %v", rep, err)
		}
		if !slices.Equal(got, minutes) && len(got)+len(minutes) > 0 {
			t.Fatalf("stored minutes %v, want %v", got, minutes)
		}
		halts := 0 // stretches without candles, before a candle
		for i := range minutes {
			if i == 0 && minutes[0] > 0 || i > 0 && minutes[i] > minutes[i-1]+1 {
				halts++
			}
		}
		requests, confirms := int(b.calls.Load()), int(b.confirms.Load())
		// Every request is one slice: committed, discarded, or the last
		// one, which made no progress. A halt costs at most its page, a
		// confirmation and the page after it.
		most := len(minutes)/b.cap + 3*halts + 3
		if requests < rep.Slices || requests > rep.Slices+rep.Discarded+1 || rep.Slices > most || confirms > halts+1 ||
			prefetch == slice.NoPrefetch && requests > rep.Slices+1 {
			t.Fatalf("%d requests and %d confirmations (%d halts) for report %+v: want each request a committed or discarded slice or the last one, at most %d slices, a confirmation per halt",
				requests, confirms, halts, rep, most)
		}
	})
}

// TestPropDroppedRowsNeverLeaveASilentHole: whatever rows a provider leaves
// out of its answers (the first, the last, one in the middle, the only
// one), whatever its history, page, cap and prefetch, a catch-up run either
// stores every candle once, in order, or stops with a permanent provider
// error that says the answer left out candles, having stored the first
// candles, without a hole; a second run against the honest provider
// then stores the rest. Never a run that ends without error with a hole.
func TestPropDroppedRowsNeverLeaveASilentHole(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		const span = 300
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		minutes := rapid.SliceOfNDistinct(rapid.IntRange(0, span-1), 0, span, rapid.ID[int]).Draw(t, "minutes with a candle")
		slices.Sort(minutes)
		page := rapid.IntRange(1, 50).Draw(t, "page")
		b := &book{t0: t0, minutes: minutes, cap: rapid.IntRange(1, page).Draw(t, "provider cap"),
			drops: rapid.SliceOfN(rapid.IntRange(-1, 50), 0, 30).Draw(t, "row dropped from each answer")}
		prefetch := rapid.IntRange(slice.NoPrefetch, 4).Draw(t, "prefetch")
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		var got []int
		run := func(rt http.RoundTripper) (slice.Report, error) {
			src := &klines.Source{Client: &http.Client{Transport: rt}, Base: "http://x", Symbol: "A", Interval: "1m", Page: page, From: t0,
				Until: func() time.Time { return t0.Add(span * time.Minute) }, Now: func() time.Time { return t0.Add(48 * time.Hour) }}
			if err := src.Init(); err != nil {
				t.Fatal(err)
			}
			p, _ := budget.NewLocal("x", budget.Config{Burst: 1000, Adaptive: aimd.Config{Initial: 1e5, Max: 1e5}})
			r, err := slice.New(slice.Config[klines.Candle]{
				Stream: "x/A/1m", Mode: checkpoint.CatchUp, Store: store, Provider: p, Source: src, Prefetch: prefetch,
				Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, pg slice.Page[klines.Candle]) error {
					for _, c := range pg.Records {
						got = append(got, int(c.OpenTime.Sub(t0)/time.Minute))
					}
					return nil
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			return r.Run(context.Background(), nil)
		}
		rep, err := run(b)
		if err != nil && (rep.Reason != forage.ReasonPermanent || !strings.Contains(err.Error(), "leaves out candles")) {
			t.Fatalf("Run = %+v, %v: want success or a permanent error about left-out candles", rep, err)
		}
		if len(got) > len(minutes) || !slices.Equal(got, minutes[:len(got)]) {
			t.Fatalf("stored minutes %v, want a prefix of %v", got, minutes)
		}
		if err == nil && !slices.Equal(got, minutes) {
			t.Fatalf("a run without error stored %v, want %v: a silent hole", got, minutes)
		}
		if rep, err := run(&book{t0: t0, minutes: minutes, cap: b.cap}); err != nil || rep.Reason != "" {
			t.Fatalf("honest run = %+v, %v", rep, err)
		}
		if !slices.Equal(got, minutes) && len(got)+len(minutes) > 0 {
			t.Fatalf("after the honest run stored %v, want %v", got, minutes)
		}
	})
}

// TestPropSinkStoresExactlyTheValidCandles: whatever pages are written,
// with values that are decimals or anything a provider might send (a
// newline and a forged line, commas, quotes, NaN, any text), and however
// often the sink is closed and opened again, a page with a value that is
// not a decimal is refused whole, and the file holds exactly the first
// accepted candle of every open time, with its values: Export and Len
// agree with that model.
func TestPropSinkStoresExactlyTheValidCandles(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "sinkprop")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		sink, err := klines.OpenFileSink(dir, "A", "1m")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { sink.Close() }()
		value := rapid.OneOf(
			rapid.StringMatching(`[0-9]{1,12}(\.[0-9]{1,8})?`),
			rapid.SampledFrom([]string{"1\n0,6.66,6.66,6.66,6.66,6.66", "1,2", `"1"`, "NaN", "-1", "", "1e9"}),
			rapid.String(),
		)
		model := make(map[int64]string)
		for i := range rapid.IntRange(1, 12).Draw(t, "pages") {
			var page []klines.Candle
			valid := true
			for range rapid.IntRange(0, 5).Draw(t, "candles") {
				c := klines.Candle{OpenTime: klines.Time(int64(rapid.IntRange(0, 20).Draw(t, "minute")) * 60000),
					Open: value.Draw(t, "open"), High: value.Draw(t, "high"), Low: value.Draw(t, "low"), Close: value.Draw(t, "close"), Volume: value.Draw(t, "volume")}
				for _, v := range []string{c.Open, c.High, c.Low, c.Close, c.Volume} {
					valid = valid && klines.ValidDecimal(v)
				}
				page = append(page, c)
			}
			err := sink.Write(context.Background(), slice.Page[klines.Candle]{Records: page})
			if (err == nil) != valid {
				t.Fatalf("page %d: Write = %v, want an error iff a value is not a decimal (valid %v)", i, err, valid)
			}
			for _, c := range page {
				if ms := c.OpenTime.UnixMilli(); valid && model[ms] == "" {
					model[ms] = strings.Join([]string{strconv.FormatInt(ms, 10), c.Open, c.High, c.Low, c.Close, c.Volume}, ",")
				}
			}
			if rapid.Bool().Draw(t, "reopen") {
				sink.Close()
				if sink, err = klines.OpenFileSink(dir, "A", "1m"); err != nil {
					t.Fatal(err)
				}
			}
		}
		lines, err := klines.Export(dir, "A", "1m")
		want := slices.Collect(maps.Values(model))
		slices.SortFunc(want, func(a, b string) int {
			x, _, _ := strings.Cut(a, ",")
			y, _, _ := strings.Cut(b, ",")
			n, _ := strconv.Atoi(x)
			m, _ := strconv.Atoi(y)
			return n - m
		})
		if err != nil || !slices.Equal(lines, want) || sink.Len() != len(model) {
			t.Fatalf("export %q (%v), %d in the sink, want %q", lines, err, sink.Len(), want)
		}
	})
}
