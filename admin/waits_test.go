package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// listed is a job of GET /jobs as the tests read it.
type listed struct {
	ID      int64     `json:"id"`
	Stream  string    `json:"stream"`
	State   string    `json:"state"`
	NextRun time.Time `json:"next_run"`
	Waiting string    `json:"waiting"`
}

// listJobs answers GET path, failing t on anything but 200.
func listJobs(t *testing.T, h http.Handler, path string) []listed {
	t.Helper()
	rec := send(h, localRequest("GET", path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	var out struct{ Jobs []listed }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, rec.Body)
	}
	return out.Jobs
}

// TestAHeldBackfillSaysWhyItWaits: a backfill the head-first rule held
// back (its provider's head work never idled) was listed "idle" with a
// next run 90 s in the past and nothing else, as if it had a wake-up that
// never came (a user journey: 40 backfills so, for the whole run). A due
// job that has not started now says what holds it, in GET /jobs and on
// the status page, where its next run reads "due since".
func TestAHeldBackfillSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSched(t, schedule.Config{}, nil)
		h := handler(t, s)
		now := time.Now()
		back := upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "a"})
		upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "b", Interval: time.Second})
		upsert(t, s, now.Add(time.Hour), schedule.Spec{Provider: "q", Kind: schedule.KindBackfill, Stream: "later"})
		time.Sleep(90 * time.Second)

		jobs := listJobs(t, h, "/jobs")
		for _, j := range jobs {
			switch j.Stream {
			case "a":
				if !strings.Contains(j.Waiting, "held behind the head") || !strings.Contains(j.Waiting, "1 head job") {
					t.Errorf("the held backfill: waiting %q; want it held behind the head (1 head job)", j.Waiting)
				}
			case "b":
				if !strings.HasPrefix(j.Waiting, "due: ") {
					t.Errorf("the due head job: waiting %q; want due at the next claim", j.Waiting)
				}
			case "later":
				if j.Waiting != "" || !j.NextRun.After(time.Now()) {
					t.Errorf("a job not yet due: waiting %q, next run %v; want no wait and a future next run", j.Waiting, j.NextRun)
				}
			}
		}
		page := send(h, localRequest("GET", "/", nil)).Body.String()
		if !strings.Contains(page, "due since "+back.NextRun.UTC().Format("2006-01-02 15:04:05Z")+": held behind the head") {
			t.Errorf("the status page does not say the backfill is held behind the head:\n%s", page)
		}
	})
}

// TestWaitsFollowTheClaimRules: what a due job is said to wait for, case
// by case, in the order the store's Claim applies its rules.
func TestWaitsFollowTheClaimRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *schedule.Scheduler, now time.Time)
		want  string // a part of job "x"'s waiting; "" for none
	}{
		{"alone", func(t *testing.T, s *schedule.Scheduler, now time.Time) {
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "x"})
		}, "due: starts at the scheduler's next claim"},
		{"provider paused", func(t *testing.T, s *schedule.Scheduler, now time.Time) {
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "x"})
			s.SetProviderPaused("p", true)
		}, "its provider is paused in this scheduler"},
		{"a head job running", func(t *testing.T, s *schedule.Scheduler, now time.Time) {
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "h", Interval: time.Minute})
			claim(t, s, now)
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "x"})
		}, "held behind the head: fresh data first, and 1 head job of its provider is due or running"},
		{"its stream running", func(t *testing.T, s *schedule.Scheduler, now time.Time) {
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "x", Interval: time.Minute})
			claim(t, s, now)
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "x"})
		}, "another job of its stream is running"},
		{"other backfills running", func(t *testing.T, s *schedule.Scheduler, now time.Time) {
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "r1"})
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "r2"})
			claim(t, s, now)
			upsert(t, s, now, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "x"})
		}, "waiting for room on its provider: 2 of its jobs are running"},
		{"not due", func(t *testing.T, s *schedule.Scheduler, now time.Time) {
			upsert(t, s, now.Add(time.Minute), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: "x"})
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s, _ := newSched(t, schedule.Config{}, nil)
				h := handler(t, s)
				tc.setup(t, s, time.Now())
				time.Sleep(time.Second)
				var got *listed
				for _, j := range listJobs(t, h, "/jobs?kind=backfill&stream=x") {
					got = &j
				}
				switch {
				case got == nil:
					t.Fatalf("job x is not listed")
				case tc.want == "" && got.Waiting != "":
					t.Errorf("waiting %q; want none", got.Waiting)
				case !strings.Contains(got.Waiting, tc.want):
					t.Errorf("waiting %q; want it to say %q", got.Waiting, tc.want)
				}
			})
		})
	}
}

