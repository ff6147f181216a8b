package klines_test

import (
	"context"
	"errors"
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

// liar runs a catch-up stream of BTCUSDT 1m candles from listed, in pages
// of page, against a server configured by cfg (its symbol added), into
// store, and returns the report, the candles written and the run's error.
func liar(t *testing.T, cfg providertest.Config, listed time.Time, page int, store checkpoint.Store) (slice.Report, []klines.Candle, error) {
	t.Helper()
	cfg.Symbols = []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}
	srv, err := providertest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := &klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", Page: page, From: listed}
	if err := src.Init(); err != nil {
		t.Fatal(err)
	}
	p, _ := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 100}})
	var got []klines.Candle
	r, err := slice.New(slice.Config[klines.Candle]{
		Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp, Store: store, Provider: p, Source: src,
		Prefetch: slice.NoPrefetch, // the lie starts at a known page
		Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, pg slice.Page[klines.Candle]) error {
			got = append(got, pg.Records...)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background(), nil)
	return rep, got, err
}

// truth fails unless got are the exchange's closed candles opening in
// [from, to), once each, in order, with its values.
func truth(t *testing.T, got []klines.Candle, from, to time.Time) {
	t.Helper()
	srv, _ := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: from}}})
	want, err := srv.KlinesAt(time.Now(), providertest.Query{Symbol: "BTCUSDT", Interval: "1m", Start: from, End: to.Add(-time.Millisecond), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(want) != int(to.Sub(from)/time.Minute) {
		t.Fatalf("%d candles, want %d (%d in [%v, %v))", len(got), len(want), int(to.Sub(from)/time.Minute), from, to)
	}
	for i, k := range want {
		c := got[i]
		if c.OpenTime.UnixMilli() != k.OpenTime || c.Open != k.Open || c.High != k.High || c.Low != k.Low || c.Close != k.Close || c.Volume != k.Volume {
			t.Fatalf("candle %d = %+v, want %+v", i, c, k)
		}
	}
}

// TestLiesStopTheRunAndTheNextRunFillsTheHole: a provider that, after two
// honest pages, answers [] to ranged requests in history, answers null,
// sends rows shifted by a whole interval either way or by half of one,
// newest first, or with a forged CSV line in a value, stops the run with
// a permanent provider error that names the lie, after storing and
// committing exactly the honest pages; a run against the honest exchange
// then continues from the checkpoint and stores the rest, so every closed
// candle is stored once with the exchange's values.
func TestLiesStopTheRunAndTheNextRunFillsTheHole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lie  providertest.Lie
		want string
	}{
		{"empty", providertest.Lie{Empty: true}, "an answer that leaves out candles"},
		{"null", providertest.Lie{Null: true}, "answered null"},
		{"shifted 1m", providertest.Lie{Shifted: true, Shift: time.Minute}, "outside the asked window"}, // the confirmation of the late start
		{"shifted -1m", providertest.Lie{Shifted: true, Shift: -time.Minute}, "outside the asked window"},
		{"shifted by half", providertest.Lie{Shifted: true}, "not on a 1m boundary"},
		{"reversed", providertest.Lie{Reversed: true}, "rows must be oldest first"},
		{"newline", providertest.Lie{Newline: true}, "not a decimal number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				listed := time.Now().Add(-5 * time.Hour).Truncate(time.Minute)
				store := checkpoint.NewMemoryStore(checkpoint.Config{})
				lie := tc.lie
				lie.After = 2
				rep, first, err := liar(t, providertest.Config{Lie: lie}, listed, 100, store)
				if !errors.Is(err, budget.ErrStopped) || rep.Reason != forage.ReasonPermanent || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Run = %+v, %v: want a permanent provider error saying %q", rep, err, tc.want)
				}
				if rep.Slices > 3 || len(first) != 200 {
					t.Fatalf("report %+v with %d candles: want the 2 honest pages stored and committed (and a claim to confirm)", rep, len(first))
				}
				rep, rest, err := liar(t, providertest.Config{}, listed, 100, store)
				if err != nil || rep.Reason != "" {
					t.Fatalf("honest run = %+v, %v", rep, err)
				}
				truth(t, append(first, rest...), listed, time.Now().Truncate(time.Minute))
			})
		})
	}
}

// TestCutAnswersLeaveNoHole: a provider that drops the middle row of every
// answer, or answers at most 30 rows while 100 are asked: the run
// continues from the last candle before the hole or the cut, and stores
// every closed candle once, with the exchange's values.
func TestCutAnswersLeaveNoHole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lie  providertest.Lie
	}{{"dropped rows", providertest.Lie{DropRows: true}}, {"short pages", providertest.Lie{ShortPages: 30}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				listed := time.Now().Add(-5 * time.Hour).Truncate(time.Minute)
				rep, got, err := liar(t, providertest.Config{Lie: tc.lie}, listed, 100, checkpoint.NewMemoryStore(checkpoint.Config{}))
				if err != nil || rep.Reason != "" {
					t.Fatalf("Run = %+v, %v", rep, err)
				}
				truth(t, got, listed, time.Now().Truncate(time.Minute))
			})
		})
	}
}

