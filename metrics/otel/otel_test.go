package otel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/metrics/internal/scripted"
	forageotel "github.com/forage-go/forage/metrics/otel"
)

// TestInMemoryReader: an in-memory reader collecting after a scripted run
// sees every instrument, with the counts of the run, the gauges of the
// provider's state, and a histogram sample per attempt.
func TestInMemoryReader(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		m, err := forageotel.New(forageotel.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
		if err != nil {
			t.Fatal(err)
		}
		scripted.Run(t, m)
		got := collect(t, reader)
		for _, want := range []string{
			`forage.attempts{class=overloaded,provider=api.example.com} 1`,
			`forage.attempts{class=success,provider=api.example.com} 4`,
			`forage.attempts{class=throttled,provider=api.example.com} 1`,
			`forage.attempts{class=transient,provider=api.example.com} 1`,
			`forage.retries{provider=api.example.com} 1`,
			`forage.stops{provider=api.example.com,reason=circuit_open} 1`,
			`forage.stops{provider=api.example.com,reason=throttled} 1`,
			`forage.stops{provider=api.example.com,reason=unavailable} 1`,
			`forage.pauses{provider=api.example.com,reason=throttled} 1`,
			`forage.rate.cuts{provider=api.example.com} 1`,
			`forage.breaker.transitions{provider=api.example.com,state=open} 1`,
			`forage.in_flight{provider=api.example.com} 0`,
			`forage.attempt.duration{provider=api.example.com} count=7 sum=0.14`,
			`forage.pacing.wait{provider=api.example.com} count=7 `,
			`forage.rate{provider=api.example.com} `,
			`forage.ceiling{provider=api.example.com} `,
			`forage.share{provider=api.example.com} `,
		} {
			if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, want) }) {
				t.Errorf("no %s in what the reader collected:\n%s", want, strings.Join(got, "\n"))
			}
		}
	})
}

// collect returns one line per data point the reader collects:
// name{attributes} and the value (counters, gauges) or the count and sum
// (histograms), in order; every instrument must have a unit and a
// description.
func collect(t *testing.T, reader *sdkmetric.ManualReader) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Unit == "" || mt.Description == "" {
				t.Errorf("%s: unit %q, description %q: want both", mt.Name, mt.Unit, mt.Description)
			}
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s%s %d", mt.Name, attrs(p.Attributes), p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s%s %g", mt.Name, attrs(p.Attributes), p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s%s count=%d sum=%.3g", mt.Name, attrs(p.Attributes), p.Count, p.Sum))
				}
			default:
				t.Errorf("%s: unexpected data %T", mt.Name, mt.Data)
			}
		}
	}
	slices.Sort(lines)
	return lines
}

// attrs renders a set as {k=v,…}.
func attrs(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.String())
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// BenchmarkAttempt is what one attempt costs the instruments: a Begin and
// an End for a key already seen.
func BenchmarkAttempt(b *testing.B) {
	m, _ := forageotel.New(forageotel.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))})
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
	mp := sdkmetric.NewMeterProvider()
	for _, b := range [][]float64{{1, 1}, {2, 1}, {.1, .5, .2}} {
		if _, err := forageotel.New(forageotel.Config{MeterProvider: mp, Buckets: b}); !errors.Is(err, forageotel.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Buckets") {
			t.Errorf("New with Buckets %v = %v, want ErrInvalidConfig naming Config.Buckets", b, err)
		}
	}
	for _, b := range [][]float64{nil, {1}, {.5, 1, 2}} {
		if _, err := forageotel.New(forageotel.Config{MeterProvider: mp, Buckets: b}); err != nil {
			t.Errorf("New with Buckets %v = %v, want no error", b, err)
		}
	}
}
