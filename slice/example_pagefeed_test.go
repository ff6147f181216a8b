package slice_test

import (
	"context"
	"fmt"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// A list paged by number, newest first (GET /invoices?page=N&per_page=2),
// that grows at its head: PageFeed reads it in scans from page 1, each
// stopping where the last one began, so the new invoices on page 1 are
// collected and the old ones are not asked for again.
func ExamplePageFeed() {
	invoices := []string{"in_5", "in_4", "in_3", "in_2", "in_1"} // setup: the provider, newest first
	fetch := func(_ context.Context, q slice.PageQuery) ([]string, forage.Outcome) {
		page := invoices[min(q.Offset, len(invoices)):min(q.Offset+q.Size, len(invoices))]
		return page, forage.Outcome{Status: 200}
	}

	feed, err := slice.PageFeed(slice.PageFeedConfig[string]{Fetch: fetch, Size: 2, Key: func(id string) string { return id }})
	if err != nil {
		panic(err)
	}
	var stored []string
	provider, _ := budget.NewLocal("billing.example.com", budget.Config{})
	runner, err := slice.New(slice.Config[string]{
		Stream: "billing.example.com/invoices", Mode: checkpoint.SteadyState,
		Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: provider, Source: feed,
		Sink: slice.SinkFunc[string](func(_ context.Context, p slice.Page[string]) error {
			stored = append(stored, p.Records...)
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for _, added := range [][]string{nil, {"in_7", "in_6"}, nil} {
		invoices = append(added, invoices...)
		rep, err := runner.Run(context.Background(), nil)
		fmt.Printf("%d new, stored %v, %v\n", rep.Records, stored, err)
	}
	// Output:
	// 5 new, stored [in_5 in_4 in_3 in_2 in_1], <nil>
	// 2 new, stored [in_5 in_4 in_3 in_2 in_1 in_7 in_6], <nil>
	// 0 new, stored [in_5 in_4 in_3 in_2 in_1 in_7 in_6], <nil>
}
