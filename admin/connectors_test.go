package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
)

// quick is a provider config that paces at 50 requests/s and never opens
// its breaker, so the tests see what an operator sets and nothing else.
func quick() budget.Config {
	return budget.Config{
		Adaptive:       aimd.Config{Initial: 50, Max: 50},
		Breaker:        breaker.Config{MinRequests: 1 << 20},
		AttemptTimeout: budget.NoTimeout,
	}
}

// newRegistry returns a registry for cfg.
func newRegistry(t *testing.T, cfg budget.RegistryConfig) *budget.Registry {
	t.Helper()
	reg, err := budget.NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// connectorAPI returns an API over a scheduler whose budget is reg, with
// cfg.
func connectorAPI(t *testing.T, reg *budget.Registry, cfg admin.Config) *api {
	t.Helper()
	s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
	h, err := admin.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &api{t: t, h: h, s: s}
}

// answer returns an attempt that answers code.
func answer(code int) func(context.Context) forage.Outcome {
	return func(context.Context) forage.Outcome { return forage.Outcome{Status: code} }
}

// wireConnector is a connector as GET /connectors lists it.
type wireConnector struct {
	Key         string    `json:"key"`
	Status      string    `json:"status"`
	Why         string    `json:"why"`
	Rate        float64   `json:"rate"`
	Ceiling     float64   `json:"ceiling"`
	RateNote    string    `json:"rate_note"`
	Breaker     string    `json:"breaker"`
	PausedUntil time.Time `json:"paused_until"`
	PauseReason string    `json:"pause_reason"`
	Limits      []struct {
		Name      string    `json:"name"`
		Count     int       `json:"count"`
		PerMS     int64     `json:"per_ms"`
		Used      int       `json:"used"`
		Remaining int       `json:"remaining"`
		Reset     time.Time `json:"reset"`
	} `json:"limits"`
	Requests   uint64   `json:"requests"`
	WindowS    float64  `json:"window_s"`
	SentPerS   *float64 `json:"sent_per_s"`
	Saturation *float64 `json:"saturation"`
	Refused    float64  `json:"refused"`
	Errors     float64  `json:"errors"`
}

// connectorPage is the body of GET /connectors.
type connectorPage struct {
	Connectors []wireConnector `json:"connectors"`
	Next       *string         `json:"next"`
}

// TestConnectorsListAndSteer: GET /connectors lists each provider of the
// registry with its status, rates, known limits (usage and reset), the
// pause in force and its refused and error shares; POST /connectors sets
// the operator's status idempotently and every call of the provider obeys
// it at once; /pause and /resume do the same by path.
func TestConnectorsListAndSteer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		limited := quick()
		limited.Limits = []budget.Limit{{Name: "100/m", Count: 100, Per: time.Minute}}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Overrides: map[string]budget.Config{"limited": limited}})
		a := connectorAPI(t, reg, admin.Config{SampleEvery: time.Second})
		ctx := context.Background()
		busy := func(code int, retryAfter time.Duration) {
			_ = provider(reg, "busy").Do(ctx, nil, func(context.Context) forage.Outcome {
				return forage.Outcome{Status: code, RetryAfter: retryAfter}
			}, budget.CallOption{NoRetry: true})
		}
		for _, code := range []int{200, 200, 200, 500} { // before the first sample: not in the window
			busy(code, 0)
		}
		a.want("GET", "/connectors", "", http.StatusOK, nil) // the first sample
		time.Sleep(10 * time.Second)
		for range 9 {
			busy(200, 0)
		}
		busy(429, time.Minute)
		_ = provider(reg, "limited").Do(ctx, nil, answer(200))
		var page connectorPage
		a.want("GET", "/connectors", "", http.StatusOK, &page)
		if len(page.Connectors) != 2 || page.Next != nil {
			t.Fatalf("GET /connectors: %+v; want busy and limited, no next", page)
		}
		b, lim := page.Connectors[0], page.Connectors[1]
		if b.Key != "busy" || b.Status != "active" || b.Requests != 14 || b.WindowS < 10 || b.WindowS > 11 ||
			b.SentPerS == nil || *b.SentPerS != 10/b.WindowS || b.Saturation == nil || *b.Saturation <= 0 || b.Refused != 0.1 || b.Errors != 0 {
			t.Errorf("busy: %+v; want active, 14 requests, 10 in the window of 10 s, one refused, no error", b)
		}
		if !b.PausedUntil.After(time.Now()) || b.PauseReason != string(forage.ReasonThrottled) {
			t.Errorf("busy: paused until %v (%q); want the 429's pause in force, throttled", b.PausedUntil, b.PauseReason)
		}
		if l := lim.Limits; lim.Key != "limited" || len(l) != 1 || l[0].Name != "100/m" || l[0].Count != 100 ||
			l[0].PerMS != 60_000 || l[0].Used != 1 || l[0].Remaining != 99 || !l[0].Reset.After(time.Now()) {
			t.Errorf("limited: %+v; want its limit with one used and a reset to come", lim)
		}

		body := `{"key":"busy","status":"paused","why":"key revoked"}`
		var c wireConnector
		for range 2 { // idempotent
			a.want("POST", "/connectors", body, http.StatusOK, &c)
			if c.Key != "busy" || c.Status != "paused" || c.Why != "key revoked" {
				t.Fatalf("POST /connectors %s: %+v", body, c)
			}
		}
		n := 0
		err := provider(reg, "busy").Do(ctx, nil, func(context.Context) forage.Outcome { n++; return forage.Outcome{Status: 200} })
		if why, _ := budget.ReasonOf(err); why != forage.ReasonPaused || n != 0 {
			t.Fatalf("a call after the pause: %v with %d attempts; want paused, none sent", err, n)
		}
		a.want("POST", "/connectors/busy/resume", "", http.StatusOK, &c)
		if c.Status != "active" {
			t.Fatalf("resume: %+v", c)
		}
		if why, _ := budget.ReasonOf(provider(reg, "busy").Do(ctx, nil, answer(200))); why == forage.ReasonPaused {
			t.Fatalf("a call after the resume: %v", why)
		}
		a.want("POST", "/connectors/limited/pause", `{"why":"maintenance"}`, http.StatusOK, &c)
		if c.Status != "paused" || c.Why != "maintenance" {
			t.Fatalf("pause by path: %+v", c)
		}
		var first, second connectorPage
		a.want("GET", "/connectors?limit=1", "", http.StatusOK, &first)
		if len(first.Connectors) != 1 || first.Next == nil || *first.Next != "busy" {
			t.Fatalf("a page of 1: %+v; want busy and next", first)
		}
		a.want("GET", "/connectors?after=busy", "", http.StatusOK, &second)
		if len(second.Connectors) != 1 || second.Connectors[0].Status != "paused" || second.Next != nil {
			t.Fatalf("the page after busy: %+v; want limited, paused", second)
		}
	})
}

