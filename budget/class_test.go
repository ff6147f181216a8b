package budget_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// A stop carries its last attempt's error, which the host's attempt may
// have marked (forage.Mark(err, Transient) for a truncated body). Read
// with forage.Outcome.Class, the mark inside the stop was found first and
// hid the stop's own class: a spent request cap read as transient (retry
// now), a pause or an open breaker that ended the call read as the last
// attempt's failure, not as a refusal to wait out. The outermost error
// that classifies itself, or is marked, decides: the stop's class, or
// the host's mark on a stop.
func TestAStopsClassIsNotHiddenByItsLastAttemptsMark(t *testing.T) {
	t.Parallel()
	truncated := forage.Mark(errors.New("truncated body"), forage.Transient)
	for i, c := range []struct {
		err  error
		want forage.Class
	}{
		{&budget.Error{Reason: forage.ReasonRequestCap, Err: truncated}, forage.Canceled},
		{&budget.Error{Reason: forage.ReasonThrottled, Err: truncated}, forage.Throttled},
		{&budget.Error{Reason: forage.ReasonCircuitOpen, Err: truncated}, forage.Overloaded},
		{fmt.Errorf("fetching: %w", &budget.Error{Reason: forage.ReasonPaused, Err: truncated}), forage.Throttled},
		{forage.Mark(&budget.Error{Reason: forage.ReasonPaused}, forage.Permanent), forage.Permanent}, // the host's own word
		{&budget.Error{Reason: forage.ReasonUnavailable, Err: truncated}, forage.Transient},
	} {
		if got := (forage.Outcome{Err: c.err}).Class(); got != c.want {
			t.Errorf("case %d: %v: class %v; want %v", i, c.err, got, c.want)
		}
	}
}
