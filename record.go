package forage

import "time"

// ProviderRecord is what a collector keeps about one provider between
// runs, one record per provider key: whether an operator let it be called,
// what the adaptive controller learned of its rate, the pause it asked for,
// and counters. The budget package saves a provider's record through its
// RecordStore and loads it when the provider is created, so a restart
// starts at the learned rate rather than the conservative start, and
// honours a pause (a ban, a Retry-After) still in force.
//
// It lives in this package, beside the rest of the vocabulary, so that the
// stores (the checkpoint package's memory and file stores, the PostgreSQL
// store) can keep it without importing the policies that fill it in. It is
// a plain value, safe to copy and share; its JSON form is the file store's.
type ProviderRecord struct {
	// Key is the provider key, e.g. "api.binance.com".
	Key string `json:"key"`
	// Status is "paused" when an operator took the provider out of
	// service, and "active" or "" otherwise; Why says why, for people. A
	// save with Status "" leaves the saved Status and Why as they are,
	// which is how a provider saves what it learned without undoing what
	// an operator set.
	Status string `json:"status,omitempty"`
	// Why is the operator's reason for Status, e.g. "key revoked".
	Why string `json:"why,omitempty"`
	// Rate is the learned pacing rate, requests/s; zero when nothing was
	// learned.
	Rate float64 `json:"rate,omitempty"`
	// Ceiling is the learned ceiling, requests/s: where throttling began,
	// or what the provider declared; zero when none is known.
	Ceiling float64 `json:"ceiling,omitempty"`
	// Confirmed says the ceiling was met twice, or declared by the provider.
	Confirmed bool `json:"confirmed,omitempty"`
	// PausedUntil is the end of the pause the provider asked for (a
	// Retry-After, a ban, a spent quota's reset); zero for none, and in the
	// past once it has ended. A save never moves it earlier.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// PauseReason is why the provider asked for the pause:
	// [ReasonBanned] or [ReasonThrottled] ("" reads as throttled).
	PauseReason Reason `json:"pause_reason,omitempty"`
	// Requests, OK and Throttled count the attempts sent to the provider,
	// those that succeeded, and those it refused for rate (429, 418),
	// cumulative over every process that saved the record, as of Updated.
	Requests  int64 `json:"requests,omitempty"`
	OK        int64 `json:"ok,omitempty"`
	Throttled int64 `json:"throttled,omitempty"`
	// Updated is when the record was saved.
	Updated time.Time `json:"updated,omitzero"`
	// Refusals are the times of the requests the provider refused for rate
	// in the minute before the save (the latest eight; see
	// aimd.State.Refusals): the part of the provider's refusal budget
	// already spent, which a provider that bans counts whoever was refused.
	// A process that restarts counts them, so a crash loop does not spend
	// the budget afresh at every start (a collector killed and restarted
	// twelve times was banned by a provider that bans after five refusals
	// a minute). A save replaces them. Times are kept to the microsecond.
	Refusals []time.Time `json:"refusals,omitempty"`
	// Spent holds, per known limit of the provider (keyed by the budget
	// package: the limit's count, window and name), the time until which
	// its allowance is accounted for: what this process and those before
	// it booked, and a few seconds more. A process that restarts starts
	// each limit from it, so a window the process before it spent is not
	// spent again (killed and restarted every two seconds, collectors told
	// 3 per hour sent 10 requests in 20 seconds), and a limit that has
	// long recovered starts whole (a slow limit's next slot is not put off
	// by every start). A save replaces it.
	Spent map[string]time.Time `json:"spent,omitempty"`
}
