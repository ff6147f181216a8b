package checkpoint

import (
	"fmt"
	"time"
)

// Mode names one of a stream's two bookmarks. Catch-up (historical backfill)
// and steady-state (incremental) runs keep separate cursors, so a catch-up run
// never moves the steady-state cursor: merging the two would corrupt the
// incremental baseline and hide whether a stream is fully synced or only
// partly backfilled.
//
// The zero Mode is invalid, so a forgotten field is an error rather than a
// silent choice.
type Mode uint8

// The two modes a stream is collected in.
const (
	// CatchUp is historical backfill: from the oldest wanted point toward now.
	CatchUp Mode = iota + 1
	// SteadyState is incremental collection of new data as it appears.
	SteadyState
)

// Valid reports whether m is [CatchUp] or [SteadyState].
func (m Mode) Valid() bool { return m == CatchUp || m == SteadyState }

// String returns the mode's wire name: "catch_up" or "steady_state", or
// "Mode(n)" for an invalid value.
func (m Mode) String() string {
	switch m {
	case CatchUp:
		return "catch_up"
	case SteadyState:
		return "steady_state"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// parseMode returns the Mode whose wire name ([Mode.String]) is s. Any other
// string is an error wrapping [ErrInvalid].
func parseMode(s string) (Mode, error) {
	switch s {
	case "catch_up":
		return CatchUp, nil
	case "steady_state":
		return SteadyState, nil
	}
	return 0, fmt.Errorf("%w: unknown mode %q (want catch_up or steady_state)", ErrInvalid, s)
}

// MarshalText encodes m as its wire name; an invalid mode is an error.
func (m Mode) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w: cannot encode %v", ErrInvalid, m)
	}
	return []byte(m.String()), nil
}

// UnmarshalText decodes a wire name written by [Mode.MarshalText].
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := parseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Key names one bookmark: a stream in one mode.
type Key struct {
	// Stream identifies what is collected, e.g. "binance/BTC-USDT/1h". Any
	// non-empty string; the store treats it as opaque.
	Stream string
	// Mode selects the stream's catch-up or steady-state bookmark.
	Mode Mode
}

// String returns "stream/mode", for logs and error messages.
func (k Key) String() string { return k.Stream + "/" + k.Mode.String() }

// Checkpoint is one committed bookmark: where the next run of Key resumes.
type Checkpoint struct {
	// Key is the bookmark this checkpoint belongs to.
	Key Key
	// Cursor is the opaque resume position, as issued by the provider or
	// encoded by the host (a page token, a timestamp, an offset). The store
	// never interprets it. Empty before the first commit.
	Cursor []byte
	// Version counts the commits of Key: 0 means nothing was committed yet,
	// and each successful [Checkpoints.Commit] adds exactly one. It is the
	// value to pass as expect to the next Commit.
	Version int64
	// UpdatedAt is when the store accepted the commit, read from its clock.
	// Zero before the first commit.
	UpdatedAt time.Time
}

// Lease is an in-flight marker for a stream: while it is held, no other
// owner may run the stream. It is a value returned by [Leases.Acquire] and
// [Leases.Renew]; holding the struct proves nothing by itself, the store
// decides whether it is still current.
type Lease struct {
	// Stream is the leased stream.
	Stream string
	// Owner names the holder, e.g. "host-7/worker-2". Chosen by the caller.
	Owner string
	// Token is the fencing token: an epoch that grows with every grant for
	// Stream and is never reused, even after release. Commits present it so
	// that a holder which lost its lease cannot write over the new holder.
	// Zero means no lease (an unfenced commit).
	Token int64
	// Expires is when the lease stops excluding others: from then on another
	// owner may take it over with [Leases.Acquire].
	Expires time.Time
}

// Gap is a resumable hole a run left behind when it stopped early: budget
// exhaustion (a planned defer) or source pressure. A scheduler drains the
// unresolved gaps and resolves each once its range is collected.
type Gap struct {
	// ID identifies the gap. Assigned by [Gaps.AddGap]: positive, unique in
	// the store, increasing in the order gaps were added, never reused.
	ID int64
	// Key is the bookmark (stream and mode) the run was advancing.
	Key Key
	// Cursor is the last committed cursor at the stop point: where the
	// remainder resumes. May be empty (nothing committed yet).
	Cursor []byte
	// Range is the time range left uncollected, if known. The zero Range
	// means unknown; otherwise it must be non-empty.
	Range Range
	// Reason says why the run stopped: a reason of the root package's
	// vocabulary, e.g. "request_cap", "deadline", "throttled". A stop the
	// provider gave no answer for (unavailable, circuit_open: a refused
	// connection, a timeout) or refused for good (permanent)
	// adds ": " and
	// the cause, redacted, e.g. "unavailable: dial tcp 10.0.0.1:443:
	// connection refused"; group gaps by what comes before the first ':'.
	// The store keeps any non-empty string.
	Reason string
	// Created is when the store recorded the gap, read from its clock.
	// Assigned by AddGap.
	Created time.Time
}

// GapQuery selects unresolved gaps for [Gaps.ListGaps]. The zero GapQuery
// lists every unresolved gap.
type GapQuery struct {
	// Stream restricts the list to one stream. Empty means every stream.
	Stream string
	// Mode restricts the list to one mode. Zero means both modes.
	Mode Mode
	// After lists only gaps whose ID is greater, for keyset paging: pass the
	// last ID of the previous page. Zero means from the oldest gap.
	After int64
	// Limit caps the number of gaps returned. Zero means no cap. It is a
	// transport batch, not a stopping condition: drain by paging until a
	// page comes back empty.
	Limit int
}
