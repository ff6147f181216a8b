package slice_test

import (
	"context"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// feedRunner returns the runner of stream "s" in mode over src, on store
// (a fresh memory store when nil), through a local provider fast enough
// never to pace, whose sink calls deliver for each record written: the
// runner the feeds' tests drive.
func feedRunner[R any](store checkpoint.Store, mode checkpoint.Mode, src slice.Source[R], deliver func(R)) (*slice.Runner[R], error) {
	if store == nil {
		store = checkpoint.NewMemoryStore(checkpoint.Config{})
	}
	prov, err := budget.NewLocal("api", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		return nil, err
	}
	return slice.New(slice.Config[R]{Stream: "s", Mode: mode, Store: store, Provider: prov, Source: src,
		Sink: slice.SinkFunc[R](func(_ context.Context, p slice.Page[R]) error {
			for _, r := range p.Records {
				deliver(r)
			}
			return nil
		})})
}
