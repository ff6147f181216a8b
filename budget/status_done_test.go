package budget_test

import (
	"context"
	"errors"
	"testing"

	"github.com/forage-go/forage/budget"
)

// TestASetStatusWhoseContextIsDoneAppliesNothing: a pause asked with a
// context already done is refused and applies nothing, every time. (With
// the key's turn free, the select between taking it and the done context
// chose at random: the pause was applied about one call in two.)
func TestASetStatusWhoseContextIsDoneAppliesNothing(t *testing.T) {
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Get("api.example.com"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		err := reg.SetStatus(ctx, "api.example.com", budget.StatusPaused, "maintenance")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("call %d: err %v; want context.Canceled", i, err)
		}
		p, _ := reg.Get("api.example.com")
		if st := p.Snapshot().Status; st != budget.StatusActive {
			t.Fatalf("call %d: status %q after a refused pause; want %q", i, st, budget.StatusActive)
		}
	}
}
