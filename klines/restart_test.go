package klines_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
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

// outageExchange answers klines like Binance for one-minute candles at
// every minute of [from, to) except those of [gapFrom, gapTo): an outage
// the exchange genuinely has no candles for. A ranged request gets the
// first limit candles at or after startTime; one without startTime the
// last limit candles up to endTime.
func outageExchange(from, to, gapFrom, gapTo time.Time) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		end, _ := strconv.ParseInt(q.Get("endTime"), 10, 64)
		var all []int64
		for t := from; t.Before(to); t = t.Add(time.Minute) {
			if ms := t.UnixMilli(); (t.Before(gapFrom) || !t.Before(gapTo)) && (q.Get("endTime") == "" || ms <= end) {
				all = append(all, ms)
			}
		}
		if s := q.Get("startTime"); s != "" {
			start, _ := strconv.ParseInt(s, 10, 64)
			i := 0
			for i < len(all) && all[i] < start {
				i++
			}
			all = all[i:min(i+limit, len(all))]
		} else {
			all = all[max(len(all)-limit, 0):]
		}
		var out []string
		for _, ms := range all {
			out = append(out, row(ms))
		}
		return &http.Response{StatusCode: 200, Body: nopBody{strings.NewReader("[" + strings.Join(out, ",") + "]")}, Header: http.Header{}}, nil
	})}
}

// runCapped runs a catch-up stream of src (a new Source is a new process)
// into store, with at most maxRequests requests (0: no cap), and returns
// the report and the candles' open times in the order written.
func runCapped(t *testing.T, src *klines.Source, store checkpoint.Store, maxRequests int) (slice.Report, []time.Time) {
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
	var run *budget.Run
	if maxRequests > 0 {
		if run, err = budget.NewRun(budget.Envelope{MaxRequests: maxRequests}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := r.Run(context.Background(), run)
	if err != nil {
		t.Fatalf("Run = %+v, %v", rep, err)
	}
	return rep, got
}

// TestAClaimLeftByAnEarlierProcessIsMadeAgain: a run whose last page
// claimed a stretch without candles (an answer that started late: an
// outage in the exchange's history, or a symbol listed after the stream's
// start) and stopped before confirming it leaves the claim in its cursor.
// A new process does not trust a claim it did not see made, and asks the
// stretch again; the answer makes the same claim, which it then confirms,
// and collects on. (It read the claim made again as no progress, caught up:
// every later run ended done, or empty, with every candle after the
// stretch never fetched.)
func TestAClaimLeftByAnEarlierProcessIsMadeAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		gap     time.Duration // the stretch without candles, from the stream's start + skip
		skip    time.Duration // candles before it
		stopped int           // requests of the first run
	}{
		{name: "an outage", skip: 30 * time.Minute, gap: 10 * time.Minute, stopped: 2},
		{name: "listed after the start", gap: 30 * time.Minute, stopped: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				from := time.Now().Add(-24 * time.Hour).Truncate(time.Hour)
				to := from.Add(2 * time.Hour)
				gapFrom := from.Add(tc.skip)
				client := outageExchange(from, time.Now(), gapFrom, gapFrom.Add(tc.gap))
				source := func() *klines.Source {
					return &klines.Source{Client: client, Base: "http://x", Symbol: "BTCUSDT", Interval: "1m", Page: 30,
						From: from, Until: func() time.Time { return to }}
				}
				store := checkpoint.NewMemoryStore(checkpoint.Config{})
				_, first := runCapped(t, source(), store, tc.stopped)
				var got []time.Time
				got = append(got, first...)
				for range 3 { // restarts until done
					rep, more := runCapped(t, source(), store, 0)
					got = append(got, more...)
					if rep.Reason == "" && len(more) == 0 {
						break
					}
				}
				var want []time.Time
				for m := from; m.Before(to); m = m.Add(time.Minute) {
					if m.Before(gapFrom) || !m.Before(gapFrom.Add(tc.gap)) {
						want = append(want, m)
					}
				}
				if len(got) != len(want) {
					t.Fatalf("%d candles stored over the runs, want %d: [%v, %v) less the %v from %v", len(got), len(want), from, to, tc.gap, gapFrom)
				}
				for i := range want {
					if !got[i].Equal(want[i]) {
						t.Fatalf("candle %d at %v, want %v", i, got[i], want[i])
					}
				}
			})
		})
	}
}

// TestALaggingProviderNeverHasAFormingCandleStored: a provider whose clock
// runs 3 s (or 4 minutes) behind ours still serves the candle this clock
// has just closed as forming, its values moving. A catch-up just after the
// close stores every candle with its final values, and not the one the
// provider has yet to close: it waits for a page that shows the one after
// it. (It was stored with the forming values, for good: the sink upserts
// on the open time and no later page asks for it again.)
func TestALaggingProviderNeverHasAFormingCandleStored(t *testing.T) {
	t.Parallel()
	for _, lag := range []time.Duration{3 * time.Second, 4 * time.Minute} {
		t.Run(lag.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(2 * time.Second) // just after a close, by our clock
				cfg := providertest.Config{Now: func() time.Time { return time.Now().Add(-lag) },
					Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}}
				srv, err := providertest.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				from := time.Now().Truncate(time.Minute).Add(-3 * time.Hour)
				src := &klines.Source{Client: srv.Client(), Base: "http://x", Symbol: "BTCUSDT", Interval: "1m", Page: 1000, From: from}
				var stored []klines.Candle
				if err := src.Init(); err != nil {
					t.Fatal(err)
				}
				p, _ := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 100}})
				r, err := slice.New(slice.Config[klines.Candle]{
					Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: p, Source: src,
					Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, pg slice.Page[klines.Candle]) error {
						stored = append(stored, pg.Records...)
						return nil
					}),
				})
				if err != nil {
					t.Fatal(err)
				}
				// Two runs, 7 minutes apart: the second stores what the
				// provider closed since, nothing skipped (a lag of minutes
				// once had the minutes it had not published covered).
				for i := range 2 {
					if i > 0 {
						time.Sleep(7 * time.Minute)
					}
					// Caught up with the provider's head (its answers'
					// Date tell its clock), or behind, asking again within
					// a minute: never the forming candle stored.
					rep, err := r.Run(context.Background(), nil)
					behind := rep.Reason == forage.ReasonBehind && rep.Until.After(time.Now()) && !rep.Until.After(time.Now().Add(time.Minute))
					if err != nil || rep.Reason != "" && !behind {
						t.Fatalf("Run = %+v, %v; want caught up, or behind asking again within a minute", rep, err)
					}
				}
				final, err := srv.KlinesAt(time.Now().Add(time.Hour), providertest.Query{Symbol: "BTCUSDT", Interval: "1m", Start: from, End: time.Now(), Limit: 1000})
				if err != nil {
					t.Fatal(err)
				}
				closedThere := time.Now().Add(-lag).Truncate(time.Minute) // the provider's forming candle
				if want := int(closedThere.Sub(from) / time.Minute); len(stored) != want {
					t.Fatalf("%d candles stored, want %d: every one the provider has closed", len(stored), want)
				}
				for i, c := range stored {
					k := final[i]
					if c.OpenTime.UnixMilli() != k.OpenTime || c.Close != k.Close || c.High != k.High || c.Low != k.Low || c.Volume != k.Volume {
						t.Fatalf("candle %v stored as %+v, its final values are %+v: stored while forming", c.OpenTime, c, k)
					}
				}
			})
		})
	}
}
