package budget

import (
	"testing"

	"github.com/forage-go/forage"
)

// TestClassReason: every class names the stop it causes.
func TestClassReason(t *testing.T) {
	t.Parallel()
	want := map[forage.Class]forage.Reason{
		forage.Success: "", forage.Throttled: forage.ReasonThrottled, forage.Overloaded: forage.ReasonUnavailable,
		forage.Transient: forage.ReasonUnavailable, forage.Permanent: forage.ReasonPermanent,
		forage.Canceled: forage.ReasonCanceled, forage.Class(42): forage.ReasonPermanent,
	}
	for c, r := range want {
		if got := stopReason(c); got != r {
			t.Errorf("stopReason(%v) = %q, want %q", c, got, r)
		}
	}
}
