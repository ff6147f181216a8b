package slice_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
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
			prov, _ := budget.NewLocal("api", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
			r, err := slice.New(slice.Config[int]{Stream: "s", Mode: checkpoint.SteadyState, Store: store,
				Provider: prov, Source: feed, Sink: slice.SinkFunc[int](func(_ context.Context, p slice.Page[int]) error {
					for _, r := range p.Records {
						got[r]++
					}
					return nil
				})})
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
