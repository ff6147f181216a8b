package budget

import (
	"context"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/breaker"
)

// Metrics receives what a provider measures, for a metrics system to
// export: set it as [Config.Metrics] (or [RegistryConfig.Metrics] for
// every provider of a registry). The nested module
// github.com/forage-go/forage/metrics holds adapters for Prometheus and
// OpenTelemetry.
//
// Every method names the provider by its key, the only label a provider
// gives: never a URL, a query string or a body. A registry keeps one
// provider per key, so an implementation keeps one series per key; a host
// whose keys are hosts it crawls sees one series per host.
//
// Implementations must be safe for concurrent use and fast: Begin and End
// run on every attempt, on the caller's goroutine; Rate, Pause and Breaker
// run while the provider applies a change, so they must not call back into
// the provider. A nil Metrics costs one nil check per call site.
type Metrics interface {
	// Begin records that an attempt is about to be sent, after the call
	// waited wait (zero or more) for its bulkhead slot, its pacing slot and
	// the known limits' slots; retry says it is a retry of a call whose
	// earlier attempt failed. Every Begin is followed by exactly one End
	// for the same key, so Begin − End is the attempts in flight.
	Begin(key string, retry bool, wait time.Duration)
	// End records an attempt's answer: its class (as the provider's
	// Classify read it; [forage.Canceled] when the caller gave up or the
	// attempt panicked) and its latency.
	End(key string, class forage.Class, latency time.Duration)
	// Stop records a call that ended without success, with the reason
	// [Provider.Do]'s error gives: source pressure (throttled, circuit_open,
	// quota, paused, …), the run's budget spent, or the caller's cancel.
	// Calls refused before any attempt are counted here only.
	Stop(key string, reason forage.Reason)
	// Pause records that the provider paused, or extended its pause, for d
	// from now, for reason ([forage.ReasonThrottled] or
	// [forage.ReasonBanned]).
	Pause(key string, reason forage.Reason, d time.Duration)
	// Rate records the provider's rate when it is made and after each
	// change of this process's pacing, with its learned ceiling (zero
	// until known), all in requests/s; cut says the pacing rate went down
	// (pressure seen, or a smaller share). share is the part of the rate
	// this process paces at (see [Config.Shares]): the rate itself while
	// the process holds all of it.
	Rate(key string, rate, ceiling, share float64, cut bool)
	// Breaker records a transition of the provider's breaker to state to.
	Breaker(key string, to breaker.State)
	// Forget records that a [Registry] dropped the provider for key (idle
	// longer than IdleTTL, or the least recently used over MaxProviders):
	// an implementation deletes the key's series, so a crawler that meets
	// many hosts does not export one series per host forever. The dropped
	// provider reports nothing after it; a provider made for the key later
	// reports from zero. It is called with no call
	// of the provider in flight, under the registry's lock for the key: it
	// must not call back into the registry.
	Forget(key string)
}

// Do runs one logical request through the gate; see [Provider.Do].
func (p *local) Do(ctx context.Context, run *Run, attempt func(context.Context) forage.Outcome, opts ...CallOption) error {
	err := p.do(ctx, run, attempt, opts...)
	if m := p.cfg.Metrics; m != nil && err != nil {
		if reason, ok := ReasonOf(err); ok {
			m.Stop(p.key, reason)
		}
	}
	return err
}

// metricsClock reads the clock for a pacing wait, only when metrics are on.
func (p *local) metricsClock() time.Time {
	if p.cfg.Metrics == nil {
		return time.Time{}
	}
	return time.Now()
}

// begin reports an attempt about to be sent after waiting since t0.
func (p *local) begin(t0 time.Time, first bool) {
	if m := p.cfg.Metrics; m != nil {
		m.Begin(p.key, !first, time.Since(t0))
	}
}

// end reports an attempt's answer.
func (p *local) end(class forage.Class, latency time.Duration) {
	if m := p.cfg.Metrics; m != nil {
		m.End(p.key, class, latency)
	}
}

// reportRate reports a pacing rate set: from old to rate (old zero when
// the provider is made).
func (p *local) reportRate(old, rate float64) {
	if m := p.cfg.Metrics; m != nil {
		p.reportMu.Lock()
		defer p.reportMu.Unlock()
		if !p.forgotten.Load() {
			a := p.ctl.Snapshot()
			m.Rate(p.key, a.Rate, a.Ceiling, rate, rate < old) // rate is what the pacer was given: this process's share
		}
	}
}

// reportPause reports a pause set or extended at now, until pu.
func (p *local) reportPause(now, pu time.Time) {
	if m := p.cfg.Metrics; m != nil {
		p.reportMu.Lock()
		defer p.reportMu.Unlock()
		if !p.forgotten.Load() {
			m.Pause(p.key, p.pauseReason(now), pu.Sub(now))
		}
	}
}

// forget reports that the registry dropped the provider. Nothing of it is
// reported after: a shared provider's renewal under way (or armed) when it
// was dropped follows its lease, given back, after the Forget, and its
// Rate made the key's series again, kept by the exporter for good.
func (p *local) forget() {
	if m := p.cfg.Metrics; m != nil {
		p.reportMu.Lock()
		defer p.reportMu.Unlock()
		p.forgotten.Store(true)
		m.Forget(p.key)
	}
}

// mute makes p report and log nothing more: a provider a creator built
// and dropped unused, having lost the race to another. It may have joined
// the lease document (Config.Shares) and hear its news until its next
// renewal gives its lease back: the key's series and events are the
// winner's (a 429 to the winner was reported as two pauses).
func (p *local) mute() {
	p.reportMu.Lock()
	defer p.reportMu.Unlock()
	p.forgotten.Store(true)
}

// breakerHook returns the breaker's OnTransition for a provider with
// metrics m: the host's own hook (if any), then m.Breaker.
func breakerHook(key string, m Metrics, host func(breaker.Transition)) func(breaker.Transition) {
	if m == nil {
		return host
	}
	return func(t breaker.Transition) {
		if host != nil {
			host(t)
		}
		m.Breaker(key, t.To)
	}
}
