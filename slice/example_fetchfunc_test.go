package slice_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// A cursor feed ("the events after this token") needs no Source type: a
// FetchFunc makes the one request and returns the page, its next token,
// and whether the provider said nothing follows for now.
func ExampleFetchFunc() {
	events := []string{"created", "paid", "shipped", "delivered", "reviewed"} // setup: the provider's feed
	feed := slice.FetchFunc[string](func(_ context.Context, s slice.Slice) (slice.Page[string], forage.Outcome) {
		from := 0
		if len(s.After) > 0 {
			from, _ = strconv.Atoi(string(s.After)) // the token this feed's pages hand out
		}
		to := min(from+2, len(events)) // two a page
		return slice.Page[string]{
			Records: events[from:to],
			Next:    []byte(strconv.Itoa(to)),
			Last:    to == len(events), // has_more: false
		}, forage.Outcome{Status: 200}
	})
	provider, _ := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 100}}) // setup
	runner, err := slice.New(slice.Config[string]{
		Stream: "orders/events", Mode: checkpoint.SteadyState,
		Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: provider, Source: feed,
		Sink: slice.SinkFunc[string](func(_ context.Context, p slice.Page[string]) error {
			fmt.Println(p.Records) // a durable, idempotent write in a real host (see JSONLines)
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	rep, err := runner.Run(context.Background(), nil)
	fmt.Println(rep.Slices, "pages, caught up at token", string(rep.Cursor), err)
	// Output:
	// [created paid]
	// [shipped delivered]
	// [reviewed]
	// 3 pages, caught up at token 5 <nil>
}
