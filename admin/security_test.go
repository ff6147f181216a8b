package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/schedule"
	"pgregory.net/rapid"
)

// send serves req with h and returns the recorder.
func send(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// forged is a request a page on another site can make a browser send
// without a CORS preflight: a "simple" request.
func forged(method, path, contentType, body string) *http.Request {
	req := localRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

// TestHandlerRefusesForgeableRequests is the regression for cross-site
// "simple" requests (form or text/plain bodies) that paused providers and
// created, paused and deleted jobs: every state change without the JSON
// content type answers 415 and changes nothing, and a JSON one a browser
// marks as cross-site answers 403.
func TestHandlerRefusesForgeableRequests(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	var j wireJob
	a.want("POST", "/jobs", `{"provider":"p","kind":"backfill","stream":"s"}`, http.StatusCreated, &j)
	id := fmt.Sprint(j.ID)
	newJob := `{"provider":"evil","kind":"backfill","stream":"x"}`
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"} {
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/providers/p/pause", ""},
			{"POST", "/jobs", newJob},
			{"POST", "/jobs", "provider=evil&kind=backfill&stream=x"},
			{"POST", "/jobs/" + id + "/pause", ""},
			{"POST", "/jobs/" + id + "/run", ""},
			{"DELETE", "/jobs/" + id, ""},
		} {
			rec := send(a.h, forged(r.method, r.path, ct, r.body))
			if rec.Code != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with Content-Type %q: %d %s, want 415", r.method, r.path, ct, rec.Code, rec.Body)
			}
		}
	}
	for _, h := range []http.Header{{"Sec-Fetch-Site": {"cross-site"}}, {"Origin": {"https://evil.example"}}} {
		req := forged("POST", "/jobs", "application/json", newJob)
		for k, v := range h {
			req.Header[k] = v
		}
		if rec := send(a.h, req); rec.Code != http.StatusForbidden {
			t.Errorf("a cross-origin JSON POST (%v): %d %s, want 403", h, rec.Code, rec.Body)
		}
	}
	if isPaused(a.s, "p") {
		t.Error("a forged request paused the provider")
	}
	var list struct{ Jobs []wireJob }
	a.want("GET", "/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].State != "idle" {
		t.Errorf("jobs after forged requests: %+v, want the one idle job", list.Jobs)
	}
	// Reads stay simple, and a same-origin JSON request passes.
	if rec := send(a.h, forged("GET", "/jobs", "text/plain", "")); rec.Code != http.StatusOK {
		t.Errorf("GET with a text body: %d, want 200", rec.Code)
	}
	req := forged("POST", "/jobs/"+id+"/pause", "application/json; charset=utf-8", "")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if rec := send(a.h, req); rec.Code != http.StatusOK {
		t.Errorf("same-origin JSON pause: %d %s, want 200", rec.Code, rec.Body)
	}
}

// countingReader is an endless body that counts what was read of it.
type countingReader struct {
	mu sync.Mutex
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range p {
		p[i] = ' '
	}
	c.n += int64(len(p))
	return len(p), nil
}

