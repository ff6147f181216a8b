package slice_test

import (
	"context"
	"errors"
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// tExpiring answers the first page with a token that has expired by the
// time the next run resumes from it: 410 Gone, "cursor expired".
type tExpiring struct{}

func (tExpiring) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (tExpiring) Fetch(_ context.Context, sl slice.Slice) (slice.Page[string], forage.Outcome) {
	if len(sl.After) == 0 {
		return slice.Page[string]{Records: []string{"a", "b"}, Next: []byte("tok-1")}, forage.Outcome{Status: 200}
	}
	return slice.Page[string]{}, forage.Outcome{Status: 410, Err: errors.New(`410 Gone: {"error":"cursor expired"}`)}
}

// Each run that meets the expired cursor records one more permanent gap at
// the same cursor; none is ever resolved while the cursor stays expired.
func TestAnExpiredCursorKeepsOneGap(t *testing.T) {
	ctx := context.Background()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	p, _ := budget.NewLocal("saas", budget.Config{Burst: 100, Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	r, err := slice.New(slice.Config[string]{Stream: "saas/items", Mode: checkpoint.SteadyState, Store: store, Provider: p,
		Source: tExpiring{}, Sink: slice.SinkFunc[string](func(context.Context, slice.Page[string]) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		rep, err := r.Run(ctx, nil)
		if i == 0 || i == 9 {
			t.Logf("run %d: reason=%q err=%v gaps=%d resolved=%d", i, rep.Reason, err, len(rep.Gaps), rep.Resolved)
		}
	}
	gaps, _ := store.ListGaps(ctx, checkpoint.GapQuery{Stream: "saas/items"})
	t.Logf("%d open gaps, first: %+v", len(gaps), gaps[0])
	if len(gaps) > 1 {
		t.Errorf("10 runs at one expired cursor left %d open gap records at the same cursor", len(gaps))
	}
}
