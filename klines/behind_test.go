package klines_test

import (
	"context"
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

// TestADrainNeverResolvesARangeItDidNotFill: a range gap that ends at the
// head, drained while the provider runs 4 minutes behind, is filled as far
// as the provider has published, and what is left stays a gap (behind,
// with when to ask again) until a later drain fills it. (The drain
// resolved the gap with its last candles never fetched: the fill read the
// provider's "not yet" as the range done.)
func TestADrainNeverResolvesARangeItDidNotFill(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(2 * time.Second)
		const lag = 4 * time.Minute
		srv, err := providertest.New(providertest.Config{Now: func() time.Time { return time.Now().Add(-lag) },
			Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().Truncate(time.Minute)
		from := now.Add(-time.Hour)
		src := &klines.Source{Client: srv.Client(), Base: "http://x", Symbol: "BTCUSDT", Interval: "1m", From: from.Add(-24 * time.Hour)}
		if err := src.Init(); err != nil {
			t.Fatal(err)
		}
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		key := checkpoint.Key{Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp}
		if _, err := store.AddGap(context.Background(), checkpoint.Gap{Key: key, Range: checkpoint.Range{Start: from, End: now}, Reason: "deadline"}); err != nil {
			t.Fatal(err)
		}
		got := map[int64]bool{}
		p, _ := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 100}})
		r, err := slice.New(slice.Config[klines.Candle]{
			Stream: key.Stream, Mode: key.Mode, Store: store, Provider: p, Source: src,
			Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, pg slice.Page[klines.Candle]) error {
				for _, c := range pg.Records {
					got[c.OpenTime.UnixMilli()] = true
				}
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		missing := func() (n int) {
			for at := from; at.Before(now); at = at.Add(time.Minute) {
				if !got[at.UnixMilli()] {
					n++
				}
			}
			return n
		}
		rep, err := r.Drain(context.Background(), nil)
		open, _ := store.ListGaps(context.Background(), checkpoint.GapQuery{})
		if err != nil || rep.Reason != forage.ReasonBehind || !rep.Until.After(time.Now()) || len(open) == 0 {
			t.Fatalf("Drain = %+v, %v, %d gaps open, %d candles of the range not fetched; want behind, the rest a gap", rep, err, len(open), missing())
		}
		if n := missing(); n == 0 || n > int(lag/time.Minute)+1 {
			t.Fatalf("%d candles of the range not fetched; want those the provider, %v behind, has not closed", n, lag)
		}
		time.Sleep(lag + time.Minute) // the provider has closed them since
		if rep, err := r.Drain(context.Background(), nil); err != nil || rep.Reason != "" {
			t.Fatalf("second Drain = %+v, %v", rep, err)
		}
		if open, _ := store.ListGaps(context.Background(), checkpoint.GapQuery{}); len(open) != 0 || missing() != 0 {
			t.Fatalf("after the second drain: %d gaps open, %d candles of the range not fetched; want none", len(open), missing())
		}
	})
}

// TestAProviderWhoseClockRunsFarBehindIsReadByItsDate: a provider whose
// clock runs 15 minutes or 2 hours behind ours (more than the 10 minutes
// after which a candle is history by our clock) says so in its answers'
// Date: its forming candle is never stored, and the minutes it has not
// reached are never covered as a halt; two runs, the second after the
// provider caught up with the first's end, store every candle it closed,
// with its final values. (Its forming candle was stored as final, the
// minutes after it covered, and a second run found nothing to do: three
// candles missing and one wrong, for good.)
func TestAProviderWhoseClockRunsFarBehindIsReadByItsDate(t *testing.T) {
	t.Parallel()
	for _, lag := range []time.Duration{15 * time.Minute, 2 * time.Hour} {
		t.Run(lag.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(2 * time.Second)
				srv, err := providertest.New(providertest.Config{Now: func() time.Time { return time.Now().Add(-lag) },
					Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}})
				if err != nil {
					t.Fatal(err)
				}
				from := time.Now().Truncate(time.Minute).Add(-5 * time.Hour)
				src := &klines.Source{Client: srv.Client(), Base: "http://x", Symbol: "BTCUSDT", Interval: "1m", Page: 1000, From: from}
				if err := src.Init(); err != nil {
					t.Fatal(err)
				}
				stored := map[int64]klines.Candle{}
				p, _ := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 100}})
				r, err := slice.New(slice.Config[klines.Candle]{
					Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: p, Source: src,
					Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, pg slice.Page[klines.Candle]) error {
						for _, c := range pg.Records {
							if old, ok := stored[c.OpenTime.UnixMilli()]; ok && old != c {
								t.Errorf("candle %v stored twice, with other values: %+v, then %+v", c.OpenTime, old, c)
							}
							stored[c.OpenTime.UnixMilli()] = c
						}
						return nil
					}),
				})
				if err != nil {
					t.Fatal(err)
				}
				for i := range 2 {
					if i > 0 {
						time.Sleep(time.Hour)
					}
					if rep, err := r.Run(context.Background(), nil); err != nil || rep.Reason != "" && rep.Reason != forage.ReasonBehind {
						t.Fatalf("run %d = %+v, %v", i, rep, err)
					}
				}
				end := time.Now().Add(-lag - 30*time.Minute)
				final, err := srv.KlinesAt(time.Now().Add(24*time.Hour), providertest.Query{Symbol: "BTCUSDT", Interval: "1m", Start: from, End: end, Limit: 1000})
				if err != nil {
					t.Fatal(err)
				}
				missing, wrong := 0, 0
				for _, k := range final {
					c, ok := stored[k.OpenTime]
					switch {
					case !ok:
						missing++
					case c.Close != k.Close || c.High != k.High || c.Low != k.Low || c.Volume != k.Volume:
						wrong++
					}
				}
				if len(final) == 0 || missing+wrong > 0 {
					t.Fatalf("of %d final candles up to %v: %d missing, %d stored with forming values", len(final), end, missing, wrong)
				}
			})
		})
	}
}