// TestConnectorsRefuseBadInput: a body that is not a connector's, a status
// that is not one, a bad key or reason, or a field the provider learns
// answers 400 naming the field; a key no call or job named, or a scheduler
// without a registry, 404. Nothing is paused.
func TestConnectorsRefuseBadInput(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
	provider(reg, "p")
	a := connectorAPI(t, reg, admin.Config{})
	for _, tc := range []struct{ path, body, field string }{
		{"/connectors", `{"key":"p","status":"paused","color":"red"}`, "color"},
		{"/connectors", `{"key":"p","status":"stopped"}`, "status"},
		{"/connectors", `{"key":"p"}`, "status"},
		{"/connectors", `{"key":"","status":"paused"}`, "key"},
		{"/connectors", `{"key":"p\u0000","status":"paused"}`, "key"},
		{"/connectors", `{"key":"p","status":"paused","why":"two\nlines"}`, "why"},
		{"/connectors", `{"key":"p","status":"paused","why":"` + strings.Repeat("w", 2000) + `"}`, "why"},
		{"/connectors", `{"key":"p","status":7}`, "status"},
		{"/connectors", `[1,2]`, "body"},
		{"/connectors", `"paused"`, "body"},
		{"/connectors/p/pause", `[1,2]`, "body"},
		{"/connectors", `{"key":"p","status":"paused"} trailing`, ""},
		{"/connectors/p/pause", `{"status":"active"}`, "status"},
		{"/connectors/p/pause", `{"key":"q"}`, "key"},
		{"/connectors/p%00/pause", ``, "key"},
	} {
		if tc.field == "" {
			continue // the decoder reads one value; what follows is not read
		}
		a.wantBad("POST", tc.path, tc.body, tc.field)
	}
	for _, f := range []string{"rate", "ceiling", "paused_until", "requests"} {
		var e struct{ Error, Field string }
		a.want("POST", "/connectors", fmt.Sprintf(`{"key":"p","status":"active","%s":1}`, f), http.StatusBadRequest, &e)
		if e.Field != f || !strings.Contains(e.Error, "learned by the provider") {
			t.Errorf("setting %s: %+v; want it refused as learned", f, e)
		}
	}
	a.want("POST", "/connectors", `{"key":"nobody","status":"paused"}`, http.StatusNotFound, nil)
	a.want("POST", "/connectors/nobody/pause", ``, http.StatusNotFound, nil)
	if _, ok := reg.Lookup("nobody"); ok {
		t.Error("a refused pause made a provider")
	}
	if s := provider(reg, "p").Snapshot(); s.Status != "active" {
		t.Errorf("after refused requests: %q; want active", s.Status)
	}
	plain := newAPI(t, schedule.Config{}, nil)
	plain.want("POST", "/connectors", `{"key":"p","status":"paused"}`, http.StatusNotFound, nil)
	var page connectorPage
	plain.want("GET", "/connectors", "", http.StatusOK, &page)
	if len(page.Connectors) != 0 {
		t.Errorf("no registry: %+v; want no connectors", page)
	}
	a.wantBad("GET", "/connectors?limit=x", "", "limit")
}

