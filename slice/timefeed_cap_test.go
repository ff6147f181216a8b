package slice_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
	"pgregory.net/rapid"
)

// TestPropertyATimeFeedNeverCatchesUpPastAProviderThatPagesSmaller: a
// feed queried by time whose provider answers fewer records than Limit
// asks (it caps limit=100 at 50, silently), or exactly Limit, growing
// between runs: every run says caught up with every record the feed held
// when it started delivered, each exactly once. (Limit 6 capped at 3: a
// backlog of 20 records took seven runs, each reading one page of 3 and
// saying caught up; a host that collects up to now and stops had 3.)
func TestPropertyATimeFeedNeverCatchesUpPastAProviderThatPagesSmaller(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(2, 8).Draw(rt, "Limit")
		capped := rapid.IntRange(0, limit).Draw(rt, "the provider's largest page (0: none)")
		most := limit - 1 // runs of records that share a time are shorter than a page
		if capped > 0 {
			most = capped - 1
		}
		if most < 1 {
			capped, most = 2, 1
		}
		batches := rapid.SliceOfN(rapid.SliceOfN(rapid.IntRange(1, most), 0, 12), 1, 5).Draw(rt, "runs of equal times added before each run")
		seed := rapid.Uint64().Draw(rt, "seed")
		var fail string
		synctest.Test(t, func(t *testing.T) {
			api := &timeAPI{rng: rand.New(rand.NewPCG(seed, 1)), max: capped}
			got := map[string]int{}
			feed, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: api.fetch, Limit: limit, Settle: slice.NoSettle,
				Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
			if err != nil {
				fail = err.Error()
				return
			}
			runner, err := feedRunner(nil, checkpoint.CatchUp, feed, func(r stamped) { got[r.Key]++ })
			if err != nil {
				fail = err.Error()
				return
			}
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, runs := range batches {
				at = api.add(at, runs)
				rep, err := runner.Run(context.Background(), nil)
				if err != nil || rep.Reason != "" {
					fail = fmt.Sprintf("run %d: %v, reason %q", i, err, rep.Reason)
					return
				}
				for _, r := range api.recs {
					if got[r.Key] != 1 {
						fail = fmt.Sprintf("run %d said caught up, but %s (at %v, record %d of %d) was delivered %d times, want once (Limit %d, the provider's pages at most %d)",
							i, r.Key, r.At.Format(time.TimeOnly), len(got), len(api.recs), got[r.Key], limit, capped)
						return
					}
				}
			}
		})
		if fail != "" {
			rt.Fatal(fail)
		}
	})
}
