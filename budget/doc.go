// Package budget is the gate every request to a provider passes: pacing at
// the rate the provider allows, a circuit breaker, retries within a budget,
// and a run's envelope, composed into one [Provider] per provider.
//
// # One request attempt
//
// [Provider.Do] runs one logical request:
//
//	run admit      request cap, deadline → stop with request_cap / deadline
//	breaker        open → fail fast with circuit_open; no retry token spent
//	bulkhead       at most MaxInFlight attempts in flight per provider
//	pace           GCRA at the rate aimd allows; every known Limit; pauses;
//	               a wait past MaxWait → stop with the pause's reason, or
//	               quota for a known Limit, and Error.Until
//	attempt        exactly one outbound request, done by the host
//	classify       success | throttled | overloaded | transient | permanent
//	feedback       aimd learns, the breaker counts, the pacer moves
//	retry?         within the run's retry budget, full jitter floored by
//	               Retry-After; never past the run's deadline
//
// Every attempt takes a pacing slot and counts toward the run's request cap.
// Permanent errors are never retried.
//
// # Reasons
//
// A call that does not succeed returns an [*Error] naming its [forage.Reason].
// A call whose last attempt failed stops for that attempt's [forage.Class]:
// throttled (or banned, for a ban: see Config.Ban), unavailable (Overloaded,
// Transient), permanent or canceled.
// Budget exhaustion (request_cap, deadline) is a planned defer: the
// owner's envelope ran out and the provider is fine. Source pressure
// (throttled, quota, unavailable, circuit_open, banned, paused) means the
// provider pushed back or kept failing, its known quota is spent, or an
// operator paused it; a call the run's retry budget would not retry stops
// so too, for what the provider last did, with [retry.ErrBudgetExhausted]
// in its error. [Error.Until] says when
// it may be called again. A Retry-After longer than the run has left ends
// the call as source pressure rather than sleeping past the deadline.
//
// # Known quotas
//
// A known [Limit] is enforced exactly, and a spent one is a planned wait,
// not a block: when the next slot of the known limits (and of the pacing at
// their rate) is further off than [Config.MaxWait], or at or after the
// run's or the caller's deadline, the call stops at once with
// [forage.ReasonQuota] and [Error.Until] set to when the limits admit the call's
// weight again. No request is sent, nothing is booked, and the run's
// request cap is not charged; a scheduler parks the job until Until and the
// next run resumes from its cursor. A shorter wait is slept through inside
// Do.
//
// # Pauses
//
// A provider's pause (a Retry-After, a ban, a spent quota's reset) holds
// every call until it ends. Headers are untrusted: one answer may impose at
// most [Config.MaxPause] (1 hour by default), so a garbage Retry-After
// cannot park a collector for days. A call sleeps through a pause of up to
// [Config.MaxWait]; a longer one, or one that outlasts the run's deadline,
// ends the call at once with [Error.Until] for the scheduler to wait out.
// A ban (a 418, or what [Config.Ban] calls one: Bybit's 403) without a
// usable Retry-After still pauses: for
// [Config.BanPause] (1 minute by default), doubled for each further ban in
// a row, up to MaxPause; the calls it stops say [forage.ReasonBanned].
// With a [RecordStore] ([Config.Records], [RegistryConfig.Records]) the pause
// in force outlives the process: a restart honours it instead of calling
// again at once, which would only extend a ban, and a ban stays a ban.
//
// # The provider's record
//
// A RecordStore keeps one [forage.ProviderRecord] per provider key: the
// learned rate and ceiling, the pause in force and its reason, an
// operator's status, and counters. A provider loads it when it is created,
// so a restarted process starts at the rate the last one learned instead of
// climbing again from the conservative start (from a record more than a
// minute old, after a climb back of a second or two, at slow start's pace,
// which a refusal ends: the provider may serve less than it did; see
// [aimd.Controller.Restore]), and saves it when a pause is
// set, in the background at most every few seconds while its rate moves
// (never a store call per request), and when a [Registry] evicts it. A
// provider never changes the operator's Status and Why (it saves with
// Status ""); Do obeys them: a provider an operator paused
// ([Registry.SetStatus]) stops every call before any attempt, with
// [forage.ReasonPaused]. The checkpoint package's memory and file stores
// implement RecordStore, and so does the PostgreSQL store.
//
// # Many providers
//
// A [Registry] holds one Provider per key (an exchange, a host), created on
// first use with defaults or a per-key override, evicted when idle. A
// [Transport] puts the whole gate under any [net/http.Client], keyed by host.
// [Registry.ReadyAt] tells, booking nothing, when a host could next be
// called; a [Frontier] uses it to hand a crawler's workers only the URLs of
// hosts that are ready now, so none waits behind a slow or limited host.
//
// Providers rarely publish their limits. With the zero [Config] a Provider
// starts conservatively and discovers the ceiling (see
// [github.com/forage-go/forage/aimd]); known [Limit]s are enforced exactly,
// so no window of their length ever carries more than their count, and the
// provider's usage headers tighten them when it counts more than we did.
//
// # Many processes
//
// Processes that call one provider share it through a [ShareStore]
// ([Config.Shares]; the PostgreSQL store implements it), with no round
// trip per request: each holds a lease on a share of the provider's rate,
// renewed about every second, and paces locally at its share. Shares are
// split by demand and never add up to more than the whole; a cut or a
// pause any process sees reaches the others at their next renewal, or
// within milliseconds when the store is a [ShareWatcher]; known [Limit]s
// are split by the same shares, so together the processes stay within
// them, whatever their number and a limit's Burst: when the processes hold
// more units of a limit's Burst than it has (each holds at least one), the
// limit is slotted, each process sending only in its own slots of the
// limit's interval, handed out by the store with the shares. They stay
// within them unless one is cut off from the store alone (it paces at half
// its last share, which the others may be granted meanwhile; see
// [Config.Shares]) or never reached it; a dead
// process's share goes to the others when its lease ends. The
// first process to call a provider nobody has learned yet learns it alone
// (for up to 10 s, or three cuts), while the others wait: a controller that
// sees every answer finds the limit as one process does. Then a provider
// that refused it and showed no burst allowance is served in turns (one
// holder sends at a time, the learner first), any other is shared by rate. See
// [Config.Shares] for what happens when the store is unreachable.
//
// # Watching providers
//
// [Config.Logger] receives a provider's events as structured records, and
// [Config.Metrics] (or [RegistryConfig.Metrics]) its measurements: each
// attempt's pacing wait, class and latency, each call's stop and its
// reason, pauses, rate changes and breaker transitions, labelled by the
// provider key only. The module github.com/forage-go/forage/metrics
// exports them to Prometheus and OpenTelemetry. [Provider].Snapshot and
// [Registry.SnapshotPage] read the counters on demand.
package budget
