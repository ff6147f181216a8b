package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// Example mounts the admin API under a prefix and drives it as a client
// does: JSON bodies, and the JSON content type on every state change.
func Example() {
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryJobStore(),
		schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	h, _ := admin.New(s, admin.Config{}) // no Authorize: mount it only where operators alone reach it
	srv := httptest.NewServer(http.StripPrefix("/api/v1", h))
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

// ExampleNew guards the admin API with a bearer token: anyone with the
// viewer token may read, only the admin token may change state.
func ExampleNew() {
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryJobStore(), // setup
		schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	h, err := admin.New(s, admin.Config{
		Authorize: func(r *http.Request) error {
			// Compare secrets with crypto/subtle.ConstantTimeCompare in real code.
			switch r.Header.Get("Authorization") {
			case "Bearer admin-token":
				return nil
			case "Bearer viewer-token":
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					return nil
				}
				return errors.New("admin: this token may only read")
			}
			return fmt.Errorf("%w: send Authorization: Bearer <token>", admin.ErrUnauthenticated)
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
// a job, is paused, or is in schedule.Config.Budget) can be paused.
func ExampleHandler_providers() {
	s, _ := schedule.New(schedule.Config{}, schedule.NewMemoryJobStore(), // setup
		schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	h, _ := admin.New(s, admin.Config{}) // setup
	srv := httptest.NewServer(h)
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

// ExampleHandler_connectors pauses a connector (a provider of the
// scheduler's budget registry) through the admin API: every call of the
// provider stops before its attempt, in this process and, with a shared
// budget.RecordStore, in every other one. A field the provider learns
// cannot be set.
func ExampleHandler_connectors() {
	reg, _ := budget.NewRegistry(budget.RegistryConfig{})                            // setup
	s, _ := schedule.New(schedule.Config{Budget: reg}, schedule.NewMemoryJobStore(), // setup
		schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	h, _ := admin.New(s, admin.Config{}) // setup
	srv := httptest.NewServer(h)
	defer srv.Close()
	binance, _ := reg.Get("api.binance.com") // the host's code uses the provider

	post := func(body string) {
		resp, _ := http.Post(srv.URL+"/connectors", "application/json", strings.NewReader(body))
		var c struct{ Status, Why, Error, Field string }
		_ = jsonDecode(resp, &c)
		if c.Field != "" {
			fmt.Println(resp.Status, "field", c.Field)
			return
		}
		fmt.Printf("%s %s (%s)\n", resp.Status, c.Status, c.Why)
	}
	post(`{"key":"api.binance.com","status":"paused","why":"key revoked"}`)
	post(`{"key":"api.binance.com","status":"paused","why":"key revoked"}`) // idempotent
	post(`{"key":"api.binance.com","status":"active","rate":100}`)

	err := binance.Do(context.Background(), nil, func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} })
	why, _ := budget.ReasonOf(err)
	fmt.Println("a call:", why)

	resp, _ := http.Get(srv.URL + "/connectors")
	var page struct {
		Connectors []struct{ Key, Status string }
	}
	_ = jsonDecode(resp, &page)
	fmt.Println(page.Connectors)
	// Output:
	// 200 OK paused (key revoked)
	// 200 OK paused (key revoked)
	// 400 Bad Request field rate
	// a call: paused
	// [{api.binance.com paused}]
}

// jsonDecode reads resp's JSON body into v and closes it (setup).
func jsonDecode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
