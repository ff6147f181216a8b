// Package gcra paces requests precisely with the Generic Cell Rate Algorithm
// (GCRA, ITU-T I.371): a lock-free limiter whose whole state is one
// theoretical arrival time (TAT), and whose rate can be changed at run time.
//
// # The idea
//
// With the emission interval I = 1/Rate and the burst tolerance
// L = (Burst-1)·I, a request of cost n arriving at time t computes
//
//	TAT' = max(TAT, t)
//	newTAT = TAT' + n·I
//
// and conforms iff newTAT − t ≤ L + I; only a conforming request moves TAT
// to newTAT. TAT is the time at which the limiter would be idle again if
// nothing else arrived, so TAT − t is the backlog and (L + I − backlog)/I is
// the number of unit requests that would still conform right now. Because
// TAT' is never earlier than t, idle time never banks more than Burst
// requests of credit: a collector that pauses for an hour between scheduled
// runs resumes with at most Burst requests at once, then is paced at Rate.
//
// The arithmetic lives in the pure functions [Decide] and [Reserve], in int64
// nanoseconds, so a store that keeps TAT elsewhere (a database row shared by
// many processes) can reuse exactly the decisions a [Limiter] makes.
//
// # Using it
//
// [New] builds a [Limiter] from a [Config]. [Limiter.AllowNAt] decides, at
// the time the caller read once, without waiting and reports a [Result] (remaining
// burst, when to retry, when the limiter is idle again; [Limiter.Allow] is the
// same for one request now); [Limiter.WaitN] blocks
// until a slot conforms; [Limiter.ReserveNAt] books a slot unconditionally for
// a pacer that must send every request, and [Limiter.UnreserveNAt] gives an
// unused one back. [Limiter.SetRateAt] retunes the rate (the aimd package calls
// it on every response) and [Limiter.PauseUntil] honours a provider's
// Retry-After.
//
// # Concurrency
//
// The state is a single atomic int64 updated by compare-and-swap; the admit
// path takes no lock, allocates nothing and never fails under contention (it
// retries the compare-and-swap until it wins). [Limiter.SetRateAt] briefly
// freezes the state word (a few instructions) so that the interval and the
// rescaled backlog change together; admits that meet the frozen word yield and
// retry.
//
// # High rates
//
// Blocking waits rely on timers, which overshoot by up to about a millisecond.
// With Burst 1 every overshoot is lost, so [Limiter.WaitN] cannot pace above
// roughly 1,000 requests per second; give the limiter a Burst that covers a
// couple of milliseconds of traffic (Burst ≥ Rate × 0.002) and the overshoot is
// absorbed as burst instead. [Limiter.SetBurst] changes Burst on a live
// limiter, for a caller that learns only later how much burst its provider
// allows.
package gcra