// TestRedirectLoopIsAPermanentError: a provider that redirects every klines
// request to itself fails the fetch with a permanent error saying so; it is
// not counted as a success.
func TestRedirectLoopIsAPermanentError(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv, _ := providertest.New(providertest.Config{Lie: providertest.Lie{RedirectLoop: true}})
		src := &klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", Page: 10, From: time.Now().Add(-time.Hour)}
		if err := src.Init(); err != nil {
			t.Fatal(err)
		}
		sl, _, _ := src.Next(context.Background(), nil, checkpoint.Range{})
		p, _ := budget.NewLocal("sim", budget.Config{})
		err := p.Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
			_, out := src.Fetch(ctx, sl)
			return out
		})
		if reason, _ := budget.ReasonOf(err); reason != forage.ReasonPermanent || !strings.Contains(err.Error(), "redirects") || p.Snapshot().OK != 0 {
			t.Fatalf("Do = %v (reason %s, %d ok): want a permanent error about the redirects, no success", err, reason, p.Snapshot().OK)
		}
	})
}

// TestEmptyToEveryRequestAfterACandleIsALie: a provider that answers
// honestly once, then [] to everything, confirming requests included,
// stops the run with a permanent error naming the lie (the candle it sent
// is gone) after the honest page; nothing past it is covered, and a run
// against the honest exchange stores the rest. Before the fix the empty
// confirmation was accepted and the run ended caught up with a hole.
func TestEmptyToEveryRequestAfterACandleIsALie(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		listed := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		rep, first, err := liar(t, providertest.Config{Lie: providertest.Lie{EmptyAll: true, After: 1}}, listed, 60, store)
		if !errors.Is(err, budget.ErrStopped) || rep.Reason != forage.ReasonPermanent || !strings.Contains(err.Error(), "but sent one at") {
			t.Fatalf("Run = %+v, %v: want a permanent error saying the candle it sent is gone", rep, err)
		}
		if len(first) != 60 {
			t.Fatalf("%d candles, want the honest page's 60", len(first))
		}
		_, rest, err := liar(t, providertest.Config{}, listed, 60, store)
		if err != nil {
			t.Fatal(err)
		}
		truth(t, append(first, rest...), listed, time.Now().Truncate(time.Minute))
	})
}

// TestEmptyToEveryRequestFromTheStartCoversNothing: a provider that
// answers [] to every request from the start cannot be told from a symbol
// without candles, so the run stores nothing, covers nothing and leaves
// the cursor on no candle; the next run against the honest exchange
// stores every candle. Before the fix the cursor jumped to the head.
func TestEmptyToEveryRequestFromTheStartCoversNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		listed := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		rep, first, err := liar(t, providertest.Config{Lie: providertest.Lie{EmptyAll: true}}, listed, 60, store)
		if err != nil || len(first) != 0 {
			t.Fatalf("Run = %+v, %v with %d candles: want no error, no candle", rep, err, len(first))
		}
		if at, err := klines.DecodeCursor(rep.Cursor); err == nil {
			t.Fatalf("cursor %q covers up to %v: want it on no candle", rep.Cursor, at)
		}
		_, rest, err := liar(t, providertest.Config{}, listed, 60, store)
		if err != nil {
			t.Fatal(err)
		}
		truth(t, rest, listed, time.Now().Truncate(time.Minute))
	})
}

// TestEveryRequestIsOneBudgetAttempt: the requests the exchange saw equal
// the attempts the budget counted, for a provider that leaves every other
// candle out (each page is cut at its first hole, verified by one more
// request: 90 candles over 3 hours in pages of 60 take a handful of
// requests, not the 269 the cut-and-confirm loop took) and for one that
// redirects, under a rate limit: the redirect is one counted attempt and
// a permanent error that names it, its URL redacted.
func TestEveryRequestIsOneBudgetAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  providertest.Config
		want string // "" for a run that stores every candle the provider has
		most int64  // requests at most
	}{
		{"sparse", providertest.Config{Sparse: true}, "", 12},
		{"redirect loop", providertest.Config{Lie: providertest.Lie{RedirectLoop: true}}, `provider redirected to "/api/v3/klines?endTime=`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				listed := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
				cfg := tc.cfg
				cfg.Symbols, cfg.Limit = []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}, providertest.Limit{Rate: 20, Burst: 5}
				srv, err := providertest.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				src := &klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "BTCUSDT", Interval: "1m", Page: 60, From: listed}
				if err := src.Init(); err != nil {
					t.Fatal(err)
				}
				p, _ := budget.NewLocal("sim", budget.Config{Adaptive: aimd.Config{Initial: 10}})
				var got []klines.Candle
				r, _ := slice.New(slice.Config[klines.Candle]{
					Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: p, Source: src,
					Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, pg slice.Page[klines.Candle]) error {
						got = append(got, pg.Records...)
						return nil
					}),
				})
				rep, err := r.Run(context.Background(), nil)
				seen, counted := srv.Stats().Requests, int64(p.Snapshot().Requests)
				t.Logf("%d requests", seen)
				if seen != counted || seen > tc.most {
					t.Fatalf("the exchange saw %d requests, the budget counted %d: want equal, at most %d (report %+v, %v)", seen, counted, tc.most, rep, err)
				}
				if tc.want != "" {
					if reason, _ := budget.ReasonOf(err); reason != forage.ReasonPermanent || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("Run = %+v, %v: want a permanent error saying %q, with where it was sent", rep, err, tc.want)
					}
					return
				}
				if err != nil || len(got) != 90 {
					t.Fatalf("Run = %+v, %v with %d candles: want the 90 the provider has", rep, err, len(got))
				}
				for i, c := range got {
					if want := listed.Add(time.Duration(2*i) * time.Minute); !c.OpenTime.Equal(want) {
						t.Fatalf("candle %d opens at %v, want %v", i, c.OpenTime, want)
					}
				}
			})
		})
	}
}
