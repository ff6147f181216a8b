package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
	"pgregory.net/rapid"
)

// sourcedConnector is what the listing tests read of a connector.
type sourcedConnector struct {
	Key         string    `json:"key"`
	Source      string    `json:"source"`
	Status      string    `json:"status"`
	Why         string    `json:"why"`
	Rate        float64   `json:"rate"`
	Ceiling     float64   `json:"ceiling"`
	Phase       string    `json:"phase"`
	PausedUntil time.Time `json:"paused_until"`
	PauseReason string    `json:"pause_reason"`
	Requests    uint64    `json:"requests"`
	Refused     float64   `json:"refused"`
	Errors      float64   `json:"errors"`
	Updated     time.Time `json:"updated"`
}

// sourcedPage is the body of GET /connectors, as the listing tests read it.
type sourcedPage struct {
	Connectors   []sourcedConnector `json:"connectors"`
	Next         *string            `json:"next"`
	RecordsError string             `json:"records_error"`
}

// TestAnAdminProcessListsTheConnectorsItNeverCalls: GET /connectors served
// by a process that calls nothing itself lists every connector the
// collectors share through the record store, with the record's figures.
// It listed only the process's own registry, empty there, so an operator
// saw no connector at all: nothing to see, nor to pause.
func TestAnAdminProcessListsTheConnectorsItNeverCalls(t *testing.T) {
	t.Parallel()
	records := checkpoint.NewMemoryStore(checkpoint.Config{})
	now := time.Now()
	until := now.Add(time.Hour).Truncate(time.Microsecond)
	for _, r := range []forage.ProviderRecord{
		{Key: "b.example", Status: budget.StatusPaused, Why: "maintenance", Rate: 12, Ceiling: 14,
			PausedUntil: until, PauseReason: forage.ReasonBanned, Requests: 100, OK: 90, Throttled: 4, Updated: now},
		{Key: "c.example", Rate: 3},
	} {
		if err := records.SaveRecord(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: records})
	if _, err := reg.Get("a.example"); err != nil { // the one provider this process holds
		t.Fatal(err)
	}
	a := connectorAPI(t, reg, admin.Config{})
	var p sourcedPage
	a.want("GET", "/connectors?limit=2", "", http.StatusOK, &p)
	if got := keysOf(p.Connectors); !slices.Equal(got, []string{"a.example", "b.example"}) || p.Next == nil || *p.Next != "b.example" {
		t.Fatalf("first page: keys %q, next %v; want a.example, b.example and next b.example", got, p.Next)
	}
	if c := p.Connectors[0]; c.Source != "process" || c.Phase == "" {
		t.Errorf("a provider held here: %+v; want source process, with its phase", c)
	}
	b := p.Connectors[1]
	want := sourcedConnector{Key: "b.example", Source: "record", Status: "paused", Why: "maintenance", Rate: 12, Ceiling: 14,
		PausedUntil: until, PauseReason: "banned", Requests: 100, Refused: 0.04, Errors: 0.06, Updated: b.Updated}
	if !b.PausedUntil.Equal(until) || !b.Updated.Equal(now) {
		t.Errorf("record-only connector's times: paused until %v, updated %v; want %v, %v", b.PausedUntil, b.Updated, until, now)
	}
	b.PausedUntil = until
	if b != want {
		t.Errorf("record-only connector:\n got %+v\nwant %+v", b, want)
	}
	p = sourcedPage{}
	a.want("GET", "/connectors?limit=2&after=b.example", "", http.StatusOK, &p)
	if got := keysOf(p.Connectors); !slices.Equal(got, []string{"c.example"}) || p.Next != nil {
		t.Fatalf("second page: keys %q, next %v; want c.example alone", got, p.Next)
	}
	if c := p.Connectors[0]; c.Source != "record" || c.Status != "active" || c.Rate != 3 {
		t.Errorf("a record with no status: %+v; want source record, status active, rate 3", c)
	}
}

