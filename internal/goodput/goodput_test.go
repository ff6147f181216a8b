package goodput_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage/internal/goodput"
	"github.com/forage-go/forage/providertest"
)

// TestScenariosAreValid: every standard scenario builds a server, and the
// halving one allows half the rate in the run's second half.
func TestScenariosAreValid(t *testing.T) {
	t.Parallel()
	run := 5 * time.Minute
	sc := goodput.Scenarios(50, 40*time.Millisecond, run)
	if len(sc) != 8 {
		t.Fatalf("%d scenarios, want 8", len(sc))
	}
	for _, s := range sc {
		if _, err := providertest.New(s.Config); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	if got, want := sc[7].Allowed(run), 50*150.0+25*150.0; got != want {
		t.Fatalf("%s allowed %v, want %v", sc[7].Name, got, want)
	}
	if got := sc[0].Allowed(run); got != 50*300 {
		t.Fatalf("%s allowed %v, want 15000", sc[0].Name, got)
	}
}
