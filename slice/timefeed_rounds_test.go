package slice_test

import (
	"context"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// TestATimeFeedOfAProviderThatRoundsSinceDownIsCaughtUp: an honest
// provider that rounds Since down to the second (many search APIs), whose
// feed ends with its longest page yet inside one second: 3 records at .2 s
// and 2 at .5 s, Limit 100, nothing after them. Asked past .5 s, it
// answers the same 5 (its second, rounded down), all at or before .5 s:
// it honours Since and has nothing more. Each run stopped
// forage.Permanent naming Since. Asked since now, it answers nothing: the
// run is caught up, as every later one is until the feed grows, and a
// record that comes in a later second is delivered.
func TestATimeFeedOfAProviderThatRoundsSinceDownIsCaughtUp(t *testing.T) {
	t.Parallel()
	sec := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := []stamped{
		{sec.Add(200 * time.Millisecond), "a"}, {sec.Add(200 * time.Millisecond), "b"}, {sec.Add(200 * time.Millisecond), "c"},
		{sec.Add(500 * time.Millisecond), "d"}, {sec.Add(500 * time.Millisecond), "e"},
	}
	fetch := func(_ context.Context, q slice.TimeQuery) ([]stamped, forage.Outcome) {
		since := q.Since.Truncate(time.Second)
		var out []stamped
		for _, r := range recs {
			if !r.At.Before(since) && len(out) < q.Limit {
				out = append(out, r)
			}
		}
		return out, forage.Outcome{}
	}
	got := map[string]int{}
	feed, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: fetch, Limit: 100, Settle: slice.NoSettle,
		Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := feedRunner(nil, checkpoint.CatchUp, feed, func(r stamped) { got[r.Key]++ })
	if err != nil {
		t.Fatal(err)
	}
	for run := range 3 {
		if rep, err := runner.Run(context.Background(), nil); err != nil {
			t.Fatalf("run %d: %v (reason %q); want caught up, the provider honouring Since rounded down to the second", run, err, rep.Reason)
		}
	}
	recs = append(recs, stamped{sec.Add(1700 * time.Millisecond), "f"}) // the feed grows, in a later second
	if rep, err := runner.Run(context.Background(), nil); err != nil {
		t.Fatalf("the run after the feed grew: %v (reason %q)", err, rep.Reason)
	}
	if len(got) != len(recs) {
		t.Errorf("%d records delivered; want %d", len(got), len(recs))
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
}
