package slice_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// TestAStopSaysWhyBeforeTheCursorRunsOut: a run stopped by a permanent
// answer records a gap whose Reason says what the provider answered, and
// an error a person can read. A PageFeed of Size 100 keeps the hashes of
// two pages in its cursor: the error quoted all 4,000 bytes of it before
// the answer, and the gap's Reason, cut at 512 bytes, held nothing but
// hashes, the 404 that stopped the run cut off.
func TestAStopSaysWhyBeforeTheCursorRunsOut(t *testing.T) {
	t.Parallel()
	const n, size = 200, 100 // two full pages, then the 404 Django REST Framework answers past the end
	feed, err := slice.PageFeed(slice.PageFeedConfig[int]{Size: size, Key: strconv.Itoa, Fetch: func(_ context.Context, q slice.PageQuery) ([]int, forage.Outcome) {
		if q.Offset >= n {
			return nil, forage.Outcome{Status: 404}
		}
		var out []int
		for i := q.Offset; i < min(q.Offset+q.Size, n); i++ {
			out = append(out, n-i)
		}
		return out, forage.Outcome{Status: 200}
	}})
	if err != nil {
		t.Fatal(err)
	}
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	r, err := feedRunner(store, checkpoint.SteadyState, feed, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(t.Context(), nil)
	if rep.Reason != forage.ReasonPermanent || err == nil {
		t.Fatalf("run: reason %q, err %v; want a permanent stop", rep.Reason, err)
	}
	if len(err.Error()) > 1024 || !strings.Contains(err.Error(), "status 404") {
		t.Errorf("the run's error is %d bytes (%.120s…); want at most 1 KiB, naming the 404", len(err.Error()), err)
	}
	if len(rep.Gaps) != 1 || !strings.Contains(rep.Gaps[0].Reason, "status 404") {
		t.Errorf("gaps %d; the gap's Reason %q; want one, naming the 404", len(rep.Gaps), rep.Gaps)
	}
}
