package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

func ExampleNew() {
	ctx := context.Background()
	runner := schedule.RunnerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
		// Run one stream: fetch pages through the provider's budget, write
		// them, commit the cursor; stop when ctx ends.
		return schedule.Result{}, nil
	})
	s, err := schedule.New(schedule.Config{MaxRunning: 16, MaxPerProvider: 2}, schedule.NewMemoryStore(), runner)
	if err != nil {
		panic(err)
	}
	spec := schedule.Spec{Provider: "binance", Kind: schedule.KindIncremental, Stream: "BTC-USDT/1h", Interval: time.Hour}
	a, _ := s.Upsert(ctx, spec)
	b, _ := s.Upsert(ctx, spec) // adding it again changes nothing
	fmt.Println("same job:", a.ID == b.ID, "- priority", a.Priority, "- state", a.State)
	// go s.Run(ctx) would now run it every hour, ±5%.
	// Output:
	// same job: true - priority 20 - state idle
}

func ExampleScheduler_ClaimAt() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := schedule.New(schedule.Config{MaxRunning: 4, MaxPerProvider: 2}, schedule.NewMemoryStore(),
		schedule.RunnerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	for _, spec := range []schedule.Spec{
		{Provider: "binance", Kind: schedule.KindBackfill, Stream: "BTC-USDT/1h"},
		{Provider: "binance", Kind: schedule.KindIncremental, Stream: "BTC-USDT/1h", Interval: time.Hour},
		{Provider: "binance", Kind: schedule.KindIncremental, Stream: "ETH-USDT/1h", Interval: time.Hour},
		{Provider: "binance", Kind: schedule.KindGapFill, Stream: "BTC-USDT/1h"},
		{Provider: "kraken", Kind: schedule.KindBackfill, Stream: "XBT-USD/1h"},
		{Provider: "kraken", Kind: schedule.KindRefresh, Stream: "markets", Interval: 12 * time.Hour},
	} {
		_, _ = s.UpsertAt(ctx, now, spec)
	}
	// One decision: gap fills first, then fresh data, at most two per
	// provider; backfills only for providers with no head work left.
	jobs, _ := s.ClaimAt(ctx, now)
	for _, j := range jobs {
		fmt.Println(j.Provider, j.Kind, j.Stream)
	}
	// Output:
	// binance gap_fill BTC-USDT/1h
	// binance incremental BTC-USDT/1h
	// kraken refresh markets
}

func ExampleScheduler_FinishAt() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryStore(),
		schedule.RunnerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	_, _ = s.UpsertAt(ctx, now, schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "BTC-USDT/1m"})
	_, _ = s.UpsertAt(ctx, now, schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "ETH-USDT/1m"})
	jobs, _ := s.ClaimAt(ctx, now)

	// The first run spent its request cap: re-queued, no cool-down.
	j, _ := s.FinishAt(ctx, now, jobs[0], schedule.Result{}, &budget.Error{Reason: forage.ReasonRequestCap})
	fmt.Println(j.Stream, j.State, "again in", j.NextRun.Sub(now))
	// The second met a 429 with Retry-After: 30s: it waits for the reset,
	// and so does every other job of binance.
	j, _ = s.FinishAt(ctx, now, jobs[1], schedule.Result{}, &budget.Error{Reason: forage.ReasonThrottled, Until: now.Add(30 * time.Second)})
	fmt.Println(j.Stream, j.State, "again in", j.NextRun.Sub(now))
	fmt.Println("claimed at +10s:", len(must(s.ClaimAt(ctx, now.Add(10*time.Second)))))
	fmt.Println("claimed at +30s:", len(must(s.ClaimAt(ctx, now.Add(30*time.Second)))))
	// Output:
	// BTC-USDT/1m queued again in 1s
	// ETH-USDT/1m waiting_rate_limit again in 30s
	// claimed at +10s: 0
	// claimed at +30s: 2
}

// must drops the error (setup for the examples).
func must[T any](v T, _ error) T { return v }

func ExampleMemoryStore_Claim() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	store := schedule.NewMemoryStore()
	add := func(k schedule.Kind, stream string, due time.Time) {
		_, _ = store.Upsert(ctx, schedule.Job{Provider: "p", Kind: k, Stream: stream, Priority: k.DefaultPriority(),
			Interval: time.Minute, State: schedule.StateIdle, NextRun: due})
	}
	add(schedule.KindBackfill, "history", now.Add(-time.Hour)) // due for an hour
	add(schedule.KindIncremental, "head", now)
	add(schedule.KindIncremental, "later", now.Add(time.Minute)) // not due yet

	f := schedule.ClaimFilter{PerProvider: 2, Aging: time.Minute}
	jobs, _ := store.Claim(ctx, now, "worker-1", time.Minute, 10, f)
	for _, j := range jobs {
		fmt.Println("claimed", j.Stream, j.State, "lease until +"+j.Lease.Until.Sub(now).String())
	}
	// The backfill waits while its provider's head job runs, however long
	// it has been due.
	jobs, _ = store.Claim(ctx, now, "worker-2", time.Minute, 10, f)
	fmt.Println("then", len(jobs))
	// Output:
	// claimed head running lease until +1m0s
	// then 0
}

