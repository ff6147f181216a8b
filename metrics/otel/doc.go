// Package otel exports the measurements of forage providers as
// OpenTelemetry metrics: [New] returns a [budget.Metrics], to set as
// budget.Config.Metrics or budget.RegistryConfig.Metrics, that records
// through a meter of an OpenTelemetry [metric.MeterProvider].
//
// Its name is that of the project it exports to; import it under another
// name (forageotel) beside go.opentelemetry.io/otel.
//
// # Instruments
//
// Every measurement has the attribute provider, the provider key (a host,
// an exchange's name): never a URL, a query string or a body.
//
//	forage.attempts               counter        attempts answered; attribute class (success, throttled, overloaded, transient, permanent, canceled)
//	forage.retries                counter        attempts that were retries
//	forage.stops                  counter        calls that ended without success; attribute reason (throttled, circuit_open, quota, …)
//	forage.pauses                 counter        pauses set or extended; attribute reason (throttled, banned)
//	forage.rate.cuts              counter        cuts of the pacing rate
//	forage.breaker.transitions    counter        breaker transitions; attribute state, the state entered
//	forage.rate                   gauge          the pacing rate, {request}/s
//	forage.ceiling                gauge          the learned ceiling, {request}/s (0 until known)
//	forage.share                  gauge          the part of the rate this process may use, {request}/s
//	forage.in_flight              updowncounter  attempts sent and not yet answered
//	forage.attempt.duration       histogram      attempt latency, s
//	forage.pacing.wait            histogram      the wait for a slot before an attempt, s
package otel
