package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// api is a handler under test with helpers to call it.
type api struct {
	t *testing.T
	h http.Handler
	s *schedule.Scheduler
}

func newAPI(t *testing.T, cfg schedule.Config, r schedule.Worker) *api {
	t.Helper()
	s, _ := newSched(t, cfg, r)
	return &api{t: t, h: handler(t, s), s: s}
}

// do sends method path body as a well-behaved client does (JSON content
// type on state changes) and returns the status and the body.
func (a *api) do(method, path, body string) (int, string) {
	a.t.Helper()
	req := localRequest(method, path, strings.NewReader(body))
	if method != "GET" && method != "HEAD" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// want sends the request, checks the status, and decodes the JSON body
// into out (if non-nil).
func (a *api) want(method, path, body string, code int, out any) string {
	a.t.Helper()
	got, resp := a.do(method, path, body)
	if got != code {
		a.t.Fatalf("%s %s %s: status %d, want %d; body %s", method, path, body, got, code, resp)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(resp), out); err != nil {
			a.t.Fatalf("%s %s: body %q is not the expected JSON: %v", method, path, resp, err)
		}
	}
	return resp
}

// wantBad checks a 400 whose JSON error names field, its message that of
// the handler ("admin: ") or of the scheduler ("schedule: ").
func (a *api) wantBad(method, path, body, field string) {
	a.t.Helper()
	var e struct{ Error, Field string }
	a.want(method, path, body, http.StatusBadRequest, &e)
	if e.Field != field || !(strings.HasPrefix(e.Error, "admin: ") || strings.HasPrefix(e.Error, "schedule: ")) {
		a.t.Fatalf("%s %s %s: error %q naming field %q, want field %q", method, path, body, e.Error, e.Field, field)
	}
}

// wireJob is the JSON of a job as the API returns it.
type wireJob struct {
	ID         int64  `json:"id"`
	Provider   string `json:"provider"`
	Kind       string `json:"kind"`
	Stream     string `json:"stream"`
	Priority   int    `json:"priority"`
	IntervalMS int64  `json:"interval_ms"`
	Payload    []byte `json:"payload"`
	State      string `json:"state"`
	Version    int64  `json:"version"`
	Lease      *struct {
		Owner string `json:"owner"`
	} `json:"lease"`
}

func TestHandlerUpsertAndGet(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	body := `{"provider":"binance","kind":"incremental","stream":"BTC/USDT 1h","interval_ms":3600000,"payload":"aGk="}`
	var created, again, got wireJob
	a.want("POST", "/jobs", body, http.StatusCreated, &created)
	if created.ID <= 0 || created.Priority != 20 || created.IntervalMS != 3600000 || string(created.Payload) != "hi" || created.State != "idle" {
		t.Fatalf("created %+v, want an idle job with the default priority 20, the interval and the payload", created)
	}
	a.want("POST", "/jobs", strings.Replace(body, "3600000", "60000", 1), http.StatusOK, &again)
	if again.ID != created.ID || again.IntervalMS != 60000 || again.Version != 2 {
		t.Fatalf("second POST %+v, want the same job (id %d) with the new interval, version 2", again, created.ID)
	}
	a.want("GET", fmt.Sprint("/jobs/", created.ID), "", http.StatusOK, &got)
	if got.ID != created.ID || got.Stream != "BTC/USDT 1h" || got.Provider != "binance" {
		t.Fatalf("GET %+v", got)
	}
	a.want("GET", "/jobs/999", "", http.StatusNotFound, nil)
}

func TestHandlerUpsertBadInput(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	for _, tc := range []struct{ body, field string }{
		{`{`, "body"},
		{`not json`, "body"},
		// A second object was silently ignored, the first stored.
		{`{"provider":"p","kind":"backfill","stream":"s"}{"provider":"b","kind":"backfill","stream":"s"}`, "body"},
		{`{"provider":"p","kind":"backfill","stream":"s"} trailing`, "body"},
		{`{"provider":"p","kind":"backfill","stream":"s","bogus":1}`, "bogus"},
		{`{"provider":"p","kind":"backfill","stream":"s","interval_ms":"soon"}`, "interval_ms"},
		{`{"provider":"p","kind":"backfill","stream":"s","priority":"high"}`, "priority"},
		{`{"kind":"backfill","stream":"s"}`, "provider"},
		{`{"provider":"p","kind":"backfill"}`, "stream"},
		{`{"provider":"p","kind":"sideways","stream":"s"}`, "kind"},
		{`{"provider":"p","stream":"s"}`, "kind"},
		{`{"provider":"p","kind":"incremental","stream":"s"}`, "interval_ms"},
		{`{"provider":"p","kind":"incremental","stream":"s","interval_ms":-5}`, "interval_ms"},
		{`{"provider":"p","kind":"backfill","stream":"s","priority":1001}`, "priority"},
		{`{"provider":"p","kind":"backfill","stream":"s","priority":-1}`, "priority"},
		{`{"provider":"p","kind":"backfill","stream":"s","payload":"%%%"}`, "payload"},
		{`{"provider":"` + strings.Repeat("x", 2000) + `","kind":"backfill","stream":"s"}`, "provider"},
	} {
		a.wantBad("POST", "/jobs", tc.body, tc.field)
	}
	var list struct{ Jobs []wireJob }
	a.want("GET", "/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 0 {
		t.Fatalf("%d jobs stored after only bad requests", len(list.Jobs))
	}
}

