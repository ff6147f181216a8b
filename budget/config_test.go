package budget_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/retry"
)

// TestConfigErrorsNameTheField: each bad field of a Config or an Envelope is
// an error that reads "budget: <Struct>.<Field> …" and wraps
// budget.ErrInvalidConfig (and, for a nested Config, that package's too).
func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		cfg    budget.Config
		want   string
		nested error
	}{
		{budget.Config{Burst: -1}, "budget: Config.Burst must be >= 0 (got -1)", nil},
		{budget.Config{AttemptTimeout: -2}, "budget: Config.AttemptTimeout must be >= 0 or NoTimeout (got -2ns)", nil},
		{budget.Config{MaxInFlight: -1}, "budget: Config.MaxInFlight must be >= 0 (got -1)", nil},
		{budget.Config{MaxAttempts: -1}, "budget: Config.MaxAttempts must be >= 0 (got -1)", nil},
		{budget.Config{MaxWait: -time.Second}, "budget: Config.MaxWait must be >= 0 (got -1s)", nil},
		{budget.Config{MaxPause: -time.Second}, "budget: Config.MaxPause must be >= 0 (got -1s)", nil},
		{budget.Config{Limits: []budget.Limit{{Count: 0, Per: time.Second}}}, "budget: Config.Limits[0].Count must be > 0 (got 0)", nil},
		{budget.Config{Adaptive: aimd.Config{Decrease: 2}}, "budget: Config.Adaptive: aimd: Config.Decrease must be in (0, 1) (got 2)", aimd.ErrInvalidConfig},
		{budget.Config{Breaker: breaker.Config{FailureRatio: 2}}, "budget: Config.Breaker: breaker: Config.FailureRatio must be in (0, 1] (got 2)", breaker.ErrInvalidConfig},
		{budget.Config{Backoff: retry.BackoffConfig{Base: -1}}, "budget: Config.Backoff: retry: BackoffConfig.Base must be in [0, 24h] (got -1ns)", retry.ErrInvalidConfig},
	} {
		_, err := budget.NewLocal("p", tc.cfg)
		if err == nil || err.Error() != tc.want || !errors.Is(err, budget.ErrInvalidConfig) {
			t.Errorf("case %d: NewLocal = %v, want %q wrapping budget.ErrInvalidConfig", i, err, tc.want)
		}
		if tc.nested != nil && !errors.Is(err, tc.nested) {
			t.Errorf("case %d: %v does not wrap %v", i, err, tc.nested)
		}
	}
	for i, env := range []budget.Envelope{{MaxRequests: -1}, {RetryRatio: 2}, {MinRetries: -2}} {
		_, err := budget.NewRun(env)
		if err == nil || !strings.HasPrefix(err.Error(), "budget: Envelope.") || !errors.Is(err, budget.ErrInvalidConfig) {
			t.Errorf("envelope %d: NewRun(%+v) = %v, want budget: Envelope.<Field> wrapping ErrInvalidConfig", i, env, err)
		}
	}
}

// TestMaxAttemptsOneTurnsRetriesOff: MaxAttempts 1, the documented off
// value, makes one attempt per call however retryable its failure.
func TestMaxAttemptsOneTurnsRetriesOff(t *testing.T) {
	t.Parallel()
	cfg := fast()
	cfg.MaxAttempts = 1
	n := 0
	err := newLocal(t, cfg).Do(context.Background(), nil, func(context.Context) forage.Outcome {
		n++
		return forage.Outcome{Status: 503}
	})
	if err == nil || n != 1 {
		t.Fatalf("Do with MaxAttempts 1 against 503s: %d attempts, err %v; want 1 attempt and an error", n, err)
	}
}