// TestConnectorsListEachKeyOnceInOrder: whichever providers the process
// holds, whichever records the store keeps, and whatever the page size,
// paging through GET /connectors lists their union in key order, each key
// once: held here as the process's, else as the record's.
func TestConnectorsListEachKeyOnceInOrder(t *testing.T) {
	t.Parallel()
	names := []string{"a", "a b", "a/b", "ab", "Z", "z", "ü", "~", "A.b", "b"}
	rapid.Check(t, func(rt *rapid.T) {
		records := checkpoint.NewMemoryStore(checkpoint.Config{})
		reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: quick(), Records: records})
		if err != nil {
			rt.Fatal(err)
		}
		held := map[string]bool{}
		all := map[string]bool{}
		for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom(names), rapid.ID).Draw(rt, "recorded") {
			if err := records.SaveRecord(context.Background(), forage.ProviderRecord{Key: k, Rate: 1}); err != nil {
				rt.Fatal(err)
			}
			all[k] = true
		}
		for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom(names), rapid.ID).Draw(rt, "held") {
			if _, err := reg.Get(k); err != nil {
				rt.Fatal(err)
			}
			held[k], all[k] = true, true
		}
		s, _ := newSched(rt, schedule.Config{Budget: reg}, nil)
		h, err := admin.New(s, admin.Config{})
		if err != nil {
			rt.Fatal(err)
		}
		a := &api{t: t, h: h, s: s}
		limit := rapid.IntRange(1, 4).Draw(rt, "limit")
		var got []sourcedConnector
		after := ""
		for range 20 {
			code, body := a.do("GET", fmt.Sprintf("/connectors?limit=%d&after=%s", limit, url.QueryEscape(after)), "")
			var p sourcedPage
			if code != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil {
				rt.Fatalf("GET /connectors after %q: %d %s", after, code, body)
			}
			if len(p.Connectors) > limit {
				rt.Fatalf("a page of %d connectors, limit %d", len(p.Connectors), limit)
			}
			got = append(got, p.Connectors...)
			if p.Next == nil {
				break
			}
			after = *p.Next
		}
		want := slices.Sorted(func(yield func(string) bool) {
			for k := range all {
				if !yield(k) {
					return
				}
			}
		})
		if keys := keysOf(got); !slices.Equal(keys, want) {
			rt.Fatalf("listed %q, want %q", keys, want)
		}
		for _, c := range got {
			if wantSource := map[bool]string{true: "process", false: "record"}[held[c.Key]]; c.Source != wantSource {
				rt.Errorf("%q listed from source %q, want %q", c.Key, c.Source, wantSource)
			}
		}
	})
}

// unlistable is a record store whose listing fails with an error that
// names a secret.
type unlistable struct{ *checkpoint.LocalStore }

func (unlistable) ListRecords(context.Context, string, int) ([]forage.ProviderRecord, error) {
	return nil, errors.New("dial postgres://collector:s3cret@db.internal/forage?sslmode=require: connection refused")
}

// TestConnectorsSayWhenTheRecordsCannotBeListed: a record store that fails
// to list leaves the page with this process's providers and a
// records_error saying so, with no credential in it; it is not an empty
// list that looks complete.
func TestConnectorsSayWhenTheRecordsCannotBeListed(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: unlistable{checkpoint.NewMemoryStore(checkpoint.Config{})}})
	if _, err := reg.Get("a.example"); err != nil {
		t.Fatal(err)
	}
	a := connectorAPI(t, reg, admin.Config{})
	var p sourcedPage
	body := a.want("GET", "/connectors", "", http.StatusOK, &p)
	if got := keysOf(p.Connectors); !slices.Equal(got, []string{"a.example"}) {
		t.Errorf("keys %q, want this process's a.example", got)
	}
	if !strings.Contains(p.RecordsError, "could not be listed") || !strings.Contains(p.RecordsError, "connection refused") {
		t.Errorf("records_error = %q, want it to say the records could not be listed, and why", p.RecordsError)
	}
	if strings.Contains(body, "s3cret") {
		t.Errorf("the page serves the store's credential: %s", body)
	}
}

