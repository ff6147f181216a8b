package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
	"pgregory.net/rapid"
)

// TestHandlerPausesOnlyKnownProviders (regression: POST
// /providers/{name}/pause took any name, and 50,000 of them grew the heap
// by 56 MiB and GET /stats to 53 MB): a provider the scheduler does not
// know answers 404 and is not kept; one with a job, in the budget
// registry or already paused is paused and resumed as before.
func TestHandlerPausesOnlyKnownProviders(t *testing.T) {
	t.Parallel()
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	provider(reg, "binance")
	a := newAPI(t, schedule.Config{Budget: reg}, nil)
	for i := range 50 {
		a.want("POST", fmt.Sprintf("/providers/nosuch-%d/pause", i), "", http.StatusNotFound, nil)
		a.want("POST", fmt.Sprintf("/providers/nosuch-%d/resume", i), "", http.StatusNotFound, nil)
	}
	if isPaused(a.s, "nosuch-0") {
		t.Fatal("an unknown provider was paused")
	}
	upsert(t, a.s, t0, schedule.Spec{Provider: "kraken", Kind: schedule.KindBackfill, Stream: "s"})
	a.s.SetProviderPaused("host-paused", true) // the host's own pauses are its to bound
	for _, p := range []string{"binance", "kraken", "host-paused"} {
		a.want("POST", "/providers/"+p+"/pause", "", http.StatusOK, nil)
		if !isPaused(a.s, p) {
			t.Fatalf("%s not paused after a 200", p)
		}
	}
	var snap schedule.Snapshot
	a.want("GET", "/stats", "", http.StatusOK, &snap)
	if len(snap.Providers) != 3 || snap.MoreProviders != 0 {
		t.Fatalf("stats list %d providers (%d more), want binance, host-paused and kraken: %+v", len(snap.Providers), snap.MoreProviders, snap.Providers)
	}
	a.want("POST", "/providers/host-paused/resume", "", http.StatusOK, nil)
	a.want("POST", "/providers/host-paused/resume", "", http.StatusNotFound, nil) // forgotten once resumed
}

// TestHandlerMaxPausedProviders: the handler pauses at most
// MaxPausedProviders providers; re-pausing a paused one and resuming pass.
func TestHandlerMaxPausedProviders(t *testing.T) {
	t.Parallel()
	reg, _ := budget.NewRegistry(budget.RegistryConfig{})
	for i := range 5 {
		provider(reg, fmt.Sprintf("p%d", i))
	}
	s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
	h, err := admin.New(s, admin.Config{MaxPausedProviders: 3})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{t: t, h: h, s: s}
	for i := range 3 {
		a.want("POST", fmt.Sprintf("/providers/p%d/pause", i), "", http.StatusOK, nil)
	}
	a.want("POST", "/providers/p3/pause", "", http.StatusConflict, nil)
	a.want("POST", "/providers/p0/pause", "", http.StatusOK, nil) // already paused
	a.want("POST", "/providers/p0/resume", "", http.StatusOK, nil)
	a.want("POST", "/providers/p3/pause", "", http.StatusOK, nil)
	if isPaused(s, "p4") || !isPaused(s, "p3") || isPaused(s, "p0") {
		t.Fatal("the paused set is not p1, p2, p3")
	}
	if _, err := admin.New(s, admin.Config{MaxPausedProviders: -1}); err == nil || !strings.Contains(err.Error(), "Config.MaxPausedProviders") {
		t.Fatalf("New(MaxPausedProviders: -1) = %v, want an error naming the field", err)
	}
}

// manyProviders returns an API over a scheduler in which the host paused
// n providers: more than a snapshot lists.
func manyProviders(t *testing.T, n int, cfg admin.Config) *api {
	t.Helper()
	s, _ := newSched(t, schedule.Config{}, nil)
	for i := range n {
		s.SetProviderPaused(fmt.Sprintf("%s-%05d", strings.Repeat("x", 900), i), true)
	}
	h, err := admin.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &api{t: t, h: h, s: s}
}

