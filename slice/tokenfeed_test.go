package slice_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
	"pgregory.net/rapid"
)

// tokenAPI is a feed paged by opaque tokens whose last page carries none:
// page i holds records [i×size, (i+1)×size) of those that exist, and its
// next token is "page-<i+1>-<salt>" while more follow.
type tokenAPI struct {
	size, n int
	calls   int
}

func (a *tokenAPI) fetch(_ context.Context, token string) (slice.TokenPage[int], forage.Outcome) {
	a.calls++
	i := 0
	if token != "" {
		if _, err := fmt.Sscanf(token, "page-%d-", &i); err != nil {
			return slice.TokenPage[int]{}, forage.Outcome{Status: 400, Err: forage.Mark(errors.New("bad token"), forage.Permanent)}
		}
	}
	var p slice.TokenPage[int]
	for id := i * a.size; id < min((i+1)*a.size, a.n); id++ {
		p.Records = append(p.Records, id)
	}
	if (i+1)*a.size < a.n {
		p.Next = fmt.Sprintf("page-%d-%x", i+1, (i+1)*7919)
	}
	return p, forage.Outcome{Status: 200}
}

// TestPropertyATokenFeedDeliversEachRecordOnce: a feed paged by opaque
// tokens, whose last page has no token, grows between runs (appended to
// its last page, or past it). Each run delivers exactly the records that
// are new, once each, whatever the page size and the growth: none is
// skipped, none delivered twice, and a run with nothing new writes
// nothing and is caught up. Without TokenFeed, such a feed's last page
// left the next run nothing to ask after (an empty cursor is refused).
func TestPropertyATokenFeedDeliversEachRecordOnce(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		api := &tokenAPI{size: rapid.IntRange(1, 5).Draw(rt, "page size")}
		growth := rapid.SliceOfN(rapid.IntRange(0, 12), 1, 6).Draw(rt, "records added before each run")
		useKey := rapid.Bool().Draw(rt, "key")
		var fail string // said outside the bubble: rapid's Fatalf panics across its goroutine
		synctest.Test(t, func(t *testing.T) {
			var key func(int) string
			if useKey {
				key = strconv.Itoa
			}
			got := map[int]int{}
			sink := slice.SinkFunc[int](func(_ context.Context, p slice.Page[int]) error {
				for _, r := range p.Records {
					got[r]++
				}
				return nil
			})
			prov, _ := budget.NewLocal("api", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
			runner, err := slice.New(slice.Config[int]{Stream: "s", Mode: checkpoint.SteadyState, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
				Provider: prov, Source: slice.TokenFeed(api.fetch, key), Sink: sink})
			if err != nil {
				fail = err.Error()
				return
			}
			for i, g := range growth {
				api.n += g
				rep, err := runner.Run(context.Background(), nil)
				if err != nil || rep.Reason != "" {
					fail = fmt.Sprintf("run %d: %v, reason %q", i, err, rep.Reason)
					return
				}
				if g == 0 && rep.Records != 0 {
					fail = fmt.Sprintf("run %d with nothing new delivered %d records", i, rep.Records)
					return
				}
				for id := range api.n {
					if got[id] != 1 {
						fail = fmt.Sprintf("run %d: record %d delivered %d times, want once", i, id, got[id])
						return
					}
				}
				if len(got) != api.n {
					fail = fmt.Sprintf("run %d: %d records delivered, the feed holds %d", i, len(got), api.n)
					return
				}
			}
		})
		if fail != "" {
			rt.Fatal(fail)
		}
	})
}

// TestATokenFeedRefusesACursorItDidNotWrite: a stream whose checkpoint a
// different source wrote fails at once, permanent, naming the cursor:
// never read as the feed's start (a JSON object of another source's,
// {} and null decoded into the cursor, and the feed started over).
func TestATokenFeedRefusesACursorItDidNotWrite(t *testing.T) {
	t.Parallel()
	for _, cursor := range []string{"1700000000000", `"abc"`, `{"after":"evt_99"}`, `{}`, `null`, `{"TF":1,"t":"x"}`, `{"tf":2,"t":"x"}`, `{"tf":1,"n":-1}`} {
		api := &tokenAPI{size: 2, n: 5}
		page, out := slice.TokenFeed(api.fetch, strconv.Itoa).Fetch(context.Background(), slice.Slice{After: []byte(cursor)})
		if out.Class() != forage.Permanent || !errors.Is(out.Err, slice.ErrInvalidPage) || len(page.Records) != 0 || api.calls != 0 {
			t.Errorf("cursor %s: %v (%v), %d records, %d calls; want Permanent, ErrInvalidPage, nothing asked", cursor, out.Class(), out.Err, len(page.Records), api.calls)
		}
	}
}

