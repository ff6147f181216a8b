package slice_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// A feed paged by opaque tokens whose last page carries none (Slack's
// next_cursor "" at the end): TokenFeed keeps the last page's token and
// what was delivered of it, so the next run asks that page again and
// delivers only what was added since, then follows the pages after it.
func ExampleTokenFeed() {
	events := []string{"a", "b", "c"} // setup: the provider's feed, two per page
	fetch := func(_ context.Context, token string) (slice.TokenPage[string], forage.Outcome) {
		i, _ := strconv.Atoi(token) // the page's first index; a real API's token is opaque
		p := slice.TokenPage[string]{Records: events[i:min(i+2, len(events))]}
		if i+2 < len(events) {
			p.Next = strconv.Itoa(i + 2)
		}
		return p, forage.Outcome{Status: 200}
	}

	var stored []string
	sink := slice.SinkFunc[string](func(_ context.Context, p slice.Page[string]) error {
		stored = append(stored, p.Records...)
		return nil
	})
	provider, _ := budget.NewLocal("api.example.com", budget.Config{})
	runner, err := slice.New(slice.Config[string]{
		Stream: "api.example.com/events", Mode: checkpoint.SteadyState,
		Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: provider,
		Source: slice.TokenFeed(fetch, func(e string) string { return e }), Sink: sink,
	})
	if err != nil {
		panic(err)
	}
	for _, added := range [][]string{nil, {"d"}, nil, {"e", "f"}} {
		events = append(events, added...)
		rep, err := runner.Run(context.Background(), nil)
		fmt.Printf("%d new, stored %v, %v\n", rep.Records, stored, err)
	}
	// Output:
	// 3 new, stored [a b c], <nil>
	// 1 new, stored [a b c d], <nil>
	// 0 new, stored [a b c d], <nil>
	// 2 new, stored [a b c d e f], <nil>
}
