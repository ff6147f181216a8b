package budget_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
		{budget.Config{MaxPause: -time.Second}, "budget: Config.MaxPause must be 0 (the default) or >= 1s (got -1s)", nil},
		{budget.Config{MaxPause: time.Nanosecond}, "budget: Config.MaxPause must be 0 (the default) or >= 1s (got 1ns)", nil}, // it cut every Retry-After to nothing
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

// TestBadArgumentsAreErrorsNotPanics: a key no provider may have (empty,
// or with a control character: keys are printed in logs and on the status
// page), a nil attempt and a negative weight are errors naming what is
// wrong, with no attempt made; a Transport over a nil Registry has one of
// its own. Each of these panicked or was taken silently.
func TestBadArgumentsAreErrorsNotPanics(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", "a\nb", "tab\there", "\xff"} {
		if _, err := budget.NewLocal(key, budget.Config{}); err == nil || !errors.Is(err, budget.ErrInvalidConfig) || !strings.Contains(err.Error(), "key must be") {
			t.Errorf("NewLocal(%q) = %v, want an error naming the key, wrapping ErrInvalidConfig", key, err)
		}
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if p, err := reg.Get(key); err == nil || p != nil {
			t.Errorf("Registry.Get(%q) = %v, %v; want no provider and an error", key, p, err)
		}
		if _, err := budget.NewRegistry(budget.RegistryConfig{Overrides: map[string]budget.Config{key: {}}}); err == nil || !strings.Contains(err.Error(), "RegistryConfig.Overrides") {
			t.Errorf("NewRegistry with Overrides[%q] = %v, want an error naming it", key, err)
		}
	}
	p := newLocal(t, fast())
	if err := p.Do(context.Background(), nil, nil); err == nil {
		t.Error("Do with a nil attempt: no error")
	} else if r, _ := budget.ReasonOf(err); r != forage.ReasonPermanent {
		t.Errorf("Do with a nil attempt: %v, want a permanent stop", err)
	}
	calls := 0
	err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome { calls++; return forage.Outcome{Status: 200} }, budget.CallOption{Weight: -3})
	if !errors.Is(err, budget.ErrInvalidConfig) || calls != 0 {
		t.Errorf("Do with Weight -3: %v after %d attempts, want ErrInvalidConfig and none", err, calls)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	resp, err := (&http.Client{Transport: budget.NewTransport(nil, nil)}).Get(srv.URL)
	if err != nil {
		t.Fatalf("a Transport over a nil Registry: %v", err)
	}
	resp.Body.Close()
}