// TestATokenFeedDeliversAChangedPageAgainRatherThanSkip: the last page,
// asked again, no longer begins with its records as they were delivered
// (a record inserted among them, replaced, moved, a key repeated): the
// whole page is delivered again (the sink is idempotent), never a record
// skipped. Searching for the last key delivered skipped a record inserted
// before it, or before a later copy of it. A page that only grew delivers
// what it grew by; a page that came back empty with no token stops,
// permanent, rather than be caught up for good.
func TestATokenFeedDeliversAChangedPageAgainRatherThanSkip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		was, now, want []string
		class          forage.Class
	}{
		{[]string{"a", "b", "c"}, []string{"a", "x", "b", "c", "d"}, []string{"a", "x", "b", "c", "d"}, forage.Success},
		{[]string{"a", "b", "c"}, []string{"a", "x", "c", "d"}, []string{"a", "x", "c", "d"}, forage.Success},
		{[]string{"a2", "b"}, []string{"b", "c", "b"}, []string{"b", "c", "b"}, forage.Success},
		{[]string{"a", "b"}, []string{"b", "a"}, []string{"b", "a"}, forage.Success},
		{[]string{"a", "b"}, []string{"a", "b", "c"}, []string{"c"}, forage.Success},
		{[]string{"a", "b"}, []string{"a", "b"}, nil, forage.Success},
		{[]string{"a", "b"}, nil, nil, forage.Permanent},
	} {
		page := c.was
		feed := slice.TokenFeed(func(context.Context, string) (slice.TokenPage[string], forage.Outcome) {
			return slice.TokenPage[string]{Records: page}, forage.Outcome{Status: 200}
		}, func(s string) string { return s })
		first, _ := feed.Fetch(context.Background(), slice.Slice{})
		page = c.now
		p, out := feed.Fetch(context.Background(), slice.Slice{After: first.Next})
		if out.Class() != c.class || fmt.Sprint(p.Records) != fmt.Sprint(c.want) {
			t.Errorf("page %v, then %v: delivered %v (%v, %v), want %v (%v)", c.was, c.now, p.Records, out.Class(), out.Err, c.want, c.class)
		}
	}
}

// TestATokenFeedKeepsATokenThatIsNotUTF8: an opaque token with bytes that
// are not UTF-8 is asked for as it was given (JSON replaced them, and the
// next request asked for another token).
func TestATokenFeedKeepsATokenThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	var asked []string
	feed := slice.TokenFeed(func(_ context.Context, token string) (slice.TokenPage[string], forage.Outcome) {
		asked = append(asked, token)
		if token == "" {
			return slice.TokenPage[string]{Records: []string{"a"}, Next: "T\xfe\xff"}, forage.Outcome{Status: 200}
		}
		return slice.TokenPage[string]{Records: []string{"b"}}, forage.Outcome{Status: 200}
	}, func(s string) string { return s })
	p, _ := feed.Fetch(context.Background(), slice.Slice{})
	if _, out := feed.Fetch(context.Background(), slice.Slice{After: p.Next}); out.Err != nil || len(asked) != 2 || asked[1] != "T\xfe\xff" {
		t.Fatalf("asked %q (%v); want the token as given", asked, out.Err)
	}
}

