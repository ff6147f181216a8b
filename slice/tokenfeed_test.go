package slice_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"

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
// never read as the feed's start.
func TestATokenFeedRefusesACursorItDidNotWrite(t *testing.T) {
	t.Parallel()
	api := &tokenAPI{size: 2, n: 5}
	page, out := slice.TokenFeed(api.fetch, strconv.Itoa).Fetch(context.Background(), slice.Slice{After: []byte("1700000000000")})
	if out.Class() != forage.Permanent || !errors.Is(out.Err, slice.ErrInvalidPage) || len(page.Records) != 0 || api.calls != 0 {
		t.Fatalf("a cursor TokenFeed did not write: %v (%v), %d records, %d calls; want Permanent, ErrInvalidPage, nothing asked", out.Class(), out.Err, len(page.Records), api.calls)
	}
}

// TestATokenFeedDeliversAChangedPageAgainRatherThanSkip: the last page,
// asked again, no longer holds its records as they were delivered. Found
// elsewhere, the last record delivered marks where the new ones start;
// gone, the whole page is delivered again (the sink is idempotent):
// never a record skipped.
func TestATokenFeedDeliversAChangedPageAgainRatherThanSkip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cursor string
		page   []int
		want   []int
	}{
		{`{"t":"","n":3,"k":"2"}`, []int{0, 2, 3, 4}, []int{3, 4}}, // record 1 removed: 2 is second now
		{`{"t":"","n":2,"k":"1"}`, []int{5, 6, 7}, []int{5, 6, 7}}, // 1 gone: all again
		{`{"t":"","n":2,"k":"1"}`, []int{0, 1, 9}, []int{9}},       // as delivered, one appended
	} {
		feed := slice.TokenFeed(func(context.Context, string) (slice.TokenPage[int], forage.Outcome) {
			return slice.TokenPage[int]{Records: c.page}, forage.Outcome{Status: 200}
		}, strconv.Itoa)
		p, out := feed.Fetch(context.Background(), slice.Slice{After: []byte(c.cursor)})
		if out.Err != nil || fmt.Sprint(p.Records) != fmt.Sprint(c.want) || !p.Last {
			t.Errorf("cursor %s, page %v: delivered %v (last %v, %v), want %v", c.cursor, c.page, p.Records, p.Last, out.Err, c.want)
		}
	}
}
