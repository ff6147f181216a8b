package budget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// brokenPacer is a host pacer whose backend is gone (a shared pacer's
// database unreachable).
type brokenPacer struct{ err error }

func (b brokenPacer) WaitN(context.Context, int) error { return b.err }
func (brokenPacer) SetRate(float64) error              { return nil }
func (brokenPacer) PauseUntil(time.Time)               {}

// TestFailingPacerIsNotAProviderVerdict: when the host's pacer fails, no
// request is sent and the stop says the pacer failed (ReasonPacer, its
// error kept), not that the provider refused the request: a collector must
// not record a permanent refusal for a database blip.
func TestFailingPacerIsNotAProviderVerdict(t *testing.T) {
	t.Parallel()
	down := errors.New("pacer database unreachable")
	p, err := budget.NewLocal("p", budget.Config{Pacer: brokenPacer{down}})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	err = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
		calls++
		return forage.Outcome{Status: 200}
	})
	r, ok := budget.ReasonOf(err)
	if !ok || r != forage.ReasonPacer || !errors.Is(err, down) || calls != 0 {
		t.Fatalf("Do = %v (reason %q) after %d attempts; want reason pacer wrapping the pacer's error, none sent", err, r, calls)
	}
	if r.SourcePressure() || r.Exhausted() {
		t.Fatalf("reason %q counts as pressure or exhaustion", r)
	}
}
