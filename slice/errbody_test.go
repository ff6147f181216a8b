package slice_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// serveInProcess is a RoundTripper that answers with h, in the process
// (no sockets: it runs in a synctest bubble).
type serveInProcess struct{ h http.Handler }

func (s serveInProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// eventSink keeps events by id.
type eventSink map[int]Event

func (s eventSink) Write(_ context.Context, p slice.Page[Event]) error {
	for _, e := range p.Records {
		s[e.ID] = e
	}
	return nil
}

// TestAnAnswerThatIsNotThePageIsNoEnd: a feed whose page says "no more" by
// has_more, read as ExampleFetchFunc_http reads it, meets on its third
// page, once, a 200 or 202 whose body is not a page (an error object,
// {}, null, a page with has_more null, a 202 still computing). The run
// asks again and collects all 30 events, caught up; it ended caught up
// with 6 of them, a hole behind a done, when such an answer decoded into
// the page as "no more".
func TestAnAnswerThatIsNotThePageIsNoEnd(t *testing.T) {
	t.Parallel()
	for _, bad := range []struct {
		code int
		body string
	}{
		{200, `{"ok":false,"error":"ratelimited"}`}, {200, `{}`}, {200, `null`},
		{200, `{"events":null,"has_more":null}`}, {202, `{}`},
	} {
		synctest.Test(t, func(t *testing.T) {
			served := false
			api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				after, _ := strconv.Atoi(r.URL.Query().Get("after"))
				if after == 6 && !served {
					served = true
					w.WriteHeader(bad.code)
					_, _ = w.Write([]byte(bad.body))
					return
				}
				more := after+3 < 30
				page := eventsPage{HasMore: &more}
				for id := after + 1; id <= min(after+3, 30); id++ {
					page.Events = append(page.Events, Event{ID: id})
				}
				_ = json.NewEncoder(w).Encode(page)
			})
			client := &http.Client{Transport: serveInProcess{api}}
			feed := slice.FetchFunc[Event](func(ctx context.Context, s slice.Slice) (slice.Page[Event], forage.Outcome) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/events?after="+string(s.After), nil)
				resp, err := client.Do(req)
				var body eventsPage
				out := forage.FromHTTPJSON(resp, err, &body)
				if out.Class() != forage.Success {
					return slice.Page[Event]{}, out
				}
				p := slice.Page[Event]{Records: body.Events, Next: s.After, Last: !*body.HasMore}
				if n := len(body.Events); n > 0 {
					p.Next = strconv.AppendInt(nil, int64(body.Events[n-1].ID), 10)
				}
				return p, out
			})
			store := checkpoint.NewMemoryStore(checkpoint.Config{})
			sink := eventSink{}
			provider, _ := budget.NewLocal("api.test", budget.Config{})
			runner, err := slice.New(slice.Config[Event]{Stream: "events", Mode: checkpoint.SteadyState, Store: store, Provider: provider, Source: feed, Sink: sink})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := runner.Run(context.Background(), nil)
			if err != nil || rep.Reason != "" || len(sink) != 30 || string(rep.Cursor) != "30" {
				t.Errorf("%d %s on the third page: %d events, cursor %s, reason %q, %v; want all 30, caught up", bad.code, bad.body, len(sink), rep.Cursor, rep.Reason, err)
			}
		})
	}
}
