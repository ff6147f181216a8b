package forage

// Reason names why a call or a run stopped. Every stop has exactly one; the
// budget package reports it in its Error, with the provider and the time
// the provider may be called again (Until).
//
// Reasons fall in three families, and callers act on the family:
//
//   - budget exhaustion ([ReasonRequestCap], [ReasonDeadline]): a planned
//     hand-off. The run's envelope ran out; the provider is fine. Re-queue
//     the remainder soon and arm no cool-down.
//   - source pressure ([ReasonThrottled], [ReasonQuota], [ReasonUnavailable],
//     [ReasonCircuitOpen], [ReasonBanned], [ReasonPaused]): the provider
//     pushed back or kept failing, its known quota is spent, or an
//     operator paused it. Wait until it allows calls again (the stop's
//     Until) and cool this provider only. A call the run's retry budget
//     would not retry stops for what the provider last did (throttled,
//     unavailable), with the budget's error ([github.com/forage-go/forage/retry.ErrBudgetExhausted])
//     wrapped in its cause: a provider that never answered is never a spent
//     budget.
//   - failure ([ReasonPermanent], [ReasonCanceled], [ReasonPacer]): the
//     request itself was refused (a 4xx other than 408/418/429), the caller gave
//     up, or the host's pacer failed.
//
// And one of its own, [ReasonBehind]: the provider has not published yet
// what a stream asks for. Neither exhaustion nor pressure (the provider is
// fine, and nothing is cooled), nor done: ask again at the stop's Until.
//
// Reason is a plain value, safe for concurrent use.
type Reason string

// The reasons a call or a run stops.
const (
	// ReasonRequestCap: the run's MaxRequests attempts were used.
	ReasonRequestCap Reason = "request_cap"
	// ReasonDeadline: the run's wall clock ran out, or the next attempt
	// could not start before it (this provider's next pacing slot, or a
	// retry's backoff, falls after the deadline; another provider may still
	// have room: check the run's ExhaustedAt before ending the whole run).
	ReasonDeadline Reason = "deadline"

	// ReasonThrottled: the provider answered 429, or asked for a pause (a
	// Retry-After, or rate-limit headers that announce its quota spent
	// until a reset, on any answer, a success too) longer than the call may
	// wait or than the run has left, other than a ban's. A limit forage was
	// told in its Config is [ReasonQuota] instead.
	ReasonThrottled Reason = "throttled"
	// ReasonQuota: a known limit of the provider (the budget Config's
	// Limits) is spent: the next request would wait for it longer than the
	// call may (MaxWait), or until at or after the run's or the caller's
	// deadline. No request was sent and nothing was booked or counted
	// against the run; the stop's Until is when the limits admit the call
	// again. It is source pressure that forage foresaw rather than a
	// refusal the provider answered (that is [ReasonThrottled]): a
	// scheduler waits until Until instead of calling again at once.
	ReasonQuota Reason = "quota"
	// ReasonUnavailable: the provider kept failing with 503, other 5xx,
	// timeouts or resets until the call gave up.
	ReasonUnavailable Reason = "unavailable"
	// ReasonCircuitOpen: the provider's circuit breaker is open; no request
	// was sent.
	ReasonCircuitOpen Reason = "circuit_open"
	// ReasonBanned: the provider answered 418 (Binance's IP ban) or otherwise
	// said the client is banned for a while, or the call came during the
	// pause such a ban imposed (see the budget Config's BanPause), in this
	// process or, through a stored pause, an earlier one.
	ReasonBanned Reason = "banned"

	// ReasonPermanent: the provider refused the request itself (a 4xx other
	// than 408, 418 and 429, or an error the attempt marked permanent). Retrying
	// cannot help.
	ReasonPermanent Reason = "permanent"
	// ReasonCanceled: the caller's context ended, or its deadline comes
	// before the provider may be called (budget.Error.Until says when).
	ReasonCanceled Reason = "canceled"
	// ReasonPacer: the host's pacer (a budget.Pacer of its own, such as
	// one kept in a database) failed with an error of its own: no request was sent, and it is
	// neither the provider's verdict nor the run's budget. Call again once
	// the pacer is back.
	ReasonPacer Reason = "pacer"
	// ReasonPaused: an operator took the provider out of service (its
	// record's Status is "paused", see budget.Registry.SetStatus). Source
	// pressure: no attempt is made until the operator puts it back.
	ReasonPaused Reason = "paused"

	// ReasonBehind: the provider has not published yet what the stream
	// asks for (its clock or its feed runs behind ours: the last candles
	// before a backfill's end are still forming there). A stream run stops
	// short of its end with a gap record, not caught up, and its Until is
	// when to ask again; a scheduler runs it again then. Not a failure, and
	// no pressure: other streams of the provider go on.
	ReasonBehind Reason = "behind"
)

// SourcePressure reports whether r means the provider pushed back, its
// known quota is spent, or an operator paused it: throttled, quota,
// unavailable, circuit_open, banned or paused.
func (r Reason) SourcePressure() bool {
	switch r {
	case ReasonThrottled, ReasonQuota, ReasonUnavailable, ReasonCircuitOpen, ReasonBanned, ReasonPaused:
		return true
	}
	return false
}

// Exhausted reports whether r is budget exhaustion: request_cap or
// deadline. Exhaustion is a planned defer, never a provider failure.
func (r Reason) Exhausted() bool {
	switch r {
	case ReasonRequestCap, ReasonDeadline:
		return true
	}
	return false
}
