package slice_test

import (
	"context"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/slice"
)

// TestAFailedAnswerIsNotAStuckCursor: a feed's fetch that failed (an
// answer of any status but a success, as forage.FromHTTP reads it: a
// status, no error) keeps its class through FetchFunc.Fetch, at the
// stream's start too. Its empty page, whose Next is the empty cursor it
// was asked at, was read as a stuck cursor and made Transient: a 401 at a
// new stream's first request was asked again and reported "unavailable:
// a stuck cursor", never "permanent", and Backfilled waited 4 minutes, to
// its deadline, for a stream turned away for good; a 429 there was no
// longer throttling.
func TestAFailedAnswerIsNotAStuckCursor(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		status := rapid.IntRange(400, 599).Draw(t, "status") // every one a failure: 429 throttled, 503 overloaded, other 5xx transient, 4xx permanent
		after := rapid.SampledFrom([]string{"", "42"}).Draw(t, "after")
		given := forage.Outcome{Status: status}
		feed := slice.FetchFunc[int](func(context.Context, slice.Slice) (slice.Page[int], forage.Outcome) {
			return slice.Page[int]{}, given // as a feed returns a failure: no page
		})
		_, out := feed.Fetch(context.Background(), slice.Slice{After: []byte(after)})
		if out.Class() != given.Class() || (out.Err != nil && strings.Contains(out.Err.Error(), "stuck cursor")) {
			t.Fatalf("a %d after %q: class %v (err %v); want %v, as the provider answered", status, after, out.Class(), out.Err, given.Class())
		}
	})
	// A success that answers nothing at the start, with no Last, is still a stuck cursor.
	feed := slice.FetchFunc[int](func(context.Context, slice.Slice) (slice.Page[int], forage.Outcome) {
		return slice.Page[int]{}, forage.Outcome{Status: 200}
	})
	if _, out := feed.Fetch(context.Background(), slice.Slice{}); out.Class() != forage.Transient {
		t.Errorf("an empty 200 at the start, no Last: class %v (err %v); want Transient, a stuck cursor", out.Class(), out.Err)
	}
}
