// Package aimd discovers a provider's sustainable request rate from the
// responses it gets: a rate-based AIMD fill-rate controller for a pacer such
// as [github.com/forage-go/forage/gcra], fed one [Signal] per response.
//
// # The idea
//
// A [Controller] starts at a conservative [Config.Initial] rate, because
// before the first response nothing is known. Successes raise the rate; a
// refusal (429, 418, 503) or a sustained rise in latency cuts it. Three
// rules make it safe:
//
//   - One-way ratchet: only a [Success] raises the rate. A fast 429 is not a
//     healthy provider, a Retry-After pause only ever moves forward, and a
//     [Permanent] error (a broken request) never moves the rate at all.
//   - One cut per overshoot, not per refusal: the requests already in flight
//     when the first 429 arrives all come back refused, and cutting for each
//     collapses the rate (AWS SDK's adaptive mode falls to a few percent of
//     the limit this way). A refusal for a request sent before the last cut
//     ([Signal.Sent], or now - [Signal.Latency]) is an echo and is ignored;
//     with neither, [Config.CoolOff] is the fallback. So is a refusal for a
//     request sent while a pause was in force (a pacer that had booked it
//     before the pause): the provider said it would refuse it.
//   - Retry-After and a spent quota ([Hint] Remaining == 0) pause the
//     provider: see [Controller.PausedUntil].
//
// The climb is time-based (per second of successful traffic, not per
// response), so it does not depend on how many requests are in flight, and
// idle time earns nothing. Plain AIMD climbs linearly and halves, so its rate
// saw-tooths between half the limit and the limit and averages about 75% of
// it. This controller does better in four ways:
//
//   - Slow start: before the first pressure the rate doubles every
//     [Config.SlowStart] of success (1/s to 50/s in about 6s), then the first
//     cut is a halving, since doubling overshoots.
//   - A learned ceiling: each overshoot records the rate it began at (the
//     rate in force when the refused request was sent, not the higher one
//     the climb reached while the answer was on its way). The climb back to
//     that ceiling is a cubic (as in TCP CUBIC) fitted to take
//     [Config.Recovery]: fast far below the ceiling, flat near it; above the
//     ceiling the same cubic probes slowly and then faster, so a grown limit
//     is found. With the gentle default cut (x0.9) the rate spends most of
//     its time just under the ceiling: 91-97% of a 50/s limit in simulation,
//     with about one overshoot per Recovery.
//   - Confirmation: one refusal proves little. A burst the client itself
//     made (a pacer sending booked requests at an old rate), or a hiccup of
//     the provider, refuses a request far below the limit, and a ceiling
//     kept there for a Recovery, probed above at a few percent per Recovery,
//     costs most of a run (a 50/s limit mistaken for 8/s took four minutes
//     to find again). So a ceiling is confirmed only when the limit is met
//     twice: an echo (another request in flight refused too), or a later
//     overshoot near the ceiling or while probing above it. Until then the
//     climb runs Recovery/4 and the probe Recovery/12, and a lone refusal
//     leaving slow start sets the ceiling at the halved rate, with the probe
//     starting there; an echo moves it up to the rate the overshoot began at.
//   - Shrink detection: an overshoot at the very rate the last cut set means
//     the limit fell below it; the cut is then a halving and the ceiling
//     drops too, so a halved limit is followed within a few seconds. When a
//     provider keeps refusing with no success in between, each further cut
//     halves the rate: that is the back-off. After a long refusal (a spent
//     fixed window, a ban) the rate and ceiling drop to what the provider
//     actually delivered over the cycle.
//
// A [Hint] parsed from rate-limit headers can pace directly: a windowed quota
// (Limit per Window) caps the rate at Limit/Window and sets it to
// Remaining/Reset on each success, which spends a fixed window evenly with no
// refusal at all. The optional latency signal ([Config.LatencyTarget])
// catches providers that slow down instead of refusing: smoothed latency
// above the target holds the rate and cuts it once, and again only while the
// queue keeps growing.
//
// # How each response moves the controller
//
//	Kind        examples          rate                            ceiling
//	Success     2xx, 3xx          climbs: slow start, then the    -
//	                              cubic; a windowed Hint sets it
//	                              to Remaining/Reset
//	Throttled   429, 418          cut once per overshoot: x0.9;   set to the rate the
//	                              x0.5 leaving slow start, while  overshoot began at
//	                              refusals continue, or when the  (lowered when the
//	                              limit shrank; never up; not     limit shrank; the
//	                              for an echo                     halved rate for a
//	                                                              lone refusal leaving
//	                                                              slow start)
//	Overloaded  503               as Throttled                    as Throttled
//	Transient   other 5xx, 408,   holds                           -
//	            timeout, reset
//	Permanent   other 4xx         never moves                     never moves
//	(latency)   Success or        holds; cut once per episode,    set, as for a
//	            Transient slower  again while the queue still     refusal
//	            than the target   grows
//
// Pause, for every Kind: a Retry-After pauses until now + RetryAfter, and a
// Hint with Remaining == 0 until now + Reset; a pause never moves back.
// The rate always stays in [Config.Min, Config.Max] (and under a declared
// Limit/Window). [Controller.Snapshot] reports rate, ceiling, pause,
// decreases and phase for metrics.
//
// # Numbers
//
// The tests include an explicit-time simulation (sim_test.go): a client
// sending back-to-back at the controller's rate, with a 30ms response
// latency, against a server model per policy, for 300 simulated seconds.
// With the default Config the controller reaches 91-96% of the true limit
// with at most 0.1% of requests refused against GCRA at 50/s (burst 1 and
// 10, 429 with or without Retry-After, 503, 100ms of latency jitter, a limit
// halving mid-run, Binance's 5-refusals-per-minute ban: never banned), 93% at
// 500/s and 96% at 2/s; 90-93% when a conforming request is refused at 3s
// (in slow start) or twice at 60s, where a controller that trusts one
// refusal gets 47% and 90%; 96% against a silent slow-down (LatencyTarget
// 150ms); and 100% against a 3000/min fixed window with Retry-After (0.6%
// refused) or headers (none refused). A plain AIMD (+1/s per second, x0.5
// per overshoot) reaches 66-77% against the same GCRA servers. The budget
// package runs the same policies end to end against internal/sim.
//
// Known limits: against a fixed window with neither Retry-After nor headers,
// slow start meets no refusal until the window is spent at ~2000/s, and the
// probe spends each later window early: ~2.6% refused. With five or more
// requests in flight (100ms latency at 50/s), one overshoot against a burst
// allowance draws five refusals before the first one is seen, enough for a
// 5-per-minute ban; after a ban the rate restarts from what was delivered.
// For such providers set DisableSlowStart with a larger Increase
// (simulated: 94%, no ban), or tell the caller's pacer the limit.
package aimd
