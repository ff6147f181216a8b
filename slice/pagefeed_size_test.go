package slice_test

import (
	"context"
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

// A scan cut by a request cap, resumed by a runner whose PageFeed has a
// larger Size (an operator raised per_page between deploys): the cursor
// kept a page number alone, so the resumed page started past records
// never read (20-29 of 40), the run reported caught up, and no later run
// read them. Now a scan whose Size changed starts again at page 1.
func TestAPageFeedWhoseSizeChangesMidScanLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &pageAPI{n: 40, insertAt: map[int]int{}}
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		got := map[int]int{}
		mk := func(size int) *slice.Runner[int] {
			feed, err := slice.PageFeed(slice.PageFeedConfig[int]{Fetch: api.fetch, Key: strconv.Itoa, Size: size})
			if err != nil {
				t.Fatal(err)
			}
			r, err := feedRunner(store, checkpoint.SteadyState, feed, func(r int) { got[r]++ })
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		run, _ := budget.NewRun(budget.Envelope{MaxRequests: 2})
		if _, err := mk(5).Run(context.Background(), run); err != nil {
			t.Fatal(err)
		}
		r2 := mk(10)
		for i := 0; i < 3; i++ {
			rep, err := r2.Run(context.Background(), nil)
			if err != nil || rep.Reason != "" {
				t.Fatalf("run: %v %q", err, rep.Reason)
			}
		}
		var lost []int
		for id := range api.n {
			if got[id] == 0 {
				lost = append(lost, id)
			}
		}
		if len(lost) > 0 {
			t.Fatalf("runs reported caught up, but records %v were never delivered", lost)
		}
	})
}

var _ = forage.Success

// TestPropertyAPageFeedNeverCatchesUpPastAProviderThatPagesSmaller: a
// provider whose pages are smaller than PageFeedConfig.Size (it caps
// limit=100 at 50 silently, or answers its own page size whatever is
// asked), or larger, paged by number or by offset, growing at its head
// between and during runs: a run that starts with no scan under way and
// says caught up has delivered every record the list held when it
// started, and once the list stops growing every record is delivered.
// (A provider capping Size 5 at 3 answered page 1 with 3 records, read as
// the list's end: the run said caught up, and records 0 to 36 of 40 were
// never asked for, by that run or any later one.)
func TestPropertyAPageFeedNeverCatchesUpPastAProviderThatPagesSmaller(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 6).Draw(rt, "Size")
		api := &pageAPI{
			n:        rapid.IntRange(0, 40).Draw(rt, "records at first"),
			insertAt: map[int]int{},
			max:      rapid.IntRange(0, 6).Draw(rt, "the provider's largest page (0: none)"),
			fixed:    rapid.IntRange(0, 8).Draw(rt, "the provider's own page size (0: as asked)"),
			byNumber: rapid.Bool().Draw(rt, "paged by number"),
		}
		for i, k := range rapid.SliceOfN(rapid.IntRange(0, 8), 0, 40).Draw(rt, "records created before each request") {
			api.insertAt[i] = k
		}
		caps := rapid.SliceOfN(rapid.IntRange(0, 6), 1, 8).Draw(rt, "each run's request cap (0: none)")
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
			lost := func(n int) []int {
				var ids []int
				for id := range n {
					if got[id] == 0 {
						ids = append(ids, id)
					}
				}
				return ids
			}
			atBoundary := true // no scan under way: the last run was caught up
			for i, c := range append(caps, 0, 0) {
				if i == len(caps) {
					api.insertAt = nil // the list stops growing
				}
				var run *budget.Run
				if c > 0 {
					run, _ = budget.NewRun(budget.Envelope{MaxRequests: c})
				}
				had := api.n
				rep, err := runner.Run(context.Background(), run)
				if err != nil {
					fail = fmt.Sprintf("run %d (cap %d): %v", i, c, err)
					return
				}
				caught := rep.Reason == ""
				if c == 0 && !caught {
					fail = fmt.Sprintf("run %d without a cap stopped %q", i, rep.Reason)
					return
				}
				if ids := lost(had); caught && atBoundary && len(ids) > 0 {
					fail = fmt.Sprintf("run %d (cap %d) said caught up, but records %v of the %d it started with were never delivered (Size %d, provider pages of %d, at most %d, by number %v)",
						i, c, ids, had, size, api.fixed, api.max, api.byNumber)
					return
				}
				atBoundary = caught
			}
			if ids := lost(api.n); len(ids) > 0 {
				fail = fmt.Sprintf("the list stopped growing, runs caught up, records %v of %d never delivered", ids, api.n)
			}
		})
		if fail != "" {
			rt.Fatal(fail)
		}
	})
}
