package slice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// A REST API that pages with a Link header, as GitHub's does
// (GET /issues?page=N answers a JSON array, and a Link to the next page
// until the last): the token is the next page's URL, which NextLink reads,
// relative or not, however the header writes it.
func ExampleNextLink() {
	issues := []int{1, 2, 3, 4, 5}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // setup: the provider, 2 a page
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		from := min((page-1)*2, len(issues))
		if from+2 < len(issues) {
			w.Header().Set("Link", fmt.Sprintf(`</issues?page=%d>; rel=next, </issues?page=1>; rel=first`, page+1))
		}
		json.NewEncoder(w).Encode(issues[from:min(from+2, len(issues))])
	}))
	defer api.Close()

	client := api.Client()
	fetch := func(ctx context.Context, token string) (slice.TokenPage[int], forage.Outcome) {
		if token == "" {
			token = api.URL + "/issues" // the feed's first page
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, token, nil)
		if err != nil {
			return slice.TokenPage[int]{}, forage.Outcome{Err: forage.Mark(err, forage.Permanent)}
		}
		resp, err := client.Do(req)
		var page []int
		out := forage.FromHTTPJSON(resp, err, &page)
		if out.Class() != forage.Success {
			return slice.TokenPage[int]{}, out
		}
		next, err := slice.NextLink(resp) // an error if the link leaves the API's host
		if err != nil {
			return slice.TokenPage[int]{}, forage.Outcome{Err: err}
		}
		return slice.TokenPage[int]{Records: page, Next: next}, out
	}

	var stored []int
	provider, _ := budget.NewLocal("api.example.com", budget.Config{})
	runner, err := slice.New(slice.Config[int]{
		Stream: "api.example.com/issues", Mode: checkpoint.SteadyState,
		Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: provider,
		Source: slice.TokenFeed(fetch, strconv.Itoa),
		Sink: slice.SinkFunc[int](func(_ context.Context, p slice.Page[int]) error {
			stored = append(stored, p.Records...)
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for _, added := range [][]int{nil, {6, 7}} {
		issues = append(issues, added...)
		rep, err := runner.Run(context.Background(), nil)
		fmt.Printf("%d new, stored %v, %v\n", rep.Records, stored, err)
	}
	// Output:
	// 5 new, stored [1 2 3 4 5], <nil>
	// 2 new, stored [1 2 3 4 5 6 7], <nil>
}
