package prom_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/metrics/prom"
)

// ExampleNew wires the collectors into a registry of providers and serves
// them at /metrics.
func ExampleNew() {
	m, err := prom.New(prom.Config{})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	providers, err := budget.NewRegistry(budget.RegistryConfig{Metrics: m})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	p, _ := providers.Get("api.example.com")
	_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
		return forage.Outcome{Status: 200} // one request attempt, made by the host's fetcher
	})

	// Setup outside the lesson: scrape /metrics as Prometheus would.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, `forage_attempts_total{class="success"`) || strings.HasPrefix(line, "forage_in_flight{") {
			fmt.Print(line)
		}
	}
	// Output:
	// forage_attempts_total{class="success",provider="api.example.com"} 1
	// forage_in_flight{provider="api.example.com"} 0
}
