package slice_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// TestAPageFeedKeepsUpWithAShortListThatGrowsFast: a list of 3 when its
// first scan began, paged by 10, that grows by 5 records before every
// request, read one request a run, by number and by offset: every run
// reads a whole Size, so the scans catch up and every record is
// delivered. (Paged at the size of its short first page, 3 a request
// against 5 new ones, no run caught up again in 150, and 301 of 748
// records were delivered.)
func TestAPageFeedKeepsUpWithAShortListThatGrowsFast(t *testing.T) {
	t.Parallel()
	for _, byNumber := range []bool{false, true} {
		t.Run("by number "+strconv.FormatBool(byNumber), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := &pageAPI{n: 3, insertAt: map[int]int{}, byNumber: byNumber}
				const runs = 150
				for i := 1; i < runs; i++ {
					api.insertAt[i] = 5 // after the first request
				}
				feed, err := slice.PageFeed(slice.PageFeedConfig[int]{Fetch: api.fetch, Key: strconv.Itoa, Size: 10})
				if err != nil {
					t.Fatal(err)
				}
				got := map[int]bool{}
				r, err := feedRunner(nil, checkpoint.SteadyState, feed, func(rec int) { got[rec] = true })
				if err != nil {
					t.Fatal(err)
				}
				caught := 0
				for range runs {
					run, _ := budget.NewRun(budget.Envelope{MaxRequests: 1})
					rep, err := r.Run(context.Background(), run)
					if err != nil {
						t.Fatal(err)
					}
					if rep.Reason == "" {
						caught++
					}
				}
				for range 5 { // the list stopped growing: the last scans catch up
					if _, err := r.Run(context.Background(), nil); err != nil {
						t.Fatal(err)
					}
				}
				if len(got) != api.n || caught == 0 {
					t.Errorf("a list of 3 growing by 5 a request, one request a run: %d of %d records delivered, %d runs of %d caught up; want every record, and runs that catch up",
						len(got), api.n, caught, runs)
				}
			})
		})
	}
}
