package prom

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
)

// ErrInvalidConfig is wrapped by the error [New] returns for an invalid
// [Config].
var ErrInvalidConfig = errors.New("prom: invalid config")

// defaultBuckets are the histogram bounds, in seconds, when
// [Config.Buckets] is nil: from a millisecond (an attempt on loopback, a
// slot free at once) to a minute (budget.Config.MaxWait's default).
var defaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Config configures [New]. The zero Config is valid.
type Config struct {
	// Namespace prefixes every metric name, joined with "_". Defaults to
	// "forage".
	Namespace string
	// Buckets are the upper bounds, in seconds, of the attempt latency and
	// pacing wait histograms; they must be strictly increasing. Defaults
	// to bounds from a millisecond to a minute.
	Buckets []float64
}

// Metrics is what [New] returns: a [budget.Metrics], to give to providers,
// and a [prometheus.Collector], to register. It is safe for concurrent use.
type Metrics interface {
	budget.Metrics
	prometheus.Collector
}

// collectors holds the Prometheus collectors of forage's providers: the
// [Metrics] [New] returns.
type collectors struct {
	attempts, stops, pauses, transitions *prometheus.CounterVec
	retries, cuts                        *prometheus.CounterVec
	rate, ceiling, share, inFlight       *prometheus.GaugeVec
	latency, wait                        *prometheus.HistogramVec

	keys sync.Map // provider key → *series
}

// series holds one provider's children of the hot vectors, looked up once.
type series struct {
	attempts         [forage.Canceled + 1]prometheus.Counter
	retries, cuts    prometheus.Counter
	inFlight         prometheus.Gauge
	rate, ceil, shar prometheus.Gauge
	latency, wait    prometheus.Observer
}

var _ Metrics = (*collectors)(nil)

// New returns the collectors for cfg, or an error wrapping
// [ErrInvalidConfig] that names the invalid field. Register the result
// with a [prometheus.Registerer] to export it.
func New(cfg Config) (Metrics, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "forage"
	}
	if cfg.Buckets == nil {
		cfg.Buckets = defaultBuckets
	}
	for i := 1; i < len(cfg.Buckets); i++ {
		if !(cfg.Buckets[i] > cfg.Buckets[i-1]) {
			return nil, fmt.Errorf("%w: Config.Buckets must be strictly increasing (got %v)", ErrInvalidConfig, cfg.Buckets)
		}
	}
	ns := cfg.Namespace
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, append([]string{"provider"}, labels...))
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, []string{"provider"})
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: cfg.Buckets}, []string{"provider"})
	}
	return &collectors{
		attempts:    counter("attempts_total", "Attempts answered, by outcome class.", "class"),
		retries:     counter("retries_total", "Attempts that were retries."),
		stops:       counter("stops_total", "Calls that ended without success, by reason.", "reason"),
		pauses:      counter("pauses_total", "Pauses the provider imposed, set or extended, by reason.", "reason"),
		cuts:        counter("rate_cuts_total", "Cuts of the pacing rate."),
		transitions: counter("breaker_transitions_total", "Circuit breaker transitions, by the state entered.", "state"),
		rate:        gauge("rate", "The pacing rate, requests/s."),
		ceiling:     gauge("ceiling", "The learned ceiling, requests/s; 0 until known."),
		share:       gauge("share", "The part of the pacing rate this process may use, requests/s."),
		inFlight:    gauge("in_flight", "Attempts sent and not yet answered."),
		latency:     histogram("attempt_duration_seconds", "Latency of one attempt, seconds."),
		wait:        histogram("pacing_wait_seconds", "Wait for a slot (bulkhead, pacing, known limits) before an attempt, seconds."),
	}, nil
}

// of returns key's series, made on first use.
func (m *collectors) of(key string) *series {
	if s, ok := m.keys.Load(key); ok {
		return s.(*series)
	}
	s := &series{
		retries:  m.retries.WithLabelValues(key),
		cuts:     m.cuts.WithLabelValues(key),
		inFlight: m.inFlight.WithLabelValues(key),
		rate:     m.rate.WithLabelValues(key),
		ceil:     m.ceiling.WithLabelValues(key),
		shar:     m.share.WithLabelValues(key),
		latency:  m.latency.WithLabelValues(key),
		wait:     m.wait.WithLabelValues(key),
	}
	for c := range s.attempts {
		s.attempts[c] = m.attempts.WithLabelValues(key, forage.Class(c).String())
	}
	got, _ := m.keys.LoadOrStore(key, s)
	return got.(*series)
}

// Begin counts an attempt in flight (and a retry) and observes its wait.
func (m *collectors) Begin(key string, retry bool, wait time.Duration) {
	s := m.of(key)
	s.inFlight.Inc()
	if retry {
		s.retries.Inc()
	}
	s.wait.Observe(wait.Seconds())
}

// End counts an attempt by class and observes its latency.
func (m *collectors) End(key string, class forage.Class, latency time.Duration) {
	s := m.of(key)
	s.inFlight.Dec()
	s.attempts[min(class, forage.Canceled)].Inc()
	s.latency.Observe(latency.Seconds())
}

// Stop counts a call that ended without success, by reason.
func (m *collectors) Stop(key string, reason forage.Reason) {
	m.stops.WithLabelValues(key, string(reason)).Inc()
}

// Pause counts a pause set or extended, by reason.
func (m *collectors) Pause(key string, reason forage.Reason, _ time.Duration) {
	m.pauses.WithLabelValues(key, string(reason)).Inc()
}

// Rate sets the rate, ceiling and share gauges and counts a cut.
func (m *collectors) Rate(key string, rate, ceiling, share float64, cut bool) {
	s := m.of(key)
	s.rate.Set(rate)
	s.ceil.Set(ceiling)
	s.shar.Set(share)
	if cut {
		s.cuts.Inc()
	}
}

// Breaker counts a breaker transition, by the state entered.
func (m *collectors) Breaker(key string, to breaker.State) {
	m.transitions.WithLabelValues(key, to.String()).Inc()
}

// Forget deletes every series of key: the registry dropped its provider.
func (m *collectors) Forget(key string) {
	m.keys.Delete(key)
	l := prometheus.Labels{"provider": key}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.attempts, m.retries, m.stops, m.pauses, m.cuts, m.transitions,
		m.rate, m.ceiling, m.share, m.inFlight, m.latency, m.wait,
	} {
		v.DeletePartialMatch(l)
	}
}

// all returns every collector, in a fixed order.
func (m *collectors) all() []prometheus.Collector {
	return []prometheus.Collector{m.attempts, m.retries, m.stops, m.pauses, m.cuts, m.transitions,
		m.rate, m.ceiling, m.share, m.inFlight, m.latency, m.wait}
}

// Describe sends the descriptors of every metric; see [prometheus.Collector].
func (m *collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect sends every series; see [prometheus.Collector].
func (m *collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}