// TestSnapshotProvidersBounded (regression: every paused name was in
// Snapshot.Providers, served unpaged by GET /stats, GET /providers and
// GET /): GET /stats lists the first 100 providers and counts the rest; the status page says how many it left out; GET
// /providers pages.
func TestSnapshotProvidersBounded(t *testing.T) {
	t.Parallel()
	const shown = 100 // the providers GET /stats and the status page show
	const n = 3 * shown
	a := manyProviders(t, n, admin.Config{})
	body := a.want("GET", "/stats", "", http.StatusOK, nil)
	var snap schedule.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Providers) != shown || snap.MoreProviders != n-shown {
		t.Fatalf("GET /stats: %d providers, %d more; want %d and %d", len(snap.Providers), snap.MoreProviders, shown, n-shown)
	}
	if max := shown * 1100; len(body) > max {
		t.Fatalf("GET /stats: %d bytes, want at most %d", len(body), max)
	}
	body = a.want("GET", "/providers", "", http.StatusOK, nil)
	if max := 100 * 1100; len(body) > max {
		t.Fatalf("GET /providers: %d bytes, want at most %d (one default page)", len(body), max)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, localRequest("GET", "/", nil))
	page := rec.Body.String()
	if max := shown*1500 + 20_000; rec.Code != 200 || len(page) > max {
		t.Fatalf("GET /: %d, %d bytes, want 200 and at most %d", rec.Code, len(page), max)
	}
	if want := fmt.Sprintf("%d more", n-shown); !strings.Contains(page, want) {
		t.Fatalf("the status page does not say %q", want)
	}
}

// providerPage is the body of GET /providers.
type providerPage struct {
	Providers []schedule.ProviderSnapshot `json:"providers"`
	Next      *string                     `json:"next"`
}

// TestPropertyProviderPaging: following "next" from any limit and byte cap
// lists every provider once, in name order, and each page respects its
// limit and, beyond its first provider, its byte cap.
func TestPropertyProviderPaging(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(rt, "providers")
		limit := rapid.IntRange(1, 15).Draw(rt, "limit")
		maxBytes := rapid.IntRange(1, 8000).Draw(rt, "maxBytes")
		s, _ := newSched(rt, schedule.Config{}, nil)
		var want []string
		for i := range n {
			name := fmt.Sprintf("p%03d%s", i, strings.Repeat("é", rapid.IntRange(0, 400).Draw(rt, "pad")))
			s.SetProviderPaused(name, true)
			want = append(want, name)
		}
		h, err := admin.New(s, admin.Config{MaxPageBytes: maxBytes})
		if err != nil {
			rt.Fatal(err)
		}
		var got []string
		for after, step := "", 0; ; step++ {
			if step > n+1 {
				rt.Fatalf("paging did not end after %d pages", step)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, localRequest("GET", "/providers?limit="+fmt.Sprint(limit)+"&after="+url.QueryEscape(after), nil))
			var p providerPage
			if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
				rt.Fatalf("page %d: %d %s", step, rec.Code, rec.Body)
			}
			if len(p.Providers) > limit || (len(p.Providers) > 1 && rec.Body.Len() > maxBytes) {
				rt.Fatalf("page %d: %d providers in %d bytes, over limit %d or cap %d", step, len(p.Providers), rec.Body.Len(), limit, maxBytes)
			}
			for _, pr := range p.Providers {
				got = append(got, pr.Provider)
			}
			if p.Next == nil {
				break
			}
			after = *p.Next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			rt.Fatalf("paged %d providers %q, want %d", len(got), got, len(want))
		}
	})
}

// TestHandler401Challenge: a 401 carries a WWW-Authenticate challenge, as
// RFC 9110 requires; a 403 does not.
func TestHandler401Challenge(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	h, err := admin.New(s, admin.Config{Authorize: func(r *http.Request) error {
		if r.Header.Get("Authorization") == "" {
			return fmt.Errorf("%w: a bearer token is required", admin.ErrUnauthenticated)
		}
		return fmt.Errorf("admin: not allowed")
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest("GET", "/jobs", nil))
	if got := rec.Header().Get("WWW-Authenticate"); rec.Code != 401 || !strings.HasPrefix(got, "Bearer") {
		t.Fatalf("anonymous GET /jobs: %d with WWW-Authenticate %q, want 401 with a Bearer challenge", rec.Code, got)
	}
	req := localRequest("GET", "/jobs", nil)
	req.Header.Set("Authorization", "Bearer viewer")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got := rec.Header().Get("WWW-Authenticate"); rec.Code != 403 || got != "" {
		t.Fatalf("refused GET /jobs: %d with WWW-Authenticate %q, want 403 without", rec.Code, got)
	}
}

// slowStore is a JobStore whose List takes a second (of fake time) and
// that records how many Lists ran at once.
type slowStore struct {
	schedule.JobStore
	mu        sync.Mutex
	now, most int
}

func (s *slowStore) List(ctx context.Context, q schedule.Query) ([]schedule.Job, error) {
	s.mu.Lock()
	s.now++
	s.most = max(s.most, s.now)
	s.mu.Unlock()
	time.Sleep(time.Second)
	s.mu.Lock()
	s.now--
	s.mu.Unlock()
	return s.JobStore.List(ctx, q)
}

// TestHandlerSnapshotsOneAtATime: every GET /stats, GET /providers and
// GET / reads the whole store, a batch of payloads at a time; concurrent
// ones take turns, so they do not multiply the memory held.
func TestHandlerSnapshotsOneAtATime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &slowStore{JobStore: schedule.NewMemoryJobStore()}
		s, err := schedule.New(schedule.Config{}, store, idle)
		if err != nil {
			t.Fatal(err)
		}
		upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "s"})
		h := handler(t, s)
		var wg sync.WaitGroup
		for i := range 9 {
			wg.Go(func() {
				path := []string{"/stats", "/providers", "/"}[i%3]
				if rec := send(h, localRequest("GET", path, nil)); rec.Code != 200 {
					t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
				}
			})
		}
		wg.Wait()
		if store.most != 1 {
			t.Fatalf("%d snapshots read the store at once, want 1", store.most)
		}
	})
}

