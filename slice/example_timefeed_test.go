package slice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// Ticket is a record of a feed queried by time.
type Ticket struct {
	ID      string
	Updated time.Time
}

// A feed queried by time ("tickets updated since T, at most 3"), whose
// records share times: TimeFeed pages it by time and by the keys delivered
// at the last time, so a run of equal times that a page cuts is neither
// skipped nor delivered twice.
func ExampleTimeFeed() {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tickets := []Ticket{{"a", t0}, {"b", t0.Add(time.Minute)}, {"c", t0.Add(time.Minute)}, {"d", t0.Add(2 * time.Minute)}} // setup: the provider
	fetch := func(_ context.Context, q slice.TimeQuery) ([]Ticket, forage.Outcome) {
		var page []Ticket
		for _, t := range tickets {
			if !t.Updated.Before(q.Since) && len(page) < q.Limit {
				page = append(page, t)
			}
		}
		return page, forage.Outcome{Status: 200}
	}

	feed, err := slice.TimeFeed(slice.TimeFeedConfig[Ticket]{
		Fetch: fetch, Limit: 3, Start: t0,
		Time: func(t Ticket) time.Time { return t.Updated },
		Key:  func(t Ticket) string { return t.ID },
	})
	if err != nil {
		panic(err)
	}
	var stored []string
	provider, _ := budget.NewLocal("tickets.example.com", budget.Config{})
	runner, err := slice.New(slice.Config[Ticket]{
		Stream: "tickets.example.com/tickets", Mode: checkpoint.SteadyState,
		Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: provider, Source: feed,
		Sink: slice.SinkFunc[Ticket](func(_ context.Context, p slice.Page[Ticket]) error {
			for _, t := range p.Records {
				stored = append(stored, t.ID)
			}
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for _, added := range [][]Ticket{nil, {{"e", t0.Add(2 * time.Minute)}}, nil} {
		tickets = append(tickets, added...)
		rep, err := runner.Run(context.Background(), nil)
		fmt.Printf("%d new, stored %v, %v\n", rep.Records, stored, err)
	}
	// Output:
	// 4 new, stored [a b c d], <nil>
	// 1 new, stored [a b c d e], <nil>
	// 0 new, stored [a b c d e], <nil>
}
