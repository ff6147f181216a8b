package slice_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// cappedTimes is a provider of stamped records, "since" inclusive, oldest
// first, answering at most max records whatever the Limit.
type cappedTimes struct {
	recs []stamped
	max  int
}

func (c *cappedTimes) fetch(_ context.Context, q slice.TimeQuery) ([]stamped, forage.Outcome) {
	var out []stamped
	for _, r := range c.recs {
		if !r.At.Before(q.Since) && len(out) < min(q.Limit, c.max) {
			out = append(out, r)
		}
	}
	return out, forage.Outcome{Status: 200}
}

// TestATimeFeedStuckAtOneTimeIsNeverCaughtUp: a provider that caps its
// page below Limit and has more records at one time than its page holds
// answers, since that time, the same page of that time alone, for good.
// Read as the end, every run said caught up and nothing after that time
// was ever delivered (Limit 100 capped at 5, 7 records sharing a time: 15
// of 30). The feed now asks past that time once, and a provider that
// has records there but cannot be paged to them stops the run
// forage.Permanent; one with nothing there is caught up, and records that
// come after that time later are delivered.
func TestATimeFeedStuckAtOneTimeIsNeverCaughtUp(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	feedOf := func(api *cappedTimes) slice.FetchFunc[stamped] {
		feed, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: api.fetch, Limit: 100, Settle: slice.NoSettle,
			Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
		if err != nil {
			t.Fatal(err)
		}
		return feed
	}
	add := func(api *cappedTimes, at time.Time, n int) {
		for range n {
			api.recs = append(api.recs, stamped{At: at, Key: fmt.Sprintf("r%d", len(api.recs))})
		}
	}

	// Stuck: 7 records share a time, the provider answers 5 at most.
	stuck := &cappedTimes{max: 5}
	for i := range 30 {
		at := base.Add(time.Duration(i) * time.Second)
		if i >= 10 && i < 17 {
			at = base.Add(10 * time.Second)
		}
		add(stuck, at, 1)
	}
	got := map[string]int{}
	r, err := feedRunner(nil, checkpoint.CatchUp, feedOf(stuck), func(s stamped) { got[s.Key]++ })
	if err != nil {
		t.Fatal(err)
	}
	for run := range 3 {
		rep, err := r.Run(context.Background(), nil)
		if err == nil && rep.Reason == "" && len(got) < len(stuck.recs) {
			t.Fatalf("run %d: caught up with %d of %d records delivered; want a permanent stop, never caught up with a hole", run, len(got), len(stuck.recs))
		}
		if err != nil && rep.Reason != forage.ReasonPermanent {
			t.Fatalf("run %d: reason %q, err %v; want a permanent stop", run, rep.Reason, err)
		}
	}

	// Not stuck: a small feed whose records share one time, then grows.
	small := &cappedTimes{max: 100}
	add(small, base, 2)
	got = map[string]int{}
	r, err = feedRunner(nil, checkpoint.CatchUp, feedOf(small), func(s stamped) { got[s.Key]++ })
	if err != nil {
		t.Fatal(err)
	}
	for run, n := range []int{0, 3, 0, 2, 0} {
		add(small, base.Add(time.Duration(run+1)*time.Minute), n)
		rep, err := r.Run(context.Background(), nil)
		if err != nil || rep.Reason != "" {
			t.Fatalf("run %d of a small feed: reason %q, err %v; want caught up", run, rep.Reason, err)
		}
		for _, s := range small.recs {
			if got[s.Key] != 1 {
				t.Fatalf("run %d of a small feed said caught up with %s delivered %d times; want once", run, s.Key, got[s.Key])
			}
		}
	}
}