func TestHandlerListFilters(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	for _, b := range []string{
		`{"provider":"a","kind":"incremental","stream":"x","interval_ms":1000}`,
		`{"provider":"a","kind":"backfill","stream":"x"}`,
		`{"provider":"b","kind":"backfill","stream":"y"}`,
	} {
		a.want("POST", "/jobs", b, http.StatusCreated, nil)
	}
	count := func(query string) int {
		t.Helper()
		var list struct{ Jobs []wireJob }
		a.want("GET", "/jobs"+query, "", http.StatusOK, &list)
		return len(list.Jobs)
	}
	for query, want := range map[string]int{
		"": 3, "?provider=a": 2, "?kind=backfill": 2, "?stream=y": 1, "?state=idle": 3, "?state=paused": 0,
		"?provider=a&kind=backfill": 1, "?limit=2": 2, "?after=2": 1, "?after=1&limit=1": 1,
	} {
		if got := count(query); got != want {
			t.Errorf("GET /jobs%s: %d jobs, want %d", query, got, want)
		}
	}
	for query, field := range map[string]string{
		"?kind=sideways": "kind", "?state=asleep": "state", "?after=-1": "after", "?after=x": "after",
		"?limit=1001": "limit", "?limit=-1": "limit", "?limit=ten": "limit",
	} {
		a.wantBad("GET", "/jobs"+query, "", field)
	}
}

func TestHandlerJobControl(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	var j wireJob
	a.want("POST", "/jobs", `{"provider":"p","kind":"incremental","stream":"s","interval_ms":60000}`, http.StatusCreated, &j)
	id := fmt.Sprint(j.ID)
	var got wireJob
	a.want("POST", "/jobs/"+id+"/pause", "", http.StatusOK, &got)
	if got.State != "paused" {
		t.Fatalf("after pause: %s", got.State)
	}
	a.want("POST", "/jobs/"+id+"/resume", "", http.StatusOK, &got)
	if got.State != "idle" {
		t.Fatalf("after resume: %s", got.State)
	}
	a.want("POST", "/jobs/"+id+"/run", "", http.StatusOK, &got)
	if got.State != "queued" {
		t.Fatalf("after run: %s", got.State)
	}
	// Claimed (running): run-now conflicts.
	if jobs := claim(t, a.s, time.Now()); len(jobs) != 1 {
		t.Fatalf("claimed %v", streams(jobs))
	}
	var e struct{ Error string }
	a.want("POST", "/jobs/"+id+"/run", "", http.StatusConflict, &e)
	if !strings.Contains(e.Error, "running") {
		t.Fatalf("409 error %q", e.Error)
	}
	a.want("GET", "/jobs/"+id, "", http.StatusOK, &got)
	if got.Lease == nil || got.Lease.Owner == "" || got.State != "running" {
		t.Fatalf("claimed job %+v, want running with a lease", got)
	}
	a.want("DELETE", "/jobs/"+id, "", http.StatusNoContent, nil)
	for _, p := range []string{"/pause", "/resume", "/run", ""} {
		method := "POST"
		if p == "" {
			method = "GET"
		}
		a.want(method, "/jobs/"+id+p, "", http.StatusNotFound, nil)
	}
	a.want("DELETE", "/jobs/"+id, "", http.StatusNotFound, nil)
	for _, bad := range []string{"abc", "0", "-3", "1.5"} {
		a.wantBad("POST", "/jobs/"+bad+"/pause", "", "id")
		a.wantBad("GET", "/jobs/"+bad, "", "id")
		a.wantBad("DELETE", "/jobs/"+bad, "", "id")
	}
	if code, _ := a.do("GET", "/jobs/1/pause", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET on a POST endpoint: %d, want 405", code)
	}
}

