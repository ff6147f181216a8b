package breaker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sony/gobreaker/v2"
)

// State is the state of a [Breaker]. It is a plain value, safe for
// concurrent use.
type State uint8

// The states of a Breaker. The zero State is StateClosed.
const (
	// StateClosed admits every request and counts outcomes.
	StateClosed State = iota
	// StateHalfOpen admits up to Config.HalfOpenProbes probe requests at a
	// time to test whether the provider has recovered.
	StateHalfOpen
	// StateOpen admits nothing: Allow fails fast with ErrOpen.
	StateOpen
)

// String returns "closed", "half-open" or "open".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// stateOf maps gobreaker's state to ours.
func stateOf(s gobreaker.State) State {
	switch s {
	case gobreaker.StateHalfOpen:
		return StateHalfOpen
	case gobreaker.StateOpen:
		return StateOpen
	}
	return StateClosed
}

// Counts are the request counters of the breaker's current state (in the
// closed state: of the window, see Config.BucketPeriod). They mirror
// gobreaker's Counts, except that ignored (Canceled) requests are not in
// them at all.
// It is a plain value, safe for concurrent use.
//
// In the closed state each bucket of the window keeps its own counts, and
// its own runs (the consecutive successes and failures it ends with, in the
// order they were reported), and a bucket leaving the window takes its
// counts with it. A run of the window loses the leaving bucket's run only if
// it reaches back into that bucket, which it is taken to do when it equals
// that bucket's run plus all the outcomes of its kind in the other buckets;
// so ConsecutiveFailures is exact for outcomes reported in the order their
// requests were admitted, and an approximation (gobreaker's) otherwise.
type Counts struct {
	// Requests is the number of admitted requests whose outcome is not
	// ignored, including those still in flight.
	Requests uint32
	// Successes is the number of outcomes counted as successes.
	Successes uint32
	// Failures is the number of outcomes counted as failures.
	Failures uint32
	// ConsecutiveSuccesses is the number of successes since the last
	// failure.
	ConsecutiveSuccesses uint32
	// ConsecutiveFailures is the number of failures since the last
	// success.
	ConsecutiveFailures uint32
}

// format formats the counts as space-separated key=value pairs.
func (c Counts) format() string {
	return fmt.Sprintf("requests=%d successes=%d failures=%d consecutive_successes=%d consecutive_failures=%d",
		c.Requests, c.Successes, c.Failures, c.ConsecutiveSuccesses, c.ConsecutiveFailures)
}

// countsOf maps gobreaker's counts to ours, leaving excluded requests out.
func countsOf(c gobreaker.Counts) Counts {
	requests := c.Requests - min(c.Requests, c.TotalExclusions)
	return Counts{
		Requests:             requests,
		Successes:            c.TotalSuccesses,
		Failures:             c.TotalFailures,
		ConsecutiveSuccesses: c.ConsecutiveSuccesses,
		ConsecutiveFailures:  c.ConsecutiveFailures,
	}
}

// The trip rules a Transition from closed to open gives as its Reason.
const (
	// ReasonFailureRatio: closed → open by the ratio rule: the window held
	// at least 6 × MinRequests outcomes and the share of failures reached
	// FailureRatio. When both trip rules hold at once, this one is given.
	ReasonFailureRatio = "failure_ratio"
	// ReasonConsecutiveFailures: closed → open by the burst rule: the
	// window's last ConsecutiveFailures outcomes failed, at least
	// MinRequests of them and at least a sixth of the window's outcomes.
	ReasonConsecutiveFailures = "consecutive_failures"
)

// The reasons of the other edges, which From and To tell already; they name
// the edge in logs and in Transition.String.
const (
	// reasonOpenTimeout: open → half-open, because OpenTimeout has
	// elapsed.
	reasonOpenTimeout = "open_timeout"
	// reasonProbeFailed: half-open → open, because a probe failed.
	reasonProbeFailed = "probe_failed"
	// reasonProbesSucceeded: half-open → closed, because HalfOpenProbes
	// probes succeeded.
	reasonProbesSucceeded = "probes_succeeded"
)

// Transition is one state change of a Breaker: safe facts only (no URLs,
// bodies, identifiers or credentials), fit to be stored as run evidence. It
// is a plain value, safe for concurrent use.
type Transition struct {
	// Name is the breaker's Config.Name.
	Name string
	// From is the state left.
	From State
	// To is the state entered.
	To State
	// Reason says why, for logs and for telling the trip rules apart: on
	// closed → open the rule that tripped, [ReasonFailureRatio] or
	// [ReasonConsecutiveFailures]; on the other edges, which From and To
	// identify, "open_timeout" (open → half-open, OpenTimeout elapsed),
	// "probe_failed" (half-open → open) or "probes_succeeded" (half-open →
	// closed, HalfOpenProbes probes succeeded).
	Reason string
	// At is when the breaker made the change. gobreaker evaluates
	// OpenTimeout lazily, so for open → half-open it is the first call at
	// or after OpenUntil, not necessarily the instant the timeout elapsed.
	At time.Time
	// Counts are the counts of the state left, including the outcome that
	// caused the change: the window's counts for closed → open, zero for
	// open → half-open (the open state admits and counts nothing), and the
	// probes that reported for half-open → open or closed (probes still in
	// flight are left out: their outcomes no longer count once the state
	// changed).
	Counts Counts
}

// String formats the transition for humans, without the time, e.g.
// `exchange: closed -> open (failure_ratio; requests=10 ...)`.
func (t Transition) String() string {
	return fmt.Sprintf("%s: %s -> %s (%s; %s)", t.Name, t.From, t.To, t.Reason, t.Counts.format())
}

// LogValue implements [slog.LogValuer]: the transition as a group of the
// same attributes the breaker logs (without the time, which the log record
// carries).
func (t Transition) LogValue() slog.Value {
	return slog.GroupValue(t.attrs()...)
}

// attrs are the structured attributes of a transition, in a fixed order.
func (t Transition) attrs() []slog.Attr {
	return []slog.Attr{
		slog.String("breaker", t.Name),
		slog.String("from", t.From.String()),
		slog.String("to", t.To.String()),
		slog.String("reason", t.Reason),
		slog.Uint64("requests", uint64(t.Counts.Requests)),
		slog.Uint64("successes", uint64(t.Counts.Successes)),
		slog.Uint64("failures", uint64(t.Counts.Failures)),
		slog.Uint64("consecutive_failures", uint64(t.Counts.ConsecutiveFailures)),
	}
}
