package otel_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	forageotel "github.com/forage-go/forage/metrics/otel"
)

// ExampleNew wires the instruments into a registry of providers. A real
// program gives New its MeterProvider (with an OTLP or a Prometheus
// exporter as its reader), or sets the global one.
func ExampleNew() {
	reader := sdkmetric.NewManualReader() // in a real program: an exporter's reader
	m, err := forageotel.New(forageotel.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		panic(err)
	}
	providers, err := budget.NewRegistry(budget.RegistryConfig{Metrics: m})
	if err != nil {
		panic(err)
	}

	p, _ := providers.Get("api.example.com")
	_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
		return forage.Outcome{Status: 200} // one request attempt, made by the host's fetcher
	})

	// Setup outside the lesson: collect as an exporter would.
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if sum, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == "forage.attempts" {
				for _, dp := range sum.DataPoints {
					class, _ := dp.Attributes.Value("class")
					fmt.Println(mt.Name, class.String(), dp.Value)
				}
			}
		}
	}
	// Output:
	// forage.attempts success 1
}
