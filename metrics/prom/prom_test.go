package prom_test

import (
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/metrics/internal/scripted"
	"github.com/forage-go/forage/metrics/prom"
)

// TestScrape: the Prometheus text of a scripted run has a series per class,
// reason and state seen, with the counts of the run, the gauges of the
// provider's state, and a histogram sample per attempt.
func TestScrape(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m, err := prom.New(prom.Config{})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		scripted.Run(t, m)
		want := `
# HELP forage_attempts_total Attempts answered, by outcome class.
# TYPE forage_attempts_total counter
forage_attempts_total{class="canceled",provider="api.example.com"} 0
forage_attempts_total{class="overloaded",provider="api.example.com"} 1
forage_attempts_total{class="permanent",provider="api.example.com"} 0
forage_attempts_total{class="success",provider="api.example.com"} 4
forage_attempts_total{class="throttled",provider="api.example.com"} 1
forage_attempts_total{class="transient",provider="api.example.com"} 1
# HELP forage_retries_total Attempts that were retries.
# TYPE forage_retries_total counter
forage_retries_total{provider="api.example.com"} 1
# HELP forage_stops_total Calls that ended without success, by reason.
# TYPE forage_stops_total counter
forage_stops_total{provider="api.example.com",reason="circuit_open"} 1
forage_stops_total{provider="api.example.com",reason="throttled"} 1
forage_stops_total{provider="api.example.com",reason="unavailable"} 1
# HELP forage_pauses_total Pauses the provider imposed, set or extended, by reason.
# TYPE forage_pauses_total counter
forage_pauses_total{provider="api.example.com",reason="throttled"} 1
# HELP forage_rate_cuts_total Cuts of the pacing rate.
# TYPE forage_rate_cuts_total counter
forage_rate_cuts_total{provider="api.example.com"} 1
# HELP forage_breaker_transitions_total Circuit breaker transitions, by the state entered.
# TYPE forage_breaker_transitions_total counter
forage_breaker_transitions_total{provider="api.example.com",state="open"} 1
# HELP forage_in_flight Attempts sent and not yet answered.
# TYPE forage_in_flight gauge
forage_in_flight{provider="api.example.com"} 0
`
		names := []string{"forage_attempts_total", "forage_retries_total", "forage_stops_total", "forage_pauses_total",
			"forage_rate_cuts_total", "forage_breaker_transitions_total", "forage_in_flight"}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
			t.Error(err)
		}
		text := scrape(t, reg)
		for _, line := range []string{
			`forage_attempt_duration_seconds_count{provider="api.example.com"} 7`,
			`forage_attempt_duration_seconds_bucket{provider="api.example.com",le="0.01"} 0`,
			`forage_attempt_duration_seconds_bucket{provider="api.example.com",le="0.025"} 7`,
			`forage_pacing_wait_seconds_count{provider="api.example.com"} 7`,
			`forage_ceiling{provider="api.example.com"}`,
			`forage_share{provider="api.example.com"}`,
		} {
			if !strings.Contains(text, line) {
				t.Errorf("the scrape lacks %s:\n%s", line, text)
			}
		}
		rate, share := value(t, text, "forage_rate"), value(t, text, "forage_share")
		if rate <= 0 || rate >= 10 || share != rate {
			t.Errorf("forage_rate %v, forage_share %v: want a cut rate in (0, 10), the share equal to it", rate, share)
		}
	})
}

// TestForgetDeletesTheSeries: once the registry drops a provider, a scrape
// shows none of its series; another provider's stay, and the forgotten
// key reports from zero if it comes back.
func TestForgetDeletesTheSeries(t *testing.T) {
	t.Parallel()
	m, err := prom.New(prom.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	for _, key := range []string{"gone.example.com", "kept.example.com"} {
		m.Begin(key, true, time.Millisecond)
		m.End(key, forage.Throttled, time.Millisecond)
		m.Stop(key, forage.ReasonThrottled)
		m.Pause(key, forage.ReasonThrottled, time.Second)
		m.Rate(key, 5, 10, 5, true)
		m.Breaker(key, 1)
	}
	m.Forget("gone.example.com")
	text := scrape(t, reg)
	if strings.Contains(text, "gone.example.com") {
		t.Errorf("a forgotten provider's series are still scraped:\n%s", text)
	}
	if n := strings.Count(text, `provider="kept.example.com"`); n < 12 {
		t.Errorf("the other provider has %d series lines, want every metric:\n%s", n, text)
	}
	m.End("gone.example.com", forage.Success, time.Millisecond)
	if !strings.Contains(scrape(t, reg), `forage_attempts_total{class="success",provider="gone.example.com"} 1`) {
		t.Errorf("a forgotten key that comes back does not report from zero")
	}
}

// scrape returns what a Prometheus server scraping reg reads.
func scrape(t *testing.T, reg prometheus.Gatherer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: status %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// value returns the value of api.example.com's series of name in text.
func value(t *testing.T, text, name string) float64 {
	t.Helper()
	prefix := name + `{provider="api.example.com"} `
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no %s in the scrape:\n%s", name, text)
	return 0
}

// BenchmarkAttempt is what one attempt costs the collectors: a Begin and
// an End for a key already seen.
func BenchmarkAttempt(b *testing.B) {
	m, _ := prom.New(prom.Config{})
	b.ReportAllocs()
	for b.Loop() {
		m.Begin("api.example.com", false, time.Millisecond)
		m.End("api.example.com", forage.Success, 20*time.Millisecond)
	}
}

// TestBucketsMustIncrease: histogram bounds that do not strictly increase
// are an invalid config that names the field; nil means the defaults.
func TestBucketsMustIncrease(t *testing.T) {
	t.Parallel()
	for _, b := range [][]float64{{1, 1}, {2, 1}, {.1, .5, .2}} {
		if _, err := prom.New(prom.Config{Buckets: b}); !errors.Is(err, prom.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Buckets") {
			t.Errorf("New with Buckets %v = %v, want ErrInvalidConfig naming Config.Buckets", b, err)
		}
	}
	for _, b := range [][]float64{nil, {1}, {.5, 1, 2}} {
		if _, err := prom.New(prom.Config{Buckets: b}); err != nil {
			t.Errorf("New with Buckets %v = %v, want no error", b, err)
		}
	}
}
