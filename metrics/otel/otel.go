package otel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	global "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
)

// ErrInvalidConfig is wrapped by the error [New] returns for an invalid
// [Config].
var ErrInvalidConfig = errors.New("otel: invalid config")

// ScopeName is the instrumentation scope of the meter [New] uses.
const ScopeName = "github.com/forage-go/forage/metrics/otel"

// Config configures [New]. The zero Config is valid.
type Config struct {
	// MeterProvider makes the meter the instruments belong to. Defaults to
	// the global one (go.opentelemetry.io/otel.GetMeterProvider).
	MeterProvider metric.MeterProvider
	// Buckets are the explicit bucket bounds, in seconds, of the attempt
	// latency and pacing wait histograms; they must be strictly
	// increasing. Defaults to bounds from a millisecond to a minute.
	Buckets []float64
}

// defaultBuckets are the histogram bounds when Config.Buckets is nil.
var defaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// recorder records forage's provider measurements with OpenTelemetry
// instruments: the [budget.Metrics] [New] returns. It is safe for
// concurrent use.
type recorder struct {
	attempts, retries, stops, pauses, cuts, transitions metric.Int64Counter
	inFlight                                            metric.Int64UpDownCounter
	rate, ceiling, share                                metric.Float64Gauge
	latency, wait                                       metric.Float64Histogram

	keys sync.Map // provider key → *series
}

// series holds one provider's attribute options, built once, so a
// measurement allocates none.
type series struct {
	add     []metric.AddOption                      // provider=key
	record  []metric.RecordOption                   // provider=key
	classes [forage.Canceled + 1][]metric.AddOption // provider=key, class=…
}

var _ budget.Metrics = (*recorder)(nil)

// New returns a [budget.Metrics], safe for concurrent use, that records
// through instruments of a meter of cfg.MeterProvider, or an error: one wrapping [ErrInvalidConfig] that
// names the invalid field, or the meter's own for an instrument it could
// not make.
func New(cfg Config) (budget.Metrics, error) {
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = global.GetMeterProvider()
	}
	if cfg.Buckets == nil {
		cfg.Buckets = defaultBuckets
	}
	for i := 1; i < len(cfg.Buckets); i++ {
		if !(cfg.Buckets[i] > cfg.Buckets[i-1]) {
			return nil, fmt.Errorf("%w: Config.Buckets must be strictly increasing (got %v)", ErrInvalidConfig, cfg.Buckets)
		}
	}
	meter := cfg.MeterProvider.Meter(ScopeName)
	m := &recorder{}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, desc string) metric.Float64Gauge {
		g, err := meter.Float64Gauge(name, metric.WithUnit("{request}/s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(cfg.Buckets...))
		errs = append(errs, err)
		return h
	}
	m.attempts = counter("forage.attempts", "{attempt}", "Attempts answered, by outcome class.")
	m.retries = counter("forage.retries", "{attempt}", "Attempts that were retries.")
	m.stops = counter("forage.stops", "{call}", "Calls that ended without success, by reason.")
	m.pauses = counter("forage.pauses", "{pause}", "Pauses the provider imposed, set or extended, by reason.")
	m.cuts = counter("forage.rate.cuts", "{cut}", "Cuts of the pacing rate.")
	m.transitions = counter("forage.breaker.transitions", "{transition}", "Circuit breaker transitions, by the state entered.")
	m.rate = gauge("forage.rate", "The pacing rate.")
	m.ceiling = gauge("forage.ceiling", "The learned ceiling; 0 until known.")
	m.share = gauge("forage.share", "The part of the pacing rate this process may use.")
	m.latency = histogram("forage.attempt.duration", "Latency of one attempt.")
	m.wait = histogram("forage.pacing.wait", "Wait for a slot (bulkhead, pacing, known limits) before an attempt.")
	var err error
	m.inFlight, err = meter.Int64UpDownCounter("forage.in_flight", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent and not yet answered."))
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, fmt.Errorf("otel: %w", err)
	}
	return m, nil
}

// of returns key's series, made on first use.
func (m *recorder) of(key string) *series {
	if s, ok := m.keys.Load(key); ok {
		return s.(*series)
	}
	p := attribute.String("provider", key)
	o := metric.WithAttributeSet(attribute.NewSet(p))
	s := &series{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
	for c := range s.classes {
		set := attribute.NewSet(p, attribute.String("class", forage.Class(c).String()))
		s.classes[c] = []metric.AddOption{metric.WithAttributeSet(set)}
	}
	got, _ := m.keys.LoadOrStore(key, s)
	return got.(*series)
}

// with returns the option for key's attribute and one more, key=value.
func with(key, name, value string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("provider", key), attribute.String(name, value)))
}

// Begin counts an attempt in flight (and a retry) and records its wait.
func (m *recorder) Begin(key string, retry bool, wait time.Duration) {
	ctx, s := context.Background(), m.of(key)
	m.inFlight.Add(ctx, 1, s.add...)
	if retry {
		m.retries.Add(ctx, 1, s.add...)
	}
	m.wait.Record(ctx, wait.Seconds(), s.record...)
}

// End counts an attempt by class and records its latency.
func (m *recorder) End(key string, class forage.Class, latency time.Duration) {
	ctx, s := context.Background(), m.of(key)
	m.inFlight.Add(ctx, -1, s.add...)
	m.attempts.Add(ctx, 1, s.classes[min(class, forage.Canceled)]...)
	m.latency.Record(ctx, latency.Seconds(), s.record...)
}

// Stop counts a call that ended without success, by reason.
func (m *recorder) Stop(key string, reason forage.Reason) {
	m.stops.Add(context.Background(), 1, with(key, "reason", string(reason)))
}

// Pause counts a pause set or extended, by reason.
func (m *recorder) Pause(key string, reason forage.Reason, _ time.Duration) {
	m.pauses.Add(context.Background(), 1, with(key, "reason", string(reason)))
}

// Rate records the rate, ceiling and share gauges and counts a cut.
func (m *recorder) Rate(key string, rate, ceiling, share float64, cut bool) {
	ctx, s := context.Background(), m.of(key)
	m.rate.Record(ctx, rate, s.record...)
	m.ceiling.Record(ctx, ceiling, s.record...)
	m.share.Record(ctx, share, s.record...)
	if cut {
		m.cuts.Add(ctx, 1, s.add...)
	}
}

// Breaker counts a breaker transition, by the state entered.
func (m *recorder) Breaker(key string, to breaker.State) {
	m.transitions.Add(context.Background(), 1, with(key, "state", to.String()))
}

// Forget drops what the recorder keeps for key: the registry dropped its
// provider. OpenTelemetry's synchronous instruments cannot delete a series
// once recorded: with delta temporality an exporter stops sending an idle
// one; with cumulative temporality the SDK's cardinality limit bounds them.
func (m *recorder) Forget(key string) { m.keys.Delete(key) }