// TestAPauseThatEndedIsNotShown: GET /stats and GET /providers served
// each provider's budget snapshot as it was, whose paused_until is the
// end of the latest pause "in the past or zero when not paused": a pause
// over a minute ago read as one still in force, and a provider never
// paused showed 0001-01-01. Only a pause in force is shown, as GET
// /connectors and the status page do.
func TestAPauseThatEndedIsNotShown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
		a := connectorAPI(t, reg, admin.Config{})
		_ = provider(reg, "p").Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: http.StatusTooManyRequests, RetryAfter: 5 * time.Second}
		}, budget.CallOption{NoRetry: true})
		_ = provider(reg, "never").Do(context.Background(), nil, answer(200))
		pausedUntil := func(path string) map[string]string {
			var body struct {
				Providers []struct {
					Provider string
					Budget   map[string]any
				}
			}
			a.want("GET", path, "", http.StatusOK, &body)
			out := map[string]string{}
			for _, p := range body.Providers {
				if v, ok := p.Budget["paused_until"]; ok {
					out[p.Provider] = fmt.Sprint(v, " ", p.Budget["pause_reason"])
				}
			}
			return out
		}
		if got := pausedUntil("/stats"); got["p"] == "" || got["never"] != "" {
			t.Errorf("GET /stats in the pause: paused_until %v; want p's alone", got)
		}
		time.Sleep(time.Minute)
		for _, path := range []string{"/stats", "/providers"} {
			if got := pausedUntil(path); len(got) != 0 {
				t.Errorf("GET %s a minute after the pause ended: paused_until %v; want none", path, got)
			}
		}
	})
}

// TestARateAboveTheCeilingIsExplained: at the end of a quota window the
// connector showed rate 188 beside ceiling 1.9 (a user journey), which
// read as a contradiction: the rate was what the provider's headers said
// was left spread over the second to its reset, the ceiling where an
// earlier refusal came. The connector and its card now say so.
func TestARateAboveTheCeilingIsExplained(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := quick()
		cfg.Adaptive = aimd.Config{Initial: 4, Max: 1000}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
		a := connectorAPI(t, reg, admin.Config{})
		do := func(o forage.Outcome) {
			_ = provider(reg, "p").Do(context.Background(), nil, func(context.Context) forage.Outcome { return o }, budget.CallOption{NoRetry: true})
		}
		do(forage.Outcome{Status: http.StatusTooManyRequests}) // a ceiling under 4/s
		time.Sleep(time.Second)
		var page connectorPage
		a.want("GET", "/connectors", "", http.StatusOK, &page)
		if c := page.Connectors[0]; c.RateNote != "" {
			t.Errorf("under the ceiling: rate %.2f, ceiling %.2f, note %q; want none", c.Rate, c.Ceiling, c.RateNote)
		}
		// 90 of 100 left, the window resetting in 2 s: 60/s.
		do(forage.Outcome{Status: 200, Quota: forage.Quota{Limit: 100, Remaining: 90, Reset: 2 * time.Second, HasLimit: true, HasRemaining: true, HasReset: true}})
		a.want("GET", "/connectors", "", http.StatusOK, &page)
		c := page.Connectors[0]
		if c.Ceiling <= 0 || c.Rate < 10*c.Ceiling || !strings.Contains(c.RateNote, "quota headers say is left until their reset") {
			t.Fatalf("spending a window: rate %.2f, ceiling %.2f, note %q; want a rate far above the ceiling, explained", c.Rate, c.Ceiling, c.RateNote)
		}
		body := a.want("GET", "/", "", http.StatusOK, nil)
		if !strings.Contains(body, "learned ceiling") || !strings.Contains(body, "spends what the provider&#39;s quota headers say") {
			t.Errorf("the status page does not explain the rate above the ceiling:\n%s", body)
		}
	})
}