// TestPropertyProviderPauses: against a model, any sequence of pauses and
// resumes of known and unknown providers through the handler answers 200
// for known ones (409 for a pause over the cap), 404 for unknown ones, and
// leaves paused exactly the model's set: never an unknown provider, never
// more than MaxPausedProviders.
func TestPropertyProviderPauses(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		reg, _ := budget.NewRegistry(budget.RegistryConfig{})
		s, _ := newSched(rt, schedule.Config{Budget: reg}, nil)
		known := map[string]bool{}
		for i, n := 0, rapid.IntRange(0, 6).Draw(rt, "known"); i < n; i++ {
			name := fmt.Sprintf("k%d", i)
			if rapid.Bool().Draw(rt, "by job") {
				upsert(rt, s, t0, schedule.Spec{Provider: name, Kind: schedule.KindBackfill, Stream: "s"})
			} else {
				provider(reg, name)
			}
			known[name] = true
		}
		limit := rapid.IntRange(1, 4).Draw(rt, "MaxPausedProviders")
		h, err := admin.New(s, admin.Config{MaxPausedProviders: limit})
		if err != nil {
			rt.Fatal(err)
		}
		names := []string{"k0", "k1", "k2", "k3", "k4", "k5", "u0", "u1", "ü ok"}
		paused := map[string]bool{}
		for step, n := 0, rapid.IntRange(1, 40).Draw(rt, "steps"); step < n; step++ {
			name := rapid.SampledFrom(names).Draw(rt, "name")
			pause := rapid.Bool().Draw(rt, "pause")
			want := http.StatusOK
			switch {
			case !known[name] && !paused[name]:
				want = http.StatusNotFound
			case pause && !paused[name] && len(paused) >= limit:
				want = http.StatusConflict
			case pause:
				paused[name] = true
			default:
				delete(paused, name)
			}
			verb := map[bool]string{true: "pause", false: "resume"}[pause]
			req := localRequest("POST", "/providers/"+url.PathEscape(name)+"/"+verb, nil)
			req.Header.Set("Content-Type", "application/json")
			if rec := send(h, req); rec.Code != want {
				rt.Fatalf("step %d: %s %q: %d %s, want %d", step, verb, name, rec.Code, rec.Body, want)
			}
			for _, p := range names {
				if isPaused(s, p) != paused[p] {
					rt.Fatalf("step %d: isPaused(%q) = %v, model says %v", step, p, !paused[p], paused[p])
				}
			}
		}
	})
}

// TestHandlerMaxPausedProvidersConcurrent: concurrent pauses of distinct
// known providers through one handler pass the cap together never: exactly
// MaxPausedProviders of them answer 200, the rest 409.
func TestHandlerMaxPausedProvidersConcurrent(t *testing.T) {
	t.Parallel()
	const n, limit = 40, 7
	reg, _ := budget.NewRegistry(budget.RegistryConfig{})
	for i := range n {
		provider(reg, fmt.Sprintf("p%d", i))
	}
	s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
	h, err := admin.New(s, admin.Config{MaxPausedProviders: limit})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := localRequest("POST", fmt.Sprintf("/providers/p%d/pause", i), nil)
			req.Header.Set("Content-Type", "application/json")
			rec := send(h, req)
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusOK] != limit || codes[http.StatusConflict] != n-limit || len(s.PausedProviders()) != limit {
		t.Fatalf("answers %v, %d paused; want %d × 200, %d × 409 and %d paused", codes, len(s.PausedProviders()), limit, n-limit, limit)
	}
}
