package admin_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// polyline returns the points of the polyline of class in the first chart
// of page after the card title marker, as [x, y] pairs.
func polyline(t *testing.T, page, marker, class string) [][2]float64 {
	t.Helper()
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatalf("the page has no %q", marker)
	}
	m := regexp.MustCompile(`class="` + class + `"[^>]*points="([^"]*)"`).FindStringSubmatch(page[i:])
	if m == nil {
		t.Fatalf("the chart after %q has no %s polyline", marker, class)
	}
	var out [][2]float64
	for _, p := range strings.Fields(m[1]) {
		xs, ys, ok := strings.Cut(p, ",")
		x, err1 := strconv.ParseFloat(xs, 64)
		y, err2 := strconv.ParseFloat(ys, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("%s point %q is not x,y", class, p)
		}
		out = append(out, [2]float64{x, y})
	}
	return out
}

// TestStatusPageCharts: with Run sampling every second, the status page
// draws per provider the rate, the ceiling, the attempts sent and the
// refusals over the last 120 samples as inline SVG polylines (the
// refusals rise where 429s came), shows the jobs by state as a bar, and
// escapes provider keys; Run returns when its context ends.
func TestStatusPageCharts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
		a := connectorAPI(t, reg, admin.Config{SampleEvery: time.Second})
		h := a.h.(*admin.Handler)
		if _, err := a.s.Upsert(context.Background(), schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "s"}); err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- h.Run(ctx) }()
		defer stop()
		start := time.Now()
		evil := "<b>evil</b>"
		for i := range 600 { // a minute of traffic, ten calls a second, a 429 every 5 s
			code := 200
			if i%50 == 49 {
				code = 429
			}
			_ = provider(reg, "binance").Do(ctx, nil, answer(code), budget.CallOption{NoRetry: true})
			_ = provider(reg, evil).Do(ctx, nil, answer(200))
			time.Sleep(100 * time.Millisecond)
		}
		page := get(t, a, "/")
		secs := int(time.Since(start) / time.Second) // a minute and the pauses the 429s asked for
		rate := polyline(t, page, `<h3>binance`, "rate")
		if len(rate) < secs-1 || len(rate) > secs+1 || secs >= 120 {
			t.Fatalf("after %d s: %d rate points; want one a second", secs, len(rate))
		}
		for _, class := range []string{"ceiling", "sent"} {
			if n := len(polyline(t, page, `<h3>binance`, class)); n < secs-2 {
				t.Errorf("%s: %d points; want one a second", class, n)
			}
		}
		rose := 0
		for _, p := range polyline(t, page, `<h3>binance`, "refusals") {
			if p[1] < 90 {
				rose++
			}
		}
		if rose < 5 {
			t.Errorf("the refusals line rose %d times with twelve 429s; want at least 5", rose)
		}
		for _, want := range []string{`<svg class="chart"`, `<h3>&lt;b&gt;evil&lt;/b&gt;`, `<title>idle: 1</title>`, `<rect`, "refused / errors"} {
			if !strings.Contains(page, want) {
				t.Errorf("the page lacks %q", want)
			}
		}
		if strings.Contains(page, evil) {
			t.Error("a provider key is not escaped")
		}
		time.Sleep(3 * time.Minute)
		if n := len(polyline(t, get(t, a, "/"), `<h3>binance`, "rate")); n != 120 {
			t.Errorf("after %v: %d rate points; want the last 120", time.Since(start), n)
		}
		stop()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v; want context.Canceled", err)
		}
	})
}

// get serves GET path and returns the body, failing on a status not 200.
func get(t *testing.T, a *api, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, localRequest("GET", path, nil))
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestTheStatusPageSaysWhereAProviderIsPaused: a provider an operator
// paused as a connector (in every process) is not labelled "paused in
// this scheduler", which a POST /providers/{name}/resume would undo; it
// was, as the scheduler's snapshot reads Paused for either pause, and the
// operator's resume there changed nothing. A pause in this scheduler
// still says so.
func TestTheStatusPageSaysWhereAProviderIsPaused(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
	a := connectorAPI(t, reg, admin.Config{})
	for _, key := range []string{"connector.example", "scheduler.example"} {
		if err := provider(reg, key).Do(context.Background(), nil, answer(200)); err != nil {
			t.Fatal(err)
		}
	}
	a.want("POST", "/connectors/connector.example/pause", `{"why":"maintenance"}`, 200, nil)
	a.want("POST", "/providers/scheduler.example/pause", "", 200, nil)
	page := get(t, a, "/")
	card := func(key string) string {
		i := strings.Index(page, "<h3>"+key)
		if i < 0 {
			t.Fatalf("no card for %s:\n%s", key, page)
		}
		return page[i : i+strings.Index(page[i:], "</section>")]
	}
	if c := card("connector.example"); strings.Contains(c, "paused in this scheduler") || !strings.Contains(c, `<span class="badge paused">paused</span>`) {
		t.Errorf("a connector paused by an operator, in every process:\n%s", c)
	}
	if c := card("scheduler.example"); !strings.Contains(c, "paused in this scheduler") {
		t.Errorf("a provider paused in this scheduler:\n%s", c)
	}
}

// TestAResumeSaysTheConnectorIsStillPaused: POST /providers/{name}/resume
// resumes the scheduler's pause only; a connector an operator paused in
// every process stays paused, and the answer says so (it answered
// "paused": false alone, and the provider stayed paused).
func TestAResumeSaysTheConnectorIsStillPaused(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
	a := connectorAPI(t, reg, admin.Config{})
	if err := provider(reg, "connector.example").Do(context.Background(), nil, answer(200)); err != nil {
		t.Fatal(err)
	}
	a.want("POST", "/connectors/connector.example/pause", `{"why":"maintenance"}`, 200, nil)
	var got map[string]any
	a.want("POST", "/providers/connector.example/resume", "", 200, &got)
	if got["paused"] != false || got["connector_status"] != budget.StatusPaused {
		t.Errorf("resume of a provider whose connector is paused answered %v; want paused false and connector_status %q", got, budget.StatusPaused)
	}
	a.want("POST", "/connectors/connector.example/resume", "", 200, nil)
	got = nil
	a.want("POST", "/providers/connector.example/resume", "", 200, &got)
	if _, ok := got["connector_status"]; ok {
		t.Errorf("resume of a provider whose connector is active answered %v; want no connector_status", got)
	}
}