func (c *countingReader) read() int64 { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// TestHandlerBodyBounds: a body over 2 MiB answers 413, reading at most
// the bound of an endless body, and none at all of one whose declared
// length is over it.
func TestHandlerBodyBounds(t *testing.T) {
	t.Parallel()
	const bound = 2 << 20
	a := newAPI(t, schedule.Config{}, nil)
	for _, declared := range []bool{false, true} {
		body := &countingReader{}
		req := forged("POST", "/jobs", "application/json", "")
		req.Body = io.NopCloser(io.MultiReader(strings.NewReader(`{"provider":"`), body))
		req.ContentLength = -1
		if declared {
			req.ContentLength = 1 << 40
		}
		rec := send(a.h, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("declared=%v: %d %s, want 413", declared, rec.Code, rec.Body)
		}
		if n := body.read(); n > bound+64<<10 || (declared && n != 0) {
			t.Errorf("declared=%v: read %d bytes of the body, want at most %d (none if declared)", declared, n, bound)
		}
	}
}

// TestHandlerAuthorize: the hook sees every request before its body is
// read; ErrUnauthenticated answers 401, another error 403, with the hook's
// message; nil serves the request.
func TestHandlerAuthorize(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	var seen []string
	var mu sync.Mutex
	h, err := admin.New(s, admin.Config{Authorize: func(r *http.Request) error {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		switch tok := r.Header.Get("Authorization"); {
		case tok == "Bearer admin":
			return nil
		case tok == "Bearer viewer" && (r.Method == "GET" || r.Method == "HEAD"):
			return nil
		case tok == "Bearer viewer":
			return errors.New("admin: viewers may only read")
		}
		return fmt.Errorf("%w: a bearer token is required", admin.ErrUnauthenticated)
	}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(token, method, path, body string) (int, string) {
		req := forged(method, path, "application/json", body)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := send(h, req)
		return rec.Code, rec.Body.String()
	}
	job := `{"provider":"p","kind":"backfill","stream":"s"}`
	for i, tc := range []struct {
		token, method, path, body string
		code                      int
		msg                       string
	}{
		{"", "GET", "/jobs", "", 401, "bearer token is required"},
		{"", "GET", "/", "", 401, "bearer token is required"},
		{"", "POST", "/jobs", job, 401, "bearer token is required"},
		{"viewer", "POST", "/jobs", job, 403, "viewers may only read"},
		{"viewer", "POST", "/providers/p/pause", "", 403, "viewers may only read"},
		{"admin", "POST", "/jobs", job, 201, ""},
		{"viewer", "GET", "/jobs", "", 200, ""},
		{"viewer", "GET", "/", "", 200, ""},
	} {
		code, body := call(tc.token, tc.method, tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("%d: %s %s as %q: %d %s, want %d with %q", i, tc.method, tc.path, tc.token, code, body, tc.code, tc.msg)
		}
	}
	if isPaused(s, "p") {
		t.Error("a viewer paused a provider")
	}
	// A refused request's body is never read.
	body := &countingReader{}
	req := forged("POST", "/jobs", "application/json", "")
	req.Body = io.NopCloser(body)
	if rec := send(h, req); rec.Code != 401 || body.read() != 0 {
		t.Errorf("anonymous POST: %d after reading %d bytes, want 401 after none", rec.Code, body.read())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 9 {
		t.Errorf("the hook saw %d requests, want 9: %v", len(seen), seen)
	}
}

// TestNewConfig: negative bounds are refused, naming the field.
func TestNewConfig(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	for _, tc := range []struct {
		cfg   admin.Config
		field string
	}{
		{admin.Config{MaxJobs: -1}, "Config.MaxJobs"},
		{admin.Config{MaxPageBytes: -1}, "Config.MaxPageBytes"},
		{admin.Config{SampleEvery: -time.Second}, "Config.SampleEvery"},
		{admin.Config{SampleEvery: time.Millisecond}, "Config.SampleEvery"},
		{admin.Config{SampleEvery: 2 * time.Hour}, "Config.SampleEvery"},
	} {
		_, err := admin.New(s, tc.cfg)
		if !errors.Is(err, admin.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
	}
	if _, err := admin.New(nil, admin.Config{}); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Errorf("New(nil) = %v, want ErrInvalidConfig", err)
	}
}

// listingStore is a JobStore that records the largest List answer, in
// jobs and in payload bytes: what one request makes the store hold in
// memory at once. It has no Count, so the handler counts by listing.
type listingStore struct {
	schedule.JobStore
	mu                  sync.Mutex
	maxJobs, maxPayload int
}

func (s *listingStore) List(ctx context.Context, q schedule.Query) ([]schedule.Job, error) {
	jobs, err := s.JobStore.List(ctx, q)
	n := 0
	for _, j := range jobs {
		n += len(j.Payload)
	}
	s.mu.Lock()
	s.maxJobs, s.maxPayload = max(s.maxJobs, len(jobs)), max(s.maxPayload, n)
	s.mu.Unlock()
	return jobs, err
}

// listPage is a GET /jobs answer.
type listPage struct {
	Jobs []wireJob `json:"jobs"`
	Next int64     `json:"next"`
}

// TestHandlerListBounded is the regression for a GET /jobs that drove the
// heap to 902 MiB: with jobs of 512 KiB payloads, ?limit=1000 answers at
// most 4 MiB (and one job) with a "next" cursor, the store is never asked
// for more than a batch of jobs at once, and following "next" visits every
// job once.
func TestHandlerListBounded(t *testing.T) {
	t.Parallel()
	store := &listingStore{JobStore: schedule.NewMemoryJobStore()}
	s, err := schedule.New(schedule.Config{}, store, idle)
	if err != nil {
		t.Fatal(err)
	}
	const jobs, payload = 40, 512 << 10
	for i := range jobs {
		upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: fmt.Sprint(i), Payload: make([]byte, payload)})
	}
	store.maxJobs, store.maxPayload = 0, 0
	h := handler(t, s)
	seen := 0
	for after, pages := int64(0), 0; ; pages++ {
		rec := send(h, localRequest("GET", fmt.Sprintf("/jobs?limit=1000&after=%d", after), nil))
		if rec.Code != 200 || rec.Body.Len() > 4<<20+payload*2 {
			t.Fatalf("page %d: %d, %d bytes: want 200 within 4 MiB and one job", pages, rec.Code, rec.Body.Len())
		}
		var p listPage
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || len(p.Jobs) == 0 {
			t.Fatalf("page %d: %v, %d jobs", pages, err, len(p.Jobs))
		}
		for _, j := range p.Jobs {
			if j.ID <= after || len(j.Payload) != payload {
				t.Fatalf("page %d: job %d after %d with %d payload bytes", pages, j.ID, after, len(j.Payload))
			}
			after = j.ID
			seen++
		}
		if p.Next == 0 {
			break
		}
		if p.Next != after {
			t.Fatalf("page %d: next %d, want the last ID %d", pages, p.Next, after)
		}
	}
	if seen != jobs {
		t.Fatalf("paging visited %d jobs, want %d", seen, jobs)
	}
	if store.maxJobs > 65 || store.maxPayload > 65*payload {
		t.Fatalf("one List held %d jobs (%d payload bytes) in memory, want at most a batch of 65", store.maxJobs, store.maxPayload)
	}
	// The status page holds no more than a batch either.
	store.maxJobs = 0
	if rec := send(h, localRequest("GET", "/", nil)); rec.Code != 200 || store.maxJobs > 128 {
		t.Fatalf("GET /: %d, one List held %d jobs", rec.Code, store.maxJobs)
	}
}

// TestHandlerListManyJobs: with 100,000 jobs a GET /jobs answers its
// default 100 (or at most 1000) with a cursor, never the whole store.
func TestHandlerListManyJobs(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("100,000 jobs")
	}
	store := schedule.NewMemoryJobStore()
	s, _ := schedule.New(schedule.Config{}, store, idle)
	ctx := context.Background()
	for i := range 100_000 {
		if _, err := store.Upsert(ctx, schedule.Job{Provider: "p", Kind: schedule.KindBackfill, Stream: fmt.Sprint(i), State: schedule.StateIdle}); err != nil {
			t.Fatal(err)
		}
	}
	h := handler(t, s)
	for query, want := range map[string]int{"": 100, "?limit=1000": 1000} {
		rec := send(h, localRequest("GET", "/jobs"+query, nil))
		var p listPage
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || len(p.Jobs) != want || p.Next != int64(want) || rec.Body.Len() > 1<<20 {
			t.Fatalf("GET /jobs%s: %v, %d jobs, next %d, %d bytes; want %d jobs, next %d, under 1 MiB",
				query, err, len(p.Jobs), p.Next, rec.Body.Len(), want, want)
		}
	}
}

// TestPropertyListPaging: over any jobs, any filter, any ?limit= and any
// MaxPageBytes, following "next" from 0 visits every matching job exactly
// once in ID order, each page holds at most limit jobs and stays within
// MaxPageBytes unless it holds a single job, and only the last page lacks
// "next".
func TestPropertyListPaging(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		s, _ := newSched(rt, schedule.Config{}, nil)
		n := rapid.IntRange(0, 60).Draw(rt, "jobs")
		want := []int64{}
		for i := range n {
			prov := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "provider")
			size := rapid.IntRange(0, 3000).Draw(rt, "payload")
			j := upsert(rt, s, t0, schedule.Spec{Provider: prov, Kind: schedule.KindBackfill, Stream: fmt.Sprint(i), Payload: make([]byte, size)})
			if prov == "a" {
				want = append(want, j.ID)
			}
		}
		limit := rapid.IntRange(1, 20).Draw(rt, "limit")
		maxBytes := rapid.IntRange(1, 20000).Draw(rt, "maxPageBytes")
		h, err := admin.New(s, admin.Config{MaxPageBytes: maxBytes})
		if err != nil {
			rt.Fatalf("New: %v", err)
		}
		var got []int64
		for after, page := int64(0), 0; ; page++ {
			rec := send(h, localRequest("GET", fmt.Sprintf("/jobs?provider=a&limit=%d&after=%d", limit, after), nil))
			var p listPage
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 200 {
				rt.Fatalf("page %d: %d %v", page, rec.Code, err)
			}
			if len(p.Jobs) > limit || (len(p.Jobs) > 1 && rec.Body.Len() > maxBytes) {
				rt.Fatalf("page %d: %d jobs in %d bytes, limit %d, MaxPageBytes %d", page, len(p.Jobs), rec.Body.Len(), limit, maxBytes)
			}
			for _, j := range p.Jobs {
				got = append(got, j.ID)
			}
			if p.Next == 0 {
				break
			}
			if len(p.Jobs) == 0 || p.Next != p.Jobs[len(p.Jobs)-1].ID {
				rt.Fatalf("page %d: next %d after %d jobs", page, p.Next, len(p.Jobs))
			}
			after = p.Next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			rt.Fatalf("paging visited %v, want %v", got, want)
		}
	})
}