// TestConnectorsGuarded: the connector endpoints meet the handler's rules:
// a state change without the JSON type answers 415, a cross-origin one
// 403, one the Authorize hook refuses 403; none of them pauses anything.
// An operator's reason is stored and served without credentials.
func TestConnectorsGuarded(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
	provider(reg, "p")
	s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
	h, err := admin.New(s, admin.Config{Authorize: func(r *http.Request) error {
		if r.Method != "GET" && r.Header.Get("Authorization") != "Bearer admin" {
			return errors.New("admin: viewers may only read")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"key":"p","status":"paused"}`
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
		for _, path := range []string{"/connectors", "/connectors/p/pause"} {
			req := forged("POST", path, ct, body)
			req.Header.Set("Authorization", "Bearer admin")
			if rec := send(h, req); rec.Code != http.StatusUnsupportedMediaType {
				t.Errorf("POST %s as %q: %d, want 415", path, ct, rec.Code)
			}
		}
	}
	req := forged("POST", "/connectors", "application/json", body)
	req.Header.Set("Authorization", "Bearer admin")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if rec := send(h, req); rec.Code != http.StatusForbidden {
		t.Errorf("a cross-site POST: %d, want 403", rec.Code)
	}
	if rec := send(h, forged("POST", "/connectors", "application/json", body)); rec.Code != http.StatusForbidden {
		t.Errorf("a viewer's POST: %d, want 403", rec.Code)
	}
	if st := provider(reg, "p").Snapshot().Status; st != "active" {
		t.Fatalf("after refused requests: %q; want active", st)
	}
	why, _ := json.Marshal("revoked: " + signedURL + " token: abc-s3cr3t")
	req = forged("POST", "/connectors", "application/json", `{"key":"p","status":"paused","why":`+string(why)+`}`)
	req.Header.Set("Authorization", "Bearer admin")
	if rec := send(h, req); rec.Code != http.StatusOK || leaked(rec.Body.String()) {
		t.Fatalf("a pause naming credentials: %d %s; want 200, none served", rec.Code, rec.Body)
	}
	if s := provider(reg, "p").Snapshot(); s.Status != "paused" || leaked(s.Why) {
		t.Errorf("stored: %q %q; want paused, no credential", s.Status, s.Why)
	}
	if err := reg.SetStatus(context.Background(), "p", "paused", "by the host: "+signedURL); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/connectors", "/", "/stats", "/providers"} {
		if rec := send(h, localRequest("GET", path, nil)); rec.Code != 200 || leaked(rec.Body.String()) {
			t.Errorf("GET %s: %d, a credential served", path, rec.Code)
		}
	}
}

// TestConnectorPauseHoldsInEveryProcess: two registries share one record
// store, as two processes share a provider. A pause set through the admin
// API of the first stops the attempts of the second within one read of the
// record (5 s), whichever way it calls; a resume puts it back likewise.
func TestConnectorPauseHoldsInEveryProcess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const key, gap = "api.example.com", 100 * time.Millisecond
		records := checkpoint.NewMemoryStore(checkpoint.Config{})
		here := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: records})
		there := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: records})
		provider(here, key) // this process has used it: a connector here
		a := connectorAPI(t, here, admin.Config{})

		var mu sync.Mutex
		var last time.Time // the other process's last attempt
		var attempts atomic.Int64
		var reason atomic.Value
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { // the other process calls every 100 ms
			defer close(done)
			p := provider(there, key)
			for ctx.Err() == nil {
				err := p.Do(ctx, nil, func(context.Context) forage.Outcome {
					attempts.Add(1)
					mu.Lock()
					last = time.Now()
					mu.Unlock()
					return forage.Outcome{Status: 200}
				})
				if why, ok := budget.ReasonOf(err); ok {
					reason.Store(why)
				}
				time.Sleep(gap)
			}
		}()
		defer func() { stop(); <-done }()
		time.Sleep(3 * time.Second)
		if attempts.Load() < 20 {
			t.Fatalf("%d attempts in 3 s; want the other process calling", attempts.Load())
		}
		a.want("POST", "/connectors", `{"key":"api.example.com","status":"paused","why":"key revoked"}`, http.StatusOK, nil)
		paused := time.Now()
		time.Sleep(6 * time.Second)
		synctest.Wait()
		mu.Lock()
		lag := last.Sub(paused)
		mu.Unlock()
		if lag > 5*time.Second+gap {
			t.Fatalf("the other process attempted %v after the pause; want none past one read (5 s)", lag)
		}
		if why, _ := reason.Load().(forage.Reason); why != forage.ReasonPaused {
			t.Fatalf("the other process's calls stop with %q; want %q", why, forage.ReasonPaused)
		}
		n := attempts.Load()
		time.Sleep(20 * time.Second)
		if m := attempts.Load(); m != n {
			t.Fatalf("%d attempts while paused; want none", m-n)
		}

		a.want("POST", "/connectors/api.example.com/resume", "", http.StatusOK, nil)
		time.Sleep(6 * time.Second)
		if m := attempts.Load(); m < n+5 {
			t.Fatalf("%d attempts in the 6 s after the resume; want the other process calling again", m-n)
		}
	})
}

// TestConnectorsShowShares: a provider shared among processes
// (budget.Config.Shares) lists this process's share and every process's
// lease; one that is not shared holds all of it.
func TestConnectorsShowShares(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		shared := quick()
		shared.Shares = budgettest.NewShareStore()
		other := newRegistry(t, budget.RegistryConfig{Defaults: shared})
		reg := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Overrides: map[string]budget.Config{"shared": shared}})
		a := connectorAPI(t, reg, admin.Config{})
		ctx := context.Background()
		for range 3 * time.Second / (100 * time.Millisecond) { // two processes calling the shared provider
			_ = provider(other, "shared").Do(ctx, nil, answer(200))
			_ = provider(reg, "shared").Do(ctx, nil, answer(200))
			time.Sleep(100 * time.Millisecond)
		}
		_ = provider(reg, "alone").Do(ctx, nil, answer(200))
		var page struct {
			Connectors []struct {
				Key    string  `json:"key"`
				Share  float64 `json:"share"`
				Shares []struct {
					Holder string  `json:"holder"`
					Share  float64 `json:"share"`
				} `json:"shares"`
			} `json:"connectors"`
		}
		a.want("GET", "/connectors", "", http.StatusOK, &page)
		if len(page.Connectors) != 2 {
			t.Fatalf("GET /connectors: %+v; want alone and shared", page)
		}
		alone, sh := page.Connectors[0], page.Connectors[1]
		if alone.Key != "alone" || alone.Share != 1 || alone.Shares != nil {
			t.Errorf("alone: %+v; want share 1 and no leases", alone)
		}
		if sh.Key != "shared" || len(sh.Shares) != 2 || sh.Share <= 0 || sh.Share >= 1 {
			t.Fatalf("shared: %+v; want two leases and a part of the rate", sh)
		}
		// Each process uses 10 of the 50 requests/s: each holds what it
		// uses with headroom, not half of the whole.
		sum := sh.Shares[0].Share + sh.Shares[1].Share
		if sum > 1+1e-9 || sh.Shares[0].Share <= 0 || sh.Shares[1].Share <= 0 || sh.Shares[0].Holder == sh.Shares[1].Holder {
			t.Errorf("shared: leases %+v; want two holders, each with a share, adding up to at most the whole", sh.Shares)
		}
	})
}

// TestAmbiguousBodiesAreRefused: encoding/json matches names without
// regard to case and keeps the last of duplicates, so a body that an
// audit log, a proxy or an Authorize hook reading it as a map took for a
// pause of a.example paused b.example, or resumed where it read a pause
// (found by a review). A field given twice, or spelled otherwise than its
// name, is a 400 naming it.
func TestAmbiguousBodiesAreRefused(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
	provider(reg, "a.example")
	provider(reg, "b.example")
	a := connectorAPI(t, reg, admin.Config{})
	for _, body := range []string{
		`{"key":"a.example","KEY":"b.example","status":"paused"}`,
		`{"key":"a.example","key":"b.example","status":"paused"}`,
		`{"key":"a.example","status":"paused","Status":"active"}`,
	} {
		if code, resp := a.do("POST", "/connectors", body); code != http.StatusBadRequest {
			t.Errorf("POST /connectors %s: %d %s; want 400 naming the repeated field", body, code, resp)
		}
	}
}

// TestAFieldSpelledWithAUnicodeCaseIsRefused: encoding/json matches a
// field name to a struct's under Unicode's case folding, where "ſ"
// (U+017F, a long s) is an s, and the check of names given twice folded
// with strings.ToLower, which leaves it be: {"status":"active",
// "ſtatus":"paused"}, read as a resume by an audit log or an Authorize
// hook, paused the connector, and "ſtatuſ" alone set the status too
// (found by a review). Each is a 400 naming the field, and nothing
// changes; so in a job's body.
func TestAFieldSpelledWithAUnicodeCaseIsRefused(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
	p := provider(reg, "a.example")
	a := connectorAPI(t, reg, admin.Config{})
	for _, c := range []struct{ body, field string }{
		{"{\"key\":\"a.example\",\"status\":\"active\",\"\u017ftatus\":\"paused\"}", "\u017ftatus"},
		{"{\"key\":\"a.example\",\"\u017ftatu\u017f\":\"paused\"}", "\u017ftatu\u017f"},
		{"{\"\u212aey\":\"a.example\",\"status\":\"paused\"}", "\u212aey"}, // a Kelvin sign
	} {
		a.wantBad("POST", "/connectors", c.body, c.field)
		if s := p.Snapshot(); s.Status != budget.StatusActive {
			t.Fatalf("after POST /connectors %s: status %q; want active, nothing changed", c.body, s.Status)
		}
	}
	j := newAPI(t, schedule.Config{}, nil)
	j.wantBad("POST", "/jobs", "{\"provider\":\"p\",\"kind\":\"backfill\",\"stream\":\"s\",\"\u017ftream\":\"t\"}", "\u017ftream")
}

// TestAnAdminProcessSteersAConnectorItNeverCalls: the admin API served by
// a process that calls nothing itself (its registry empty, or the
// provider dropped as idle after IdleTTL) knows a connector by the record
// the processes that call it share. Its pause answered 404 "unknown"
// after ten idle minutes, and an operator could no longer stop them.
func TestAnAdminProcessSteersAConnectorItNeverCalls(t *testing.T) {
	t.Parallel()
	records := checkpoint.NewMemoryStore(checkpoint.Config{})
	if err := records.SaveRecord(t.Context(), forage.ProviderRecord{Key: "api.example.com", Rate: 12}); err != nil { // a collector's
		t.Fatal(err)
	}
	a := connectorAPI(t, newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: records}), admin.Config{})
	a.want("POST", "/connectors/api.example.com/pause", `{"why":"maintenance"}`, http.StatusOK, nil)
	if rec, ok, err := records.LoadRecord(t.Context(), "api.example.com"); err != nil || !ok || rec.Status != budget.StatusPaused {
		t.Fatalf("the shared record after the pause: %+v, %v, %v; want status paused", rec, ok, err)
	}
	a.want("POST", "/connectors/nobody.example.com/pause", "", http.StatusNotFound, nil)
}
