// Package prom exports the measurements of forage providers to
// Prometheus: [New] returns a [Metrics], both a [budget.Metrics] (set it
// as budget.Config.Metrics or budget.RegistryConfig.Metrics) and a
// [prometheus.Collector] (register it with a [prometheus.Registerer]).
//
// # Series
//
// Every series has the label provider, the provider key (a host, an
// exchange's name): never a URL, a query string or a body. With the
// default namespace "forage":
//
//	forage_attempts_total{provider,class}          attempts answered, by class (success, throttled, overloaded, transient, permanent, canceled)
//	forage_retries_total{provider}                 attempts that were retries
//	forage_stops_total{provider,reason}            calls that ended without success, by reason (throttled, unavailable, circuit_open, quota, …)
//	forage_pauses_total{provider,reason}           pauses set or extended (throttled, banned)
//	forage_rate_cuts_total{provider}               cuts of the pacing rate
//	forage_breaker_transitions_total{provider,state}  breaker transitions, by the state entered
//	forage_rate{provider}                          the pacing rate, requests/s
//	forage_ceiling{provider}                       the learned ceiling, requests/s (0 until known)
//	forage_share{provider}                         the part of the rate this process may use, requests/s
//	forage_in_flight{provider}                     attempts sent and not yet answered
//	forage_attempt_duration_seconds{provider}      histogram of attempt latency
//	forage_pacing_wait_seconds{provider}           histogram of the wait for a slot before an attempt
//
// A provider's series appear when it is made (the rate gauges) or first
// reports, and stay until the registry drops the provider (Forget deletes
// them): one set per provider key, about 50 series with the histograms'
// buckets. A crawl keyed by host makes a set per host it holds: bound the
// series with the registry's MaxProviders and IdleTTL
// (budget.RegistryConfig), or key the crawl's long tail of hosts by one
// name of your own (budget.Transport.Key), as 10,000 hosts held at once
// are half a million series.
package prom