// TestHandlerMaxJobs: POST /jobs creates no job beyond MaxJobs (409) but
// still updates existing ones, with a store that counts and one that does
// not.
func TestHandlerMaxJobs(t *testing.T) {
	t.Parallel()
	for _, counts := range []bool{true, false} {
		var store schedule.JobStore = schedule.NewMemoryJobStore()
		if !counts {
			store = &listingStore{JobStore: store}
		}
		s, err := schedule.New(schedule.Config{}, store, idle)
		if err != nil {
			t.Fatal(err)
		}
		h, err := admin.New(s, admin.Config{MaxJobs: 3})
		if err != nil {
			t.Fatal(err)
		}
		a := &api{t: t, h: h, s: s}
		spec := func(stream string, prio int) string {
			return fmt.Sprintf(`{"provider":"p","kind":"backfill","stream":%q,"priority":%d}`, stream, prio)
		}
		for i := range 3 {
			a.want("POST", "/jobs", spec(fmt.Sprint(i), 1), http.StatusCreated, nil)
		}
		var e struct{ Error string }
		a.want("POST", "/jobs", spec("3", 1), http.StatusConflict, &e)
		if !strings.Contains(e.Error, "MaxJobs") {
			t.Errorf("counts=%v: 409 error %q does not name MaxJobs", counts, e.Error)
		}
		var j wireJob
		a.want("POST", "/jobs", spec("0", 7), http.StatusOK, &j)
		if j.Priority != 7 {
			t.Errorf("counts=%v: update at the cap gave priority %d, want 7", counts, j.Priority)
		}
		a.want("DELETE", fmt.Sprint("/jobs/", j.ID), "", http.StatusNoContent, nil)
		a.want("POST", "/jobs", spec("3", 1), http.StatusCreated, nil)
	}
}

