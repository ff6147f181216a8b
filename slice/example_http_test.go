package slice_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// Event is one record of the API below.
type Event struct {
	ID   int    `json:"id"`
	Kind string `json:"kind"`
}

// eventsPage is a page of the API below. It is a forage.Validator: an
// answer with no has_more (an error object sent with 200, {}, null) is not
// a page, and is asked again, rather than read as "no more" and a hole.
type eventsPage struct {
	Events  []Event `json:"events"`
	HasMore *bool   `json:"has_more"`
}

// Validate refuses an answer that does not say whether more follows.
func (p *eventsPage) Validate() error {
	if p.HasMore == nil {
		return errors.New(`no "has_more"`)
	}
	return nil
}

// A whole collector for a JSON API that pages by the last id seen
// (GET /events?after=<id> answers {"events": [...], "has_more": bool}):
// one request per page, read by forage.FromHTTPJSON (the status, the
// headers and the body; a body that is not the page, one that does not
// decode or that eventsPage.Validate refuses, is asked again, never
// skipped), has_more false as the end for now, and the events stored once
// each in a JSON-lines file.
func ExampleFetchFunc_http() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // setup: the provider
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		var page struct {
			Events  []Event `json:"events"`
			HasMore bool    `json:"has_more"`
		}
		for id := after + 1; id <= min(after+3, 7); id++ {
			page.Events = append(page.Events, Event{ID: id, Kind: "paid"})
		}
		page.HasMore = after+3 < 7
		json.NewEncoder(w).Encode(page)
	}))
	defer api.Close()
	dir, _ := os.MkdirTemp("", "events") // setup
	defer os.RemoveAll(dir)

	client := api.Client()
	feed := slice.FetchFunc[Event](func(ctx context.Context, s slice.Slice) (slice.Page[Event], forage.Outcome) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.URL+"/events?after="+url.QueryEscape(string(s.After)), nil)
		if err != nil {
			return slice.Page[Event]{}, forage.Outcome{Err: forage.Mark(err, forage.Permanent)}
		}
		resp, err := client.Do(req)
		var body eventsPage
		out := forage.FromHTTPJSON(resp, err, &body) // 429, 5xx, Retry-After, rate-limit headers, a body that is not the page: classified
		if out.Class() != forage.Success {
			return slice.Page[Event]{}, out // a body that is not the page is asked again, never a page skipped
		}
		p := slice.Page[Event]{Records: body.Events, Next: s.After, Last: !*body.HasMore}
		if n := len(body.Events); n > 0 {
			p.Next = strconv.AppendInt(nil, int64(body.Events[n-1].ID), 10) // the cursor: the last id seen
		}
		return p, out
	})

	sink, err := slice.OpenJSONLines(filepath.Join(dir, "events.jsonl"), func(e Event) string { return strconv.Itoa(e.ID) })
	if err != nil {
		panic(err)
	}
	defer sink.Close()
	store, err := checkpoint.OpenFileStore(filepath.Join(dir, "checkpoints"), checkpoint.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	provider, err := budget.NewLocal("api.example.com", budget.Config{})
	if err != nil {
		panic(err)
	}
	runner, err := slice.New(slice.Config[Event]{
		Stream: "api.example.com/events", Mode: checkpoint.SteadyState,
		Store: store, Provider: provider, Source: feed, Sink: sink,
	})
	if err != nil {
		panic(err)
	}
	for range 2 { // the second run resumes at the last id: nothing new
		rep, err := runner.Run(context.Background(), nil)
		fmt.Printf("%d new events, cursor %s, %d stored, %v\n", rep.Records, rep.Cursor, sink.Len(), err)
	}
	// Output:
	// 7 new events, cursor 7, 7 stored, <nil>
	// 0 new events, cursor 7, 7 stored, <nil>
}
