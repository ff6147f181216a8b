package aimd

import (
	"fmt"
	"time"
)

// Phase names where the controller is in its climb, for metrics and logs.
// Phase is a value; it is safe for concurrent use.
type Phase int

const (
	// PhaseStart is before the first response: the rate is Config.Initial.
	PhaseStart Phase = iota
	// PhaseSlowStart is the multiplicative climb before the first pressure.
	PhaseSlowStart
	// PhaseAdditive is the additive climb before the first pressure, when
	// Config.DisableSlowStart is set.
	PhaseAdditive
	// PhaseRecover is below the learned ceiling: the concave climb back.
	PhaseRecover
	// PhaseProbe is at or above the learned ceiling: the slow convex probe
	// for a grown limit (or holding at a ceiling declared by a Hint).
	PhaseProbe
)

// String returns the phase's name, e.g. "slow-start".
func (p Phase) String() string {
	switch p {
	case PhaseStart:
		return "start"
	case PhaseSlowStart:
		return "slow-start"
	case PhaseAdditive:
		return "additive"
	case PhaseRecover:
		return "recover"
	case PhaseProbe:
		return "probe"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Snapshot is the controller's state at one instant, for metrics. It is a
// value; it is safe for concurrent use.
type Snapshot struct {
	// Rate is the current rate, requests/s.
	Rate float64
	// Ceiling is the learned ceiling, requests/s: the rate at which the last
	// overshoot began (or a declared or measured quota; after a lone refusal
	// leaving slow start, the halved rate). Zero until the first pressure or
	// hint.
	Ceiling float64
	// PausedUntil is the pause end; see [Controller.PausedUntil].
	PausedUntil time.Time
	// Decreases counts the decreases so far: one per overshoot, not one per
	// refusal.
	Decreases uint64
	// Latency is the smoothed response latency; zero before any sample.
	Latency time.Duration
	// Phase is where the controller is in its climb.
	Phase Phase
}

// Snapshot returns the controller's current state.
func (c *Controller) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Snapshot{
		Rate:        c.rate,
		Ceiling:     c.ceiling,
		PausedUntil: c.pausedUntil,
		Decreases:   c.cuts,
		Latency:     time.Duration(c.latency * float64(time.Second)),
		Phase:       c.phase(),
	}
}

// phase derives the Phase from the state.
func (c *Controller) phase() Phase {
	switch {
	case !c.started:
		return PhaseStart
	case c.ceiling == 0 && c.cfg.DisableSlowStart:
		return PhaseAdditive
	case c.ceiling == 0:
		return PhaseSlowStart
	case c.rate < c.ceiling:
		return PhaseRecover
	}
	return PhaseProbe
}
