package budget_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// TestProviderEventsAreLogged: a provider is not silent about what it
// does to its calls: a pause the provider imposed (with its end and
// reason) and the rate cut after a refusal are Info records, a call
// stopped by a spent retry budget is a Warn record, each naming the
// provider; a nil Logger stays silent.
func TestProviderEventsAreLogged(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		cfg := fast()
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
		p := newLocal(t, cfg)
		ok := func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} }
		for range 20 {
			_ = p.Do(context.Background(), nil, ok)
		}
		_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 429, RetryAfter: 2 * time.Second}
		}, budget.NoRetry())
		run := newRun(t, budget.Envelope{MinRetries: budget.NoRetries})
		_ = p.Do(context.Background(), run, func(context.Context) forage.Outcome { return forage.Outcome{Status: 503} })
		logs := out.String()
		for _, want := range []string{
			`level=INFO msg="budget: provider paused"`, `reason=throttled`, `for=2s`,
			`level=INFO msg="budget: rate cut"`,
			`level=WARN msg="budget: retry budget spent; the call stops without retrying"`, `status=503`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %s:\n%s", want, logs)
			}
		}
		if strings.Count(logs, "provider=") != strings.Count(logs, "\n") {
			t.Errorf("a record without the provider's key:\n%s", logs)
		}
	})
}
