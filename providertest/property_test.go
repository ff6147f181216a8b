package providertest_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
	"pgregory.net/rapid"
)

var allIntervals = []string{"1s", "1m", "3m", "5m", "15m", "30m", "1h", "2h", "4h", "6h", "8h", "12h", "1d", "3d", "1w"}

// floorOpen is the spec of candle alignment: the open (ms) of the interval-d
// candle containing t, epoch multiples, Mondays for 1w.
func floorOpen(iv string, d, t int64) int64 {
	off := int64(0)
	if iv == "1w" {
		off = 4 * 864e5 // 1970-01-05 was a Monday
	}
	r := (t - off) % d
	if r < 0 {
		r += d
	}
	return t - r
}

// TestPropKlines checks, for random seeds, intervals, listings and
// [start, end, limit] queries, that the answer is every allowed candle (open
// in [start, end], not before the listing's, not after the forming one) in a
// contiguous ascending run of at most limit, the first ones with a start and
// the last ones without; that prices are consistent; and that closed candles
// are the same from another server with the same seed at a later now.
func TestPropKlines(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		iv := rapid.SampledFrom(allIntervals).Draw(rt, "interval")
		dd, _ := intervalDuration(iv)
		d := dd.Milliseconds()
		now := t0.Add(time.Duration(rapid.Int64Range(0, 30*864e5).Draw(rt, "nowOffsetMs")) * time.Millisecond)
		// Offsets are drawn as whole candles plus a part of one, so that rapid's
		// bias toward small numbers still spans many candles.
		candles := func(lo, hi int, label string) time.Duration {
			n := rapid.IntRange(lo, hi).Draw(rt, label+"Candles")
			return time.Duration(int64(n)*d+rapid.Int64Range(0, d-1).Draw(rt, label+"Ms")) * time.Millisecond
		}
		listed := now.Add(-candles(0, 3000, "history"))
		if rapid.IntRange(0, 9).Draw(rt, "notYetListed") == 0 {
			listed = now.Add(candles(0, 5, "future"))
		}
		s := newServer(rt, providertest.Config{Now: newClock(now).Now, Seed: seed, Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
		q := providertest.Query{Symbol: "BTCUSDT", Interval: iv, Limit: rapid.IntRange(0, 1200).Draw(rt, "limit")}
		around := func(label string) time.Time {
			// Anywhere from 5 candles before the listing to 5 after now.
			span := float64(now.Sub(listed) + 10*dd)
			return listed.Add(-5*dd + time.Duration(rapid.Float64Range(0, 1).Draw(rt, label)*span))
		}
		if rapid.Bool().Draw(rt, "hasStart") {
			q.Start = around("start")
		}
		if rapid.Bool().Draw(rt, "hasEnd") {
			q.End = around("end")
		}
		ks, err := s.KlinesAt(now, q)
		if !q.Start.IsZero() && !q.End.IsZero() && q.Start.After(q.End) {
			if err == nil || err.Error() != "providertest: 400 -1023 Start time is greater than end time." {
				rt.Fatalf("start after end: got %v, want -1023", err)
			}
			return
		}
		if err != nil {
			rt.Fatalf("KlinesAt: %v", err)
		}
		capped := q.Limit
		if capped == 0 {
			capped = 500
		}
		capped = min(capped, maxKlineLimit)
		allowed := func(open int64) bool {
			return open+d-1 >= listed.UnixMilli() && open <= now.UnixMilli() &&
				(q.Start.IsZero() || open >= q.Start.UnixMilli()) && (q.End.IsZero() || open <= q.End.UnixMilli())
		}
		if ks == nil || len(ks) > capped {
			rt.Fatalf("got %d candles (nil=%v), limit %d", len(ks), ks == nil, capped)
		}
		if len(ks) == 0 {
			lo := floorOpen(iv, d, listed.UnixMilli())
			if !q.Start.IsZero() {
				lo = max(lo, floorOpen(iv, d, q.Start.UnixMilli()-1)+d)
			}
			if allowed(lo) {
				rt.Fatalf("empty answer but candle %d is allowed", lo)
			}
			return
		}
		for i, k := range ks {
			checkCandle(rt, i, k, d, now)
			if !allowed(k.OpenTime) || floorOpen(iv, d, k.OpenTime) != k.OpenTime {
				rt.Fatalf("candle %d opening %d is not an allowed aligned open", i, k.OpenTime)
			}
			if i > 0 && (k.OpenTime != ks[i-1].OpenTime+d || k.Open != ks[i-1].Close) {
				rt.Fatalf("candle %d (%d open %s) does not follow %d (close %s)", i, k.OpenTime, k.Open, ks[i-1].OpenTime, ks[i-1].Close)
			}
		}
		before, after := allowed(ks[0].OpenTime-d), allowed(ks[len(ks)-1].OpenTime+d)
		if (!q.Start.IsZero() || len(ks) < capped) && before {
			rt.Fatalf("candle before the first (%d) was allowed but left out", ks[0].OpenTime)
		}
		if (q.Start.IsZero() || len(ks) < capped) && after {
			rt.Fatalf("candle after the last (%d) was allowed but left out", ks[len(ks)-1].OpenTime)
		}
		// Determinism: another server, same seed, created later, asked later.
		later := now.Add(time.Duration(rapid.Int64Range(0, 10*d).Draw(rt, "laterMs")) * time.Millisecond)
		s2 := newServer(rt, providertest.Config{Now: newClock(later).Now, Seed: seed, Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
		for i, k := range ks {
			if k.CloseTime >= now.UnixMilli() {
				continue // forming at now
			}
			again, err := s2.KlinesAt(later, providertest.Query{Symbol: "BTCUSDT", Interval: iv, Start: time.UnixMilli(k.OpenTime), Limit: 1})
			if err != nil || len(again) != 1 || again[0] != k {
				rt.Fatalf("closed candle %d changed: %v then %v (%v)", i, k, again, err)
			}
		}
	})
}

// checkCandle checks one candle's internal consistency.
func checkCandle(rt *rapid.T, i int, k providertest.Kline, d int64, now time.Time) {
	f := func(name, v string) float64 {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x < 0 || math.IsInf(x, 0) {
			rt.Fatalf("candle %d: %s = %q", i, name, v)
		}
		return x
	}
	o, h, l, c := f("open", k.Open), f("high", k.High), f("low", k.Low), f("close", k.Close)
	v, tb := f("volume", k.Volume), f("takerBase", k.TakerBase)
	f("quoteVolume", k.QuoteVolume)
	f("takerQuote", k.TakerQuote)
	if l <= 0 || h < max(o, c) || l > min(o, c) || tb > v || k.Trades < 1 || k.CloseTime != k.OpenTime+d-1 {
		rt.Fatalf("candle %d inconsistent: %+v", i, k)
	}
}

// TestPropStats drives random request patterns against random limit
// configurations in simulated time and checks the accounting: every request
// lands in exactly one outcome, bans are counted when entered, and requests
// passing the limit never exceed what the limit allows in any second.
func TestPropStats(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			var limit providertest.Limit
			var bound int64 // most requests the limit lets pass in one sliding second
			switch rapid.IntRange(0, 2).Draw(rt, "algorithm") {
			case 1:
				rate, burst := rapid.IntRange(1, 50).Draw(rt, "rate"), rapid.IntRange(1, 10).Draw(rt, "burst")
				limit, bound = providertest.Limit{Rate: float64(rate), Burst: burst}, int64(rate+burst)
			case 2:
				n, w := rapid.IntRange(1, 20).Draw(rt, "count"), rapid.SampledFrom([]time.Duration{100 * time.Millisecond, time.Second, time.Minute}).Draw(rt, "window")
				limit, bound = providertest.Limit{Count: n, Window: w}, int64(n)*(int64((time.Second+w-1)/w)+1)
			}
			answer := providertest.Answer{
				Status:       rapid.SampledFrom([]int{0, 429, 503}).Draw(rt, "status"),
				BanAfter:     rapid.IntRange(0, 5).Draw(rt, "banAfter"),
				NoRetryAfter: rapid.Bool().Draw(rt, "noRetryAfter"),
			}
			if answer.Status == 503 {
				answer.NoRetryAfter = false
			}
			if answer.BanAfter > 0 {
				answer.BanFor = 5 * time.Second
			}
			s := newServer(rt, providertest.Config{
				Limit: limit, Answer: answer,
				FaultRate: rapid.Float64Range(0, 0.5).Draw(rt, "faultRate"), Seed: rapid.Uint64().Draw(rt, "seed"),
			})
			paths := []string{"/api/v3/time", "/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=3", "/api/v3/klines?symbol=NOPE&interval=1m", "/nope"}
			var sent int64
			rt.Repeat(map[string]func(*rapid.T){
				"sleep": func(rt *rapid.T) {
					time.Sleep(time.Duration(rapid.IntRange(1, 2000).Draw(rt, "sleepMs")) * time.Millisecond)
				},
				"burst": func(rt *rapid.T) {
					n := rapid.IntRange(1, 30).Draw(rt, "n")
					path := rapid.SampledFrom(paths).Draw(rt, "path")
					done := make(chan struct{}, n)
					for range n {
						go func() {
							tryGet(context.Background(), s.Client(), inMemory, path, nil)
							done <- struct{}{}
						}()
					}
					for range n {
						<-done
					}
					sent += int64(n)
				},
				"": func(rt *rapid.T) {
					st := s.Stats()
					sum := st.OK + st.Throttled + st.Unavailable + st.Banned + st.Faults + st.BadRequests
					if st.Requests != sent || sum != sent {
						rt.Fatalf("sent %d, stats %+v (outcomes sum to %d)", sent, st, sum)
					}
					if limit != (providertest.Limit{}) && st.MaxPerSecond > bound {
						rt.Fatalf("%v let %d requests pass in one second, bound %d", limit, st.MaxPerSecond, bound)
					}
					if st.Bans > st.Banned || (answer.BanAfter == 0 && st.Banned != 0) || st.MaxPerSecond > st.MaxArrivalsPerSecond {
						rt.Fatalf("stats %+v", st)
					}
				},
			})
		})
	})
}
