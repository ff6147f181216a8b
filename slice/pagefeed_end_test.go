package slice_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/slice"
)

// TestAPageFeedReadsAListThatEndsInAnErrorOrARepeat: a scan that reaches
// a short last page asks the page after it, since a short page is no
// longer the end. Providers answer that page in their own ways:
// WordPress's REST API with 400 rest_post_invalid_page_number, Django
// REST Framework with 404 "Invalid page.", others with the last page
// again (a page number clamped to the last). Each such answer failed the
// scan as permanent (the 4xx at once, the repeat after twenty requests
// as a provider that ignores the page parameter), so the first scan of
// any such list never finished; before, the short page was read as the
// end. After a short page, a page refused 400, 404, 416 or 422 is the
// list's end, and so is one that repeats a short page past the first (a
// short first page answered again may be a smaller page moved down by
// new records: a clamped list of one short page still fails).
func TestAPageFeedReadsAListThatEndsInAnErrorOrARepeat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		past func(last []int) ([]int, forage.Outcome) // the answer past the last page
	}{
		{"WordPress's 400", func([]int) ([]int, forage.Outcome) { return nil, forage.Outcome{Status: http.StatusBadRequest} }},
		{"Django REST Framework's 404", func([]int) ([]int, forage.Outcome) { return nil, forage.Outcome{Status: http.StatusNotFound} }},
		{"the last page again", func(last []int) ([]int, forage.Outcome) { return last, forage.Outcome{Status: http.StatusOK} }},
	} {
		for _, n := range []int{3, 23} { // one short page; two full pages and a short one
			if n == 3 && c.name == "the last page again" {
				continue
			}
			t.Run(c.name+"/"+strconv.Itoa(n), func(t *testing.T) {
				t.Parallel()
				const size = 10
				calls := 0
				fetch := func(_ context.Context, q slice.PageQuery) ([]int, forage.Outcome) {
					calls++
					pages := (n + q.Size - 1) / q.Size
					if q.Number > pages {
						from := (pages - 1) * q.Size
						var last []int
						for i := from; i < n; i++ {
							last = append(last, n-1-i)
						}
						return c.past(last)
					}
					var out []int
					for i := (q.Number - 1) * q.Size; i < q.Number*q.Size && i < n; i++ {
						out = append(out, n-1-i)
					}
					return out, forage.Outcome{Status: http.StatusOK}
				}
				feed, err := slice.PageFeed(slice.PageFeedConfig[int]{Fetch: fetch, Key: strconv.Itoa, Size: size})
				if err != nil {
					t.Fatal(err)
				}
				got := map[int]bool{}
				var cursor []byte
				for step := 0; ; step++ {
					p, out := feed(context.Background(), slice.Slice{After: cursor})
					if out.Class() != forage.Success {
						t.Fatalf("step %d: a list of %d, paged by %d, whose page past the end is %s: the scan failed %v (%v) after %d requests; want it read to its end",
							step, n, size, c.name, out.Class(), out.Err, calls)
					}
					for _, r := range p.Records {
						got[r] = true
					}
					if cursor = p.Next; p.Last {
						break
					}
					if step > 50 {
						t.Fatalf("a list of %d: %d requests and no end", n, calls)
					}
				}
				if len(got) != n || calls > n/size+2 {
					t.Errorf("a list of %d, paged by %d, %s past its end: %d records delivered in %d requests; want %d in at most %d",
						n, size, c.name, len(got), calls, n, n/size+2)
				}
			})
		}
	}
}