// TestPropertyATokenFeedNeverSkipsARecordOfAChangedPage: a last page
// edited at random between runs (records inserted anywhere, removed,
// moved, keys repeated): after each run every record inserted that is on
// the page has been delivered, whatever the edits.
func TestPropertyATokenFeedNeverSkipsARecordOfAChangedPage(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		var page []string
		feed := slice.TokenFeed(func(context.Context, string) (slice.TokenPage[string], forage.Outcome) {
			return slice.TokenPage[string]{Records: slices.Clone(page)}, forage.Outcome{Status: 200}
		}, func(s string) string { return s })
		var cursor []byte
		owed := map[string]bool{} // on the page, not delivered since it appeared
		n := 0
		for run := range rapid.IntRange(1, 8).Draw(rt, "runs") {
			for range rapid.IntRange(0, 4).Draw(rt, "edits") {
				switch op := rapid.IntRange(0, 3).Draw(rt, "op"); {
				case op == 0 || len(page) == 0: // insert a new record anywhere
					n++
					k := fmt.Sprintf("r%d", n)
					i := rapid.IntRange(0, len(page)).Draw(rt, "at")
					page = slices.Insert(page, i, k)
					owed[k] = true
				case op == 1: // remove one
					i := rapid.IntRange(0, len(page)-1).Draw(rt, "remove")
					delete(owed, page[i])
					page = slices.Delete(page, i, i+1)
				case op == 2: // a key repeated anywhere (its content is not the model's)
					k := rapid.SampledFrom(page).Draw(rt, "copy")
					page = slices.Insert(page, rapid.IntRange(0, len(page)).Draw(rt, "copy at"), k)
				default: // move one
					i := rapid.IntRange(0, len(page)-1).Draw(rt, "move")
					k := page[i]
					page = slices.Delete(page, i, i+1)
					page = slices.Insert(page, rapid.IntRange(0, len(page)).Draw(rt, "to"), k)
				}
			}
			p, out := feed.Fetch(context.Background(), slice.Slice{After: cursor})
			if out.Class() == forage.Permanent && len(page) == 0 {
				return // emptied: refused, as documented
			}
			if out.Err != nil {
				rt.Fatalf("run %d: %v", run, out.Err)
			}
			for _, r := range p.Records {
				delete(owed, r)
			}
			for k := range owed {
				if slices.Contains(page, k) {
					rt.Fatalf("run %d: %s is on the page %v and was never delivered (delivered %v)", run, k, page, p.Records)
				}
			}
			cursor = p.Next
		}
	})
}

// TestATokenFeedStopsAProviderThatRepeatsAPageUnderNewTokens: a provider
// that answers every token with the same page and a new token for the next
// (a nonce in its next link, a proxy that ignores the cursor) is a broken
// feed, stopped permanent and named within a bounded count of pages, as
// PageFeed stops one that ignores its page parameter. Its cursors never
// repeat, so no cycle is seen: it was fetched and "delivered" again and
// again, each page a commit, until the run's envelope ran out, the stop
// read as a planned hand-off (request_cap, deadline) and the next run
// doing the same. A page repeated once (records removed at the feed's
// head by exactly a page between two requests) is delivered as it is.
func TestATokenFeedStopsAProviderThatRepeatsAPageUnderNewTokens(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		fetch := func(_ context.Context, token string) (slice.TokenPage[int], forage.Outcome) {
			calls++
			return slice.TokenPage[int]{Records: []int{1, 2, 3}, Next: fmt.Sprintf("nonce-%d", calls)}, forage.Outcome{Status: 200}
		}
		prov, _ := budget.NewLocal("api", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
		runner, err := slice.New(slice.Config[int]{Stream: "s", Mode: checkpoint.SteadyState, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
			Provider: prov, Source: slice.TokenFeed(fetch, strconv.Itoa), Sink: slice.SinkFunc[int](func(context.Context, slice.Page[int]) error { return nil })})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		rep, err := runner.Run(ctx, nil)
		if !errors.Is(err, slice.ErrInvalidPage) || rep.Reason != forage.ReasonPermanent {
			t.Fatalf("a provider repeating one page under new tokens: reason %q, err %v after %d requests; want a permanent stop naming the repeat", rep.Reason, err, calls)
		}
		if calls > 30 {
			t.Errorf("%d requests before the repeat was named, want at most 30", calls)
		}

		// One repeat, then the feed goes on: every page delivered.
		calls = 0
		var got []int
		shifted := func(_ context.Context, token string) (slice.TokenPage[int], forage.Outcome) {
			calls++
			pages := map[string]slice.TokenPage[int]{
				"":  {Records: []int{1, 2}, Next: "b"},
				"b": {Records: []int{1, 2}, Next: "c"}, // the head lost a page's worth in between
				"c": {Records: []int{3, 4}},
			}
			return pages[token], forage.Outcome{Status: 200}
		}
		runner, _ = slice.New(slice.Config[int]{Stream: "s2", Mode: checkpoint.SteadyState, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
			Provider: prov, Source: slice.TokenFeed(shifted, strconv.Itoa), Sink: slice.SinkFunc[int](func(_ context.Context, p slice.Page[int]) error {
				got = append(got, p.Records...)
				return nil
			})})
		if rep, err := runner.Run(ctx, nil); err != nil || rep.Reason != "" || !slices.Equal(got, []int{1, 2, 1, 2, 3, 4}) {
			t.Fatalf("a page repeated once: reason %q, err %v, delivered %v", rep.Reason, err, got)
		}
	})
}