// TestPropertyATimeFeedIsNeverCaughtUpWithAHole: whatever the provider's
// page (capped below Limit or not), however many records share a time
// (more than its page holds, too), and whether it honours Since or
// answers the feed from its start (a fetch that forgot to send it), a run
// of a TimeFeed either says caught
// up with every record delivered whose time is shared by fewer records
// than the provider's page holds, or stops forage.Permanent. (Records of
// a time shared by more than a page holds cannot all be asked for, as
// the doc says; before, every record after such a time was never
// delivered either, every run caught up.)
func TestPropertyATimeFeedIsNeverCaughtUpWithAHole(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(2, 8).Draw(rt, "Limit")
		capped := rapid.IntRange(0, limit).Draw(rt, "the provider's largest page (0: none)")
		if capped == 1 {
			capped = 2 // a page of one record cannot be told from the end, as the doc says
		}
		longest := limit + 2
		if capped > 0 {
			longest = capped + 2
		}
		batches := rapid.SliceOfN(rapid.SliceOfN(rapid.IntRange(1, longest), 0, 10), 1, 5).Draw(rt, "runs of equal times added before each run")
		seed := rapid.Uint64().Draw(rt, "seed")
		api := &timeAPI{rng: rand.New(rand.NewPCG(seed, 1)), max: capped, blind: rapid.Bool().Draw(rt, "the provider ignores Since")}
		got := map[string]int{}
		feed, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: api.fetch, Limit: limit, Settle: slice.NoSettle,
			Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
		if err != nil {
			rt.Fatal(err)
		}
		runner, err := feedRunner(nil, checkpoint.CatchUp, feed, func(r stamped) { got[r.Key]++ })
		if err != nil {
			rt.Fatal(err)
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i, runs := range batches {
			at = api.add(at, runs)
			rep, err := runner.Run(context.Background(), nil)
			if err != nil {
				if rep.Reason != forage.ReasonPermanent {
					rt.Fatalf("run %d: %v, reason %q; want caught up or a permanent stop", i, err, rep.Reason)
				}
				return // stuck at a time the provider cannot page past: said so
			}
			page := limit
			if capped > 0 {
				page = capped
			}
			shared := map[time.Time]int{}
			for _, r := range api.recs {
				shared[r.At]++
			}
			for _, r := range api.recs {
				if got[r.Key] == 0 && shared[r.At] < page {
					rt.Fatalf("run %d said caught up (reason %q), but %s (at %v, of %d) was never delivered (Limit %d, the provider's pages at most %d, blind to Since %v)",
						i, rep.Reason, r.Key, r.At.Format(time.TimeOnly), len(api.recs), limit, capped, api.blind)
				}
			}
		}
	})
}

// TestATimeFeedStopsAProviderThatIgnoresSince: a provider that answers
// the feed's first page whatever Since asks (a fetch that forgot to send
// it), its page shorter than Limit. Every run after the first was caught
// up, with nothing after that page ever delivered (Limit 100, a page of
// 5, the feed growing by 5 a run: 5 of 15). The first run now delivers
// the page and stops forage.Permanent, naming Since, as every later one
// does: asked past the page's last time, the provider answered the page
// again.
func TestATimeFeedStopsAProviderThatIgnoresSince(t *testing.T) {
	t.Parallel()
	api := &timeAPI{rng: rand.New(rand.NewPCG(1, 1)), max: 5, blind: true}
	got := map[string]int{}
	feed, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: api.fetch, Limit: 100, Settle: slice.NoSettle,
		Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := feedRunner(nil, checkpoint.CatchUp, feed, func(r stamped) { got[r.Key]++ })
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for run := range 3 {
		at = api.add(at, []int{1, 1, 1, 1, 1})
		rep, err := runner.Run(context.Background(), nil)
		if err == nil || rep.Reason != forage.ReasonPermanent || !strings.Contains(err.Error(), "does not honour Since") {
			t.Fatalf("run %d, %d records, the provider answering the first 5 whatever Since asks: %v, reason %q; want a permanent stop naming Since", run, len(api.recs), err, rep.Reason)
		}
		if len(got) != 5 {
			t.Fatalf("run %d: %d records delivered; want the first 5, once", run, len(got))
		}
		for k, n := range got {
			if n != 1 {
				t.Fatalf("run %d: %s delivered %d times", run, k, n)
			}
		}
	}
}