func TestHandlerProviders(t *testing.T) {
	t.Parallel()
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	provider(reg, "binance") // known to the registry, no job yet
	a := newAPI(t, schedule.Config{Budget: reg}, nil)
	a.want("POST", "/jobs", `{"provider":"kraken","kind":"backfill","stream":"s"}`, http.StatusCreated, nil)
	var pr struct {
		Provider string `json:"provider"`
		Paused   bool   `json:"paused"`
	}
	a.want("POST", "/providers/kraken/pause", "", http.StatusOK, &pr)
	if !pr.Paused || pr.Provider != "kraken" || !isPaused(a.s, "kraken") {
		t.Fatalf("pause answered %+v", pr)
	}
	var list struct {
		Providers []struct {
			Provider string           `json:"provider"`
			Jobs     int              `json:"jobs"`
			Due      int              `json:"due"`
			Paused   bool             `json:"paused"`
			Budget   *budget.Snapshot `json:"budget"`
		} `json:"providers"`
	}
	a.want("GET", "/providers", "", http.StatusOK, &list)
	if len(list.Providers) != 2 {
		t.Fatalf("providers %+v, want binance and kraken", list.Providers)
	}
	bn, kr := list.Providers[0], list.Providers[1]
	if bn.Provider != "binance" || bn.Budget == nil || bn.Budget.Breaker != "closed" || bn.Jobs != 0 {
		t.Errorf("binance: %+v, want its budget snapshot (breaker closed) and no jobs", bn)
	}
	if kr.Provider != "kraken" || !kr.Paused || kr.Jobs != 1 || kr.Due != 1 || kr.Budget != nil {
		t.Errorf("kraken: %+v, want paused, 1 job due, no budget snapshot", kr)
	}
	a.want("POST", "/providers/kraken/resume", "", http.StatusOK, &pr)
	if pr.Paused || isPaused(a.s, "kraken") {
		t.Fatalf("resume answered %+v", pr)
	}
	a.wantBad("POST", "/providers/"+strings.Repeat("x", 2000)+"/pause", "", "name")
}

func TestHandlerStats(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	a.want("POST", "/jobs", `{"provider":"p","kind":"backfill","stream":"s"}`, http.StatusCreated, nil)
	a.want("POST", "/jobs", `{"provider":"p","kind":"gap_fill","stream":"s","next_run":"2100-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	var snap schedule.Snapshot
	a.want("GET", "/stats", "", http.StatusOK, &snap)
	if snap.Total != 2 || snap.Jobs[schedule.StateIdle] != 2 || snap.Due != 1 || len(snap.Providers) != 1 {
		t.Fatalf("stats %+v, want 2 idle jobs, 1 due, 1 provider", snap)
	}
}

// TestHandlerStatusPageEscapes: the HTML page shows providers, jobs by
// state and the jobs, and escapes what hosts and operators typed.
func TestHandlerStatusPageEscapes(t *testing.T) {
	t.Parallel()
	reg, _ := budget.NewRegistry(budget.RegistryConfig{})
	provider(reg, "binance")
	a := newAPI(t, schedule.Config{Budget: reg}, nil)
	evil := `<script>alert(1)</script>`
	_, err := a.s.Upsert(context.Background(), schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: evil})
	if err != nil {
		t.Fatal(err)
	}
	req := localRequest("GET", "/", nil)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	page := string(body)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if strings.Contains(page, evil) || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("the stream name is not escaped in the page:\n%s", page)
	}
	for _, want := range []string{"binance", "closed", "waiting_rate_limit", "backfill", "Decisions"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	a.wantBad("GET", "/?state=asleep", "", "state")
	if code, _ := a.do("GET", "/?state=idle", ""); code != http.StatusOK {
		t.Fatalf("GET /?state=idle: %d", code)
	}
}

// TestNextRunIsBounded: interval_ms was held to [0, 100 years], but a
// next_run of 9999-12-31 made a job that never runs, answered 201; and
// since an upsert never moves a job's schedule, posting the spec again
// did not mend it (found by a review).
func TestNextRunIsBounded(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	a.wantBad("POST", "/jobs", `{"provider":"p","kind":"backfill","stream":"s","next_run":"9999-12-31T23:59:59Z"}`, "next_run")
}

// TestAJobBodyNamesEachFieldOnce: a field of POST /jobs given twice, or
// spelled otherwise than its name, is a 400 naming it (the last of
// duplicates won, whatever an audit log had read).
func TestAJobBodyNamesEachFieldOnce(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	a.wantBad("POST", "/jobs", `{"provider":"p","kind":"backfill","stream":"s","stream":"t"}`, "stream")
	a.wantBad("POST", "/jobs", `{"provider":"p","kind":"backfill","stream":"s","Priority":3}`, "Priority")
}