// TestHandlerRefusesReboundHosts: with no Authorize, a request for a host
// name other than localhost is refused, whatever it asks: a web page the
// operator visits can point a name of its own at the handler's listener
// (DNS rebinding) and send it same-origin requests that pass the
// cross-origin check. Before, such a page paused a connector every
// process obeys, read the jobs and deleted them (found by a review). An IP
// address and localhost are served, and so are the names in Hosts.
// Authorize does not lift the check: behind an authentication that is the
// network alone (a hook returning nil, as the docs advised for one), a
// rebound page paused a provider and deleted a job (found by a review).
func TestHandlerRefusesReboundHosts(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	h := handler(t, s)
	for _, host := range []string{"localhost", "LOCALHOST:9000", "localhost.:8080", "app.localhost", "127.0.0.1:8080", "[::1]:8080", "10.0.0.7", "[fe80::1]", "[fe80::1%eth0]:8080", ""} {
		req := localRequest("GET", "/jobs", nil)
		req.Host = host
		if rec := send(h, req); rec.Code != http.StatusOK {
			t.Errorf("GET /jobs for host %q: %d %s, want 200", host, rec.Code, rec.Body)
		}
	}
	passThrough := func(*http.Request) error { return nil } // the network is the authentication
	authed, err := admin.New(s, admin.Config{Authorize: passThrough})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{"no Authorize": h, "a pass-through Authorize": authed} {
		for _, r := range []struct{ method, path string }{{"GET", "/jobs"}, {"GET", "/"}, {"POST", "/providers/p/pause"}, {"DELETE", "/jobs/1"}} {
			req := localRequest(r.method, r.path, nil)
			req.Host = "rebind.evil:8080"
			req.Header.Set("Origin", "http://rebind.evil:8080")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.Header.Set("Content-Type", "application/json")
			if rec := send(h, req); rec.Code != http.StatusForbidden {
				t.Errorf("%s %s for host rebind.evil, %s: %d %s, want 403", r.method, r.path, name, rec.Code, rec.Body)
			}
		}
	}
	named, err := admin.New(s, admin.Config{Authorize: passThrough, Hosts: []string{"Admin.Example.com."}})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"admin.example.com", "admin.example.com:8443", "ADMIN.example.com."} {
		req := localRequest("GET", "/jobs", nil)
		req.Host = host
		if rec := send(named, req); rec.Code != http.StatusOK {
			t.Errorf("GET /jobs for %q, a name in Hosts: %d %s, want 200", host, rec.Code, rec.Body)
		}
	}
	req := localRequest("GET", "/jobs", nil)
	req.Host = "rebind.evil"
	if rec := send(named, req); rec.Code != http.StatusForbidden {
		t.Errorf("GET /jobs for a name not in Hosts: %d %s, want 403", rec.Code, rec.Body)
	}
}