// keysOf returns the keys of cs, in order.
func keysOf(cs []sourcedConnector) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Key
	}
	return out
}

// TestTheStatusPageShowsTheConnectorsItRunsNoJobFor: the status page of an
// admin process lists, under "Other connectors", those it has no card for
// and holds no provider of: known by the shared records alone, with the operator's status and why
// (escaped), and the rate and ceiling they were saved with. Its page showed
// only the scheduler's providers: an admin process with no jobs showed no
// connector at all.
func TestTheStatusPageShowsTheConnectorsItRunsNoJobFor(t *testing.T) {
	t.Parallel()
	records := checkpoint.NewMemoryStore(checkpoint.Config{})
	if err := records.SaveRecord(t.Context(), forage.ProviderRecord{Key: "api.<b>x</b>.example", Status: budget.StatusPaused,
		Why: "key rotation", Rate: 12.5, Ceiling: 14, Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: records})
	a := connectorAPI(t, reg, admin.Config{})
	if _, err := a.s.Upsert(t.Context(), schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "s"}); err != nil {
		t.Fatal(err)
	}
	page := a.want("GET", "/", "", http.StatusOK, nil)
	i := strings.Index(page, "<h2>Other connectors</h2>")
	if i < 0 {
		t.Fatalf("the page has no other connectors:\n%s", page)
	}
	rest, _, _ := strings.Cut(page[i:], "<h2>Jobs")
	for _, want := range []string{"api.&lt;b&gt;x&lt;/b&gt;.example", ">paused</span> key rotation", "12.50 req/s", "14.00 req/s"} {
		if !strings.Contains(rest, want) {
			t.Errorf("other connectors lack %q:\n%s", want, rest)
		}
	}
	if strings.Contains(rest, "<b>x</b>") {
		t.Errorf("a key is served unescaped:\n%s", rest)
	}
	if strings.Contains(rest, "<td>binance</td>") {
		t.Errorf("binance has its card, and is listed again:\n%s", rest)
	}
}

// listsBefore is a record store whose listing ignores after: it breaks the
// RecordLister contract.
type listsBefore struct{ *checkpoint.LocalStore }

func (l listsBefore) ListRecords(ctx context.Context, _ string, limit int) ([]forage.ProviderRecord, error) {
	return l.LocalStore.ListRecords(ctx, "", limit)
}

// TestConnectorsShowWhatAProcessObeysAndPageToAnEnd: a record whose status
// is neither "active" nor "paused" ("Paused", "deleted": a hand edit) is
// shown active, as every process runs it, and says so; it was shown as
// written, and obeyed by none. A store that lists keys before ?after= ends
// the paging rather than answer "next" equal to "after" for ever.
func TestConnectorsShowWhatAProcessObeysAndPageToAnEnd(t *testing.T) {
	t.Parallel()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	for key, status := range map[string]string{"a.example": "Paused", "b.example": "deleted", "c.example": "paused"} {
		if err := store.SaveRecord(t.Context(), forage.ProviderRecord{Key: key, Status: status}); err != nil {
			t.Fatal(err)
		}
	}
	a := connectorAPI(t, newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: listsBefore{store}}), admin.Config{})
	var p sourcedPage
	a.want("GET", "/connectors", "", http.StatusOK, &p)
	for _, c := range p.Connectors {
		want := map[string]string{"a.example": "active", "b.example": "active", "c.example": "paused"}[c.Key]
		if c.Status != want || want == "active" && !strings.Contains(c.Why, "not one a process obeys") {
			t.Errorf("%s: status %q, why %q; want %s, and why saying so", c.Key, c.Status, c.Why, want)
		}
	}
	p = sourcedPage{}
	a.want("GET", "/connectors?after=c.example&limit=2", "", http.StatusOK, &p)
	if p.Next != nil {
		t.Errorf("after the last key, a store that lists from the start: next %q; want none", *p.Next)
	}
}
