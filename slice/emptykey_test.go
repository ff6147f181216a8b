package slice_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// invoice is a record whose natural key a host reads from a field its
// JSON tags may have missed.
type invoice struct {
	ID string
	At time.Time
}

// TestAFeedRefusesARecordWithNoKey: PageFeed and TimeFeed tell records
// apart by their keys, and a record whose key is empty (a Key reading a
// field the JSON tags left zero) is refused, forage.Permanent, naming
// the Key. With every key "", the second scan of a PageFeed met "the
// last head" on page 1 at once: 5 new invoices of 10, every run caught up
// with none of them; a TimeFeed took records sharing the cursor's time
// for delivered.
func TestAFeedRefusesARecordWithNoKey(t *testing.T) {
	t.Parallel()
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var list []invoice // newest first
	add := func(n int) {
		for range n {
			list = append([]invoice{{At: base.Add(time.Duration(len(list)) * time.Second)}}, list...)
		}
	}
	noKey := func(invoice) string { return "" } // the ID field was never filled
	pages, err := slice.PageFeed(slice.PageFeedConfig[invoice]{Size: 10, Key: noKey, Fetch: func(_ context.Context, q slice.PageQuery) ([]invoice, forage.Outcome) {
		return list[min(q.Offset, len(list)):min(q.Offset+q.Size, len(list))], forage.Outcome{Status: 200}
	}})
	if err != nil {
		t.Fatal(err)
	}
	times, err := slice.TimeFeed(slice.TimeFeedConfig[invoice]{Limit: 10, Key: noKey, Settle: slice.NoSettle,
		Time: func(i invoice) time.Time { return i.At },
		Fetch: func(_ context.Context, q slice.TimeQuery) ([]invoice, forage.Outcome) {
			var out []invoice
			for i := len(list) - 1; i >= 0 && len(out) < q.Limit; i-- {
				if !list[i].At.Before(q.Since) {
					out = append(out, list[i])
				}
			}
			return out, forage.Outcome{Status: 200}
		}})
	if err != nil {
		t.Fatal(err)
	}
	// A TokenFeed's one page, oldest first, that drops its oldest record as
	// it takes a new one: told by count alone, the page read as unchanged.
	tokens := slice.TokenFeed(func(context.Context, string) (slice.TokenPage[invoice], forage.Outcome) {
		page := make([]invoice, 0, 5) // the newest 5, oldest first
		for i := min(5, len(list)) - 1; i >= 0; i-- {
			page = append(page, list[i])
		}
		return slice.TokenPage[invoice]{Records: page}, forage.Outcome{Status: 200}
	}, noKey)
	for name, feed := range map[string]slice.FetchFunc[invoice]{"PageFeedConfig.Key": pages, "TimeFeedConfig.Key": times, "TokenFeed's key": tokens} {
		list = nil
		add(5)
		delivered := 0
		r, err := feedRunner(nil, checkpoint.SteadyState, feed, func(invoice) { delivered++ })
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.Run(t.Context(), nil)
		add(5)
		if err == nil {
			rep, err = r.Run(t.Context(), nil)
		}
		if err == nil || rep.Reason != forage.ReasonPermanent || !strings.Contains(err.Error(), name) {
			t.Errorf("%s returning \"\": %d of %d delivered, reason %q, err %v; want a permanent stop naming %s",
				name, delivered, len(list), rep.Reason, err, name)
		}
	}
}
