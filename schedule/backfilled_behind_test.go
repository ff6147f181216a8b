package schedule_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// TestBackfilledWaitsForCandlesNotPublishedYet: a klines backfill up to
// the host's start, against a provider whose clock runs behind ours (3 s,
// or 4 minutes), started just after a candle closed: the provider has not
// published the last candles before the boundary yet. Backfilled returns
// once they are stored, not before. (It returned nil with the last
// candle missing: the run was caught up for now, short of its boundary,
// and its job counted as done.)
func TestBackfilledWaitsForCandlesNotPublishedYet(t *testing.T) {
	t.Parallel()
	for _, lag := range []time.Duration{3 * time.Second, 4 * time.Minute} {
		t.Run(lag.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(2 * time.Second) // just after a close, by our clock
				boundary := time.Now().Truncate(time.Minute)
				srv, err := providertest.New(providertest.Config{Now: func() time.Time { return time.Now().Add(-lag) },
					Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: boundary.Add(-48 * time.Hour)}}})
				if err != nil {
					t.Fatal(err)
				}
				s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
				var mu sync.Mutex
				got := map[int64]bool{}
				back, _, err := klines.Sources(&klines.Source{Client: srv.Client(), Base: "http://binance", Symbol: "BTCUSDT", Interval: "1m",
					From: boundary.Add(-2 * time.Hour)}, boundary)
				if err != nil {
					t.Fatal(err)
				}
				if err := schedule.AddStream(t.Context(), s, schedule.Stream[klines.Candle]{Name: "binance/BTCUSDT/1m", Provider: "binance", Backfill: back,
					Sink: slice.SinkFunc[klines.Candle](func(_ context.Context, p slice.Page[klines.Candle]) error {
						mu.Lock()
						defer mu.Unlock()
						for _, c := range p.Records {
							got[c.OpenTime.UnixMilli()] = true
						}
						return nil
					})}); err != nil {
					t.Fatal(err)
				}
				stop := start(t, s)
				defer stop()
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
				defer cancel()
				if err := s.Backfilled(ctx); err != nil {
					t.Fatalf("Backfilled = %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				for at := boundary.Add(-2 * time.Hour); at.Before(boundary); at = at.Add(time.Minute) {
					if !got[at.UnixMilli()] {
						t.Fatalf("Backfilled returned nil at %v, but the candle at %v, before the boundary %v, was never stored", time.Now(), at, boundary)
					}
				}
				if waited := time.Since(boundary); waited < lag {
					t.Fatalf("Backfilled returned %v after the boundary, before the provider %v behind could have closed its last candle", waited, lag)
				}
			})
		})
	}
}