// TestHandlerRefusesReadsOtherSitesSend: a GET another site's page made
// the browser send (an <img>, a script, a fetch) is refused: it could not
// read the answer, but the collector paid a snapshot of the whole registry
// for each (hundreds at once, found by a review). A link followed to the
// page is served.
func TestHandlerRefusesReadsOtherSitesSend(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	h := handler(t, s)
	for _, c := range []struct {
		site, mode, dest string
		want             int
	}{
		{"cross-site", "no-cors", "image", http.StatusForbidden},
		{"cross-site", "cors", "empty", http.StatusForbidden},
		{"same-site", "no-cors", "script", http.StatusForbidden},
		{"cross-site", "navigate", "iframe", http.StatusForbidden},
		{"cross-site", "navigate", "document", http.StatusOK},
		{"same-origin", "cors", "empty", http.StatusOK},
		{"none", "navigate", "document", http.StatusOK},
		{"", "", "", http.StatusOK}, // not a browser
	} {
		for _, path := range []string{"/", "/connectors", "/stats", "/providers", "/jobs"} {
			req := localRequest("GET", path, nil)
			req.Header.Set("Sec-Fetch-Site", c.site)
			req.Header.Set("Sec-Fetch-Mode", c.mode)
			req.Header.Set("Sec-Fetch-Dest", c.dest)
			if rec := send(h, req); rec.Code != c.want {
				t.Errorf("GET %s (Sec-Fetch-Site %q, Mode %q, Dest %q): %d, want %d", path, c.site, c.mode, c.dest, rec.Code, c.want)
			}
		}
	}
}
