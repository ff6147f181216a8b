// Package breaker is a circuit breaker with a minimum-throughput guard and
// observable transitions: a fast-fail gate that stops calling a provider that
// is known to be unhealthy, and says so in structured, safe-to-store events.
//
// A [Breaker] wraps the two-step breaker of github.com/sony/gobreaker/v2,
// which owns the state machine. In the closed state it counts the outcomes
// reported in a fixed [Config.Window]; once at least [Config.MinRequests]
// outcomes are counted and the share of failures reaches
// [Config.FailureRatio], it opens. While open, [Breaker.Allow] fails fast
// with [ErrOpen] — the caller must not consult its retry budget, since no
// request was attempted. After [Config.OpenTimeout] it turns half-open and
// admits [Config.HalfOpenProbes] probe requests: one failed probe opens it
// again, that many successful probes close it.
//
// The minimum-throughput guard matters on a cold start: without it, the
// first request of a run failing would be a 100% failure ratio and open the
// breaker, treating a healthy provider as down.
//
// # Outcomes
//
// The caller classifies each attempt into an [Outcome] and reports it
// through the done func that [Breaker.Allow] returns (or returns it from the
// func given to [Breaker.Do]):
//
//   - [Failure]: source pressure and transient failures — 429, 418, 503,
//     other 5xx, 408, a per-request timeout, a connection reset, a ban.
//   - [Success]: the provider answered, including permanent client errors
//     (400, 404, other 4xx). A provider that answers 404 is up; counting it
//     as a failure would let one bad request stream open the breaker for
//     every stream of that provider.
//   - [Ignored]: the attempt says nothing about the provider — the caller
//     cancelled it, or the run's own deadline ended it. Ignored outcomes do
//     not change [Counts] at all, and an ignored probe frees its half-open
//     slot.
//
// # Transitions
//
// Every state change produces one [Transition] (name, from, to, reason, time
// and the counts that led to it), delivered in order and exactly once to
// [Config.OnTransition] and to [Config.Logger]. It carries no URLs, bodies,
// identifiers or credentials, so it can be stored as run evidence for
// operator health views. Delivery happens outside every lock of the
// breaker, so a hook may call back into it.
//
// # Time
//
// gobreaker reads the wall clock itself and evaluates timeouts lazily, on
// the next call; so this package has no explicit-time (…At) forms, and its
// time-based behaviour is tested under testing/synctest. Call
// [Breaker.State] to have a pending timeout take effect.
package breaker