func ExampleScheduler_Handler() {
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryStore(),
		schedule.RunnerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	srv := httptest.NewServer(http.StripPrefix("/api/v1", s.Handler()))
	defer srv.Close()

	body := `{"provider":"binance","kind":"incremental","stream":"BTC-USDT/1h","interval_ms":3600000}`
	resp, _ := http.Post(srv.URL+"/api/v1/jobs", "application/json", strings.NewReader(body))
	resp.Body.Close()
	fmt.Println("POST /api/v1/jobs:", resp.Status)

	resp, _ = http.Post(srv.URL+"/api/v1/jobs", "application/json", strings.NewReader(`{"provider":"binance","kind":"incremental","stream":"x"}`))
	var e struct{ Field string }
	_ = jsonDecode(resp, &e)
	fmt.Println("without an interval:", resp.Status, "field", e.Field)

	resp, _ = http.Post(srv.URL+"/api/v1/jobs/1/pause", "application/json", nil) // JSON, even without a body
	var j struct{ State string }
	_ = jsonDecode(resp, &j)
	fmt.Println("POST /api/v1/jobs/1/pause:", resp.Status, j.State)
	// Output:
	// POST /api/v1/jobs: 201 Created
	// without an interval: 400 Bad Request field interval_ms
	// POST /api/v1/jobs/1/pause: 200 OK paused
}

// ExampleNewHandler guards the admin API with a bearer token: anyone with
// the viewer token may read, only the admin token may change state.
func ExampleNewHandler() {
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryStore(), // setup
		schedule.RunnerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	h, err := schedule.NewHandler(s, schedule.HandlerConfig{
		Authorize: func(r *http.Request) error {
			// Compare secrets with crypto/subtle.ConstantTimeCompare in real code.
			switch r.Header.Get("Authorization") {
			case "Bearer admin-token":
				return nil
			case "Bearer viewer-token":
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					return nil
				}
				return errors.New("schedule: this token may only read")
			}
			return fmt.Errorf("%w: send Authorization: Bearer <token>", schedule.ErrUnauthenticated)
		},
		MaxJobs: 10_000,
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/admin", h))
	defer srv.Close()

	post := func(token, path, body string) string {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/admin"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json") // required on every state change
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, _ := http.DefaultClient.Do(req)
		resp.Body.Close()
		return resp.Status
	}
	job := `{"provider":"binance","kind":"backfill","stream":"BTC-USDT/1h"}`
	fmt.Println("anonymous:", post("", "/jobs", job))
	fmt.Println("viewer:   ", post("viewer-token", "/jobs", job))
	fmt.Println("admin:    ", post("admin-token", "/jobs", job))

	// A form post, which any web page can make a browser send, is refused.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/admin/providers/binance/pause", strings.NewReader("x=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer admin-token") // a browser would add the operator's cookie
	resp, _ := http.DefaultClient.Do(req)
	resp.Body.Close()
	fmt.Println("form post:", resp.Status)
	// Output:
	// anonymous: 401 Unauthorized
	// viewer:    403 Forbidden
	// admin:     201 Created
	// form post: 415 Unsupported Media Type
}

// ExampleHandler_providers pauses a provider through the admin API and
// pages through the providers. Only a provider the scheduler knows (it has
// a job, is paused, or is in Config.Budget) can be paused.
func ExampleHandler_providers() {
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryStore(), // setup
		schedule.RunnerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, p := range []string{"binance", "kraken", "okx"} { // setup
		_, _ = s.Upsert(context.Background(), schedule.Spec{Provider: p, Kind: schedule.KindBackfill, Stream: "BTC-USDT/1h"})
	}

	for _, p := range []string{"kraken", "typo"} {
		resp, _ := http.Post(srv.URL+"/providers/"+p+"/pause", "application/json", nil)
		resp.Body.Close()
		fmt.Println("pause", p+":", resp.Status)
	}
	for next := ""; ; {
		resp, _ := http.Get(srv.URL + "/providers?limit=2&after=" + url.QueryEscape(next))
		var page struct {
			Providers []struct {
				Provider string
				Paused   bool
			}
			Next *string
		}
		_ = jsonDecode(resp, &page)
		fmt.Println("page:", page.Providers)
		if page.Next == nil {
			break
		}
		next = *page.Next
	}
	// Output:
	// pause kraken: 200 OK
	// pause typo: 404 Not Found
	// page: [{binance false} {kraken true}]
	// page: [{okx false}]
}

// jsonDecode reads resp's JSON body into v and closes it (setup).
func jsonDecode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
