package slice_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
	"pgregory.net/rapid"
)

// pageAPI is a list paged by number, newest first: records 0, 1, 2, …
// in the order they were created, the newest (highest) on page 1. Before
// the answer to its i-th request, it creates insertAt[i] records. Its
// pages hold q.Size records, or fixed when set (a request that does not
// pass the size), never more than max when set (a provider that caps
// limit=100 at 50, silently); byNumber pages by q.Number at that size
// (?page=N&per_page=…), otherwise from q.Offset (?offset=…&limit=…).
type pageAPI struct {
	n        int
	calls    int
	insertAt map[int]int
	max      int
	fixed    int
	byNumber bool
}

func (a *pageAPI) fetch(_ context.Context, q slice.PageQuery) ([]int, forage.Outcome) {
	a.n += a.insertAt[a.calls]
	a.calls++
	size, from := q.Size, q.Offset
	if a.fixed > 0 {
		size = a.fixed
	}
	if a.max > 0 {
		size = min(size, a.max)
	}
	if a.byNumber {
		from = (q.Number - 1) * size
	}
	var out []int
	for i := from; i < from+size && i < a.n; i++ {
		out = append(out, a.n-1-i)
	}
	return out, forage.Outcome{Status: 200}
}

// TestPropertyAPageFeedDeliversEveryRecord: a list paged by number, newest
// first, that grows at its head between runs and while a scan pages
// through it, read by runs that a request cap cuts mid-scan: every record
// is delivered, none skipped, and once the list stops growing a run asks
// one page and writes nothing. (A cursor at the last page read, the
// obvious collector, said "caught up" run after run while 32 records were
// added at the head.)
func TestPropertyAPageFeedDeliversEveryRecord(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 6).Draw(rt, "page size")
		api := &pageAPI{n: rapid.IntRange(0, 30).Draw(rt, "records at first"), insertAt: map[int]int{}}
		for i, k := range rapid.SliceOfN(rapid.IntRange(0, 8), 0, 40).Draw(rt, "records created before each request") {
			api.insertAt[i] = k
		}
		caps := rapid.SliceOfN(rapid.IntRange(1, 6), 1, 8).Draw(rt, "each run's request cap")
		var fail string
		synctest.Test(t, func(t *testing.T) {
			got := map[int]int{}
			feed, err := slice.PageFeed(slice.PageFeedConfig[int]{Fetch: api.fetch, Key: strconv.Itoa, Size: size})
			if err != nil {
				fail = err.Error()
				return
			}
			runner, err := feedRunner(nil, checkpoint.SteadyState, feed, func(r int) { got[r]++ })
			if err != nil {
				fail = err.Error()
				return
			}
			for i, c := range caps {
				run, _ := budget.NewRun(budget.Envelope{MaxRequests: c})
				if _, err := runner.Run(context.Background(), run); err != nil {
					fail = fmt.Sprintf("run %d (cap %d): %v", i, c, err)
					return
				}
			}
			api.insertAt = nil // the list stops growing
			for i := 0; ; i++ {
				rep, err := runner.Run(context.Background(), nil)
				if err != nil || rep.Reason != "" {
					fail = fmt.Sprintf("a run to the end: %v, reason %q", err, rep.Reason)
					return
				}
				if i > 0 {
					break
				}
			}
			for id := range api.n {
				if got[id] == 0 {
					fail = fmt.Sprintf("record %d of %d never delivered (page size %d)", id, api.n, size)
					return
				}
			}
			calls := api.calls
			rep, err := runner.Run(context.Background(), nil)
			if err != nil || rep.Records != 0 || api.calls-calls != 1 {
				fail = fmt.Sprintf("a run with nothing new: %v, %d records, %d requests; want none, none, one", err, rep.Records, api.calls-calls)
			}
		})
		if fail != "" {
			rt.Fatal(fail)
		}
	})
}

// TestAPageFeedStopsWhereItCannotPage: a provider that ignores the page
// parameter answers every page with page 1's records: after twenty
// repeats, a permanent failure that says so, never a scan without end (a
// repeat is a page's worth of records that entered the head); a cursor
// PageFeed did not write is refused, permanent; a Config without what it
// needs is refused by field.
func TestAPageFeedStopsWhereItCannotPage(t *testing.T) {
	t.Parallel()
	same := func(context.Context, slice.PageQuery) ([]int, forage.Outcome) {
		return []int{9, 8, 7}, forage.Outcome{Status: 200}
	}
	feed, err := slice.PageFeed(slice.PageFeedConfig[int]{Fetch: same, Key: strconv.Itoa, Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	p, out := feed.Fetch(context.Background(), slice.Slice{})
	if out.Class() != forage.Success || len(p.Records) != 3 || p.Last {
		t.Fatalf("page 1: %v, %d records, last %v", out.Err, len(p.Records), p.Last)
	}
	for page := 2; page <= 20; page++ {
		if p, out = feed.Fetch(context.Background(), slice.Slice{After: p.Next}); out.Class() != forage.Success {
			t.Fatalf("page %d the same as the one before: %v (%v), want a success (a page's worth entered the head)", page, out.Class(), out.Err)
		}
	}
	if _, out = feed.Fetch(context.Background(), slice.Slice{After: p.Next}); out.Class() != forage.Permanent || !errors.Is(out.Err, slice.ErrInvalidPage) {
		t.Fatalf("page 21, the twentieth repeat: %v (%v), want a permanent invalid page", out.Class(), out.Err)
	}
	for _, cursor := range []string{`null`, `{}`, `{"tt":1}`, `{"pf":1,"p":-1}`, `{"pf":2}`} {
		if _, out := feed.Fetch(context.Background(), slice.Slice{After: []byte(cursor)}); out.Class() != forage.Permanent {
			t.Errorf("cursor %s: %v (%v), want Permanent", cursor, out.Class(), out.Err)
		}
	}
	for field, c := range map[string]slice.PageFeedConfig[int]{
		"Fetch": {Key: strconv.Itoa, Size: 3},
		"Key":   {Fetch: same, Size: 3},
		"Size":  {Fetch: same, Key: strconv.Itoa},
	} {
		if _, err := slice.PageFeed(c); !errors.Is(err, slice.ErrInvalidConfig) || !containsField(err, "PageFeedConfig."+field) {
			t.Errorf("a config without a good %s: %v; want ErrInvalidConfig naming it", field, err)
		}
	}
}
