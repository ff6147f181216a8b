// Package breaker is a circuit breaker that opens within seconds of an
// outage but not on a random failure share, with observable transitions: a
// fast-fail gate that stops calling a provider that is known to be
// unhealthy, and says so in structured, safe-to-store events.
//
// A [Breaker] wraps the two-step breaker of github.com/sony/gobreaker/v2,
// which owns the state machine. In the closed state it counts the outcomes
// reported in a rolling [Config.Window] and opens when they show an outage
// (the trip rule below). While open, [Breaker.Allow] fails fast with
// [ErrOpen] — the caller must not consult its retry budget, since no request
// was attempted. After [Config.OpenTimeout] it turns half-open and admits
// [Config.HalfOpenProbes] probe requests: one failed probe opens it again,
// that many successful probes close it.
//
// # The trip rule
//
// The window is 10 s by default and rolls in steps of [Config.BucketPeriod]
// (1 s): it holds only the last ten seconds or so, so an outage after an
// hour of success is caught as fast as one on a cold start. After every
// failure reported in the closed state the breaker takes the window's n
// counted outcomes (Successes + Failures), its F failures and its run of C
// consecutive failures, and with M = [Config.MinRequests] opens if n ≥ M
// and either
//
//   - ratio: n ≥ 6·M and F/n ≥ [Config.FailureRatio] ([ReasonFailureRatio]),
//     which catches a partial outage once the sample is large enough that
//     a random failure share does not reach the ratio by chance; or
//   - burst: C ≥ M and 6·C ≥ n — the last M or more outcomes all failed,
//     and they are at least a sixth of the window
//     ([ReasonConsecutiveFailures]) — which catches a total outage fast at
//     any rate: after M failures at low rates, after a sixth of the window
//     (under 2 s) at high ones.
//
// With the defaults (M = 9, FailureRatio 0.5, a 10 s window), after any
// amount of success a total outage opens the breaker at most 4.4 s after it
// begins at 2 requests/s, 2.9 s at 3, 1.75 s at 5, and 1.65 s from 10 up (a
// sixth of a window holding 9–10 s); at 1 request/s it takes the nine
// failures, up to 8.9 s; a provider called fewer than nine times in ten
// seconds never trips it. A failure share held at 70% opens it by the ratio
// rule within about 9 s from 6 requests/s up; below that the window holds
// fewer than 54 outcomes and only bursts of nine count. A random failure
// share does not open it: at 10%, nine failures in a row have a chance of
// 10⁻⁹ per request and half of 54 outcomes less than 10⁻¹²; at 20%, about
// 5·10⁻⁷ and 10⁻⁶, which in simulation is roughly one opening per 100
// hours at the worst rates (2–6 requests/s), and none from 8 up.
//
// The evidence floor M matters on a cold start: without it, the first
// request of a run failing would be a 100% failure ratio and open the
// breaker, treating a healthy provider as down.
//
// # Outcomes
//
// The caller reports each attempt's [forage.Class] through the done func
// that [Breaker.Allow] returns (or returns it from the func given to
// [Breaker.Do]), and the breaker counts it:
//
//   - a failure: source pressure and transient failures (Throttled,
//     Overloaded, Transient) — 429, 418, 503, other 5xx, 408, a
//     per-request timeout, a connection reset, a ban.
//   - a success: Success, and Permanent — the provider answered, including
//     permanent client errors (400, 404, other 4xx). A provider that
//     answers 404 is up; counting it as a failure would let one bad request
//     stream open the breaker for every stream of that provider.
//   - ignored: Canceled — the attempt says nothing about the provider: the
//     caller cancelled it, or the run's own deadline ended it. Ignored
//     outcomes do not change [Counts] at all, and an ignored probe frees
//     its half-open slot.
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
// gobreaker reads the wall clock itself and rolls the window and evaluates
// timeouts lazily, on the next call; so this package has no explicit-time
// (…At) forms, and its time-based behaviour is tested under
// testing/synctest. Call [Breaker.State] to have a pending timeout take
// effect. A window that rolled does not open the breaker by itself: the
// rule is checked when a failure is reported.
package breaker
