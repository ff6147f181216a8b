package budget_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/retry"
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
		}, budget.CallOption{NoRetry: true})
		run := newRun(t, budget.Envelope{MinRetries: retry.NoRetries})
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

// TestSpreadingAnAnnouncedQuotaIsNoRateCut: a provider that announces a
// window quota (100 per minute, what is left and when it resets) and
// refuses nothing has the rest of its window spread evenly, which lowers
// the rate a little on most responses. None of that is pressure: no Info
// "rate cut" record (there was one every second or two, ceiling 0), only
// Debug "rate lowered" ones.
func TestSpreadingAnAnnouncedQuotaIsNoRateCut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		cfg := fast()
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
		p := newLocal(t, cfg)
		start, left := time.Now(), 100
		for range 40 {
			_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
				left--
				reset := time.Minute - time.Since(start)
				return forage.Outcome{Status: 200, Quota: forage.Quota{Limit: 100, Remaining: float64(left), HasLimit: true, HasRemaining: true, HasReset: true,
					Reset: reset.Truncate(time.Second) + time.Second, Window: time.Minute}}
			})
		}
		logs := out.String()
		if strings.Contains(logs, `msg="budget: rate cut"`) || !strings.Contains(logs, `level=DEBUG msg="budget: rate lowered"`) {
			t.Errorf("a quota spread over its window, nothing refused, logged as:\n%s", logs)
		}
	})
}

// TestAPauseClampedToMaxPauseIsNamed: a refusal asking for more than
// MaxPause (a garbage "Retry-After: 1000000000000000000") pauses for
// MaxPause, and says so in a Warn record with what it asked: the Info
// record of a one-hour pause alone did not tell an operator a provider
// that meant an hour from one whose header was clamped to it.
func TestAPauseClampedToMaxPauseIsNamed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		cfg := fast()
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
		p := newLocal(t, cfg)
		_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 429, RetryAfter: 72 * time.Hour}
		})
		logs := out.String()
		for _, want := range []string{
			`level=WARN msg="budget: a pause longer than MaxPause asked; paused for MaxPause"`, `asked=72h0m0s`, `max_pause=1h0m0s`, `status=429`,
			`level=INFO msg="budget: provider paused"`, `for=1h0m0s`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %s:\n%s", want, logs)
			}
		}
		out.Reset()
		_ = newLocal(t, cfg).Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 200, RetryAfter: 72 * time.Hour} // pauses nothing
		})
		if strings.Contains(out.String(), "MaxPause") {
			t.Errorf("a Retry-After on a success, which pauses nothing, logged as clamped:\n%s", out.String())
		}
	})
}

// TestASpentQuotasResetClampedToMaxPauseIsNamed: a spent quota whose
// reset is longer than MaxPause (a reset sent in milliseconds and read
// as seconds: 60000 is 16h40m) is clamped and logged at Warn with what
// it asked, as a Retry-After is; it was clamped silently, the provider
// paused an hour by an Info line that hid what the header said. One
// answer that asks both ways is one Warn line.
func TestASpentQuotasResetClampedToMaxPauseIsNamed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		cfg := fast()
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
		spent := forage.Quota{Limit: 100, HasLimit: true, HasRemaining: true, Reset: 60000 * time.Second, HasReset: true}
		_ = newLocal(t, cfg).Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 200, Quota: spent}
		})
		logs := out.String()
		for _, want := range []string{
			`level=WARN msg="budget: a pause longer than MaxPause asked; paused for MaxPause"`, `asked=16h40m0s`, `max_pause=1h0m0s`, `status=200`,
			`level=INFO msg="budget: provider paused"`, `for=1h0m0s`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %s:\n%s", want, logs)
			}
		}
		out.Reset()
		_ = newLocal(t, cfg).Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 429, RetryAfter: 72 * time.Hour, Quota: spent}
		})
		if n := strings.Count(out.String(), "MaxPause asked"); n != 1 {
			t.Errorf("an answer whose Retry-After and spent quota both ask past MaxPause logged %d Warn lines, want 1:\n%s", n, out.String())
		}
		out.Reset()
		_ = newLocal(t, cfg).Do(context.Background(), nil, func(context.Context) forage.Outcome {
			q := spent
			q.Remaining, q.Reset = 5, 72*time.Hour // not spent: pauses nothing
			return forage.Outcome{Status: 200, Quota: q}
		})
		if strings.Contains(out.String(), "MaxPause") {
			t.Errorf("a quota not spent, which pauses nothing, logged as clamped:\n%s", out.String())
		}
	})
}

// TestASpentRetryBudgetIsLoggedNowAndThen: calls the retry budget stops,
// one after another, log one Warn line every 10 s per provider, which
// counts the calls stopped since the line before (a host whose provider
// kept failing logged a line per call).
func TestASpentRetryBudgetIsLoggedNowAndThen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		cfg := fast()
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
		p := newLocal(t, cfg)
		run := newRun(t, budget.Envelope{MinRetries: retry.NoRetries, RetryRatio: retry.NoRetries})
		failing := func(context.Context) forage.Outcome { return forage.Outcome{Status: 500} }
		for range 30 {
			_ = p.Do(context.Background(), run, failing)
			time.Sleep(time.Second)
		}
		logs := out.String()
		const msg = `msg="budget: retry budget spent; the call stops without retrying"`
		if n := strings.Count(logs, msg); n < 3 || n > 4 {
			t.Fatalf("%d lines for 30 calls stopped over 30 s; want 3 or 4:\n%s", n, logs)
		}
		if !strings.Contains(logs, "calls=1\n") || !strings.Contains(logs, "calls=10\n") {
			t.Fatalf("the lines do not count the calls stopped since the one before:\n%s", logs)
		}
	})
}

// TestARetryIsLoggedAtDebug: a failure that is tried again (a 502, a body
// the fetcher could not decode) leaves a Debug record naming the attempt,
// the class, the status and the error, redacted; it was seen only in the
// counters, so garbage could not be told from an outage in the logs.
func TestARetryIsLoggedAtDebug(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		cfg := fast()
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
		p := newLocal(t, cfg)
		calls := 0
		err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			if calls++; calls == 1 {
				return forage.Outcome{Status: 200, Err: forage.Mark(errors.New("decode GET /events?apikey=s3cr3t: unexpected EOF"), forage.Transient)}
			}
			return forage.Outcome{Status: 200}
		})
		if err != nil || calls != 2 {
			t.Fatalf("Do = %v after %d calls; want nil after 2", err, calls)
		}
		logs := out.String()
		for _, want := range []string{`level=DEBUG msg="budget: retrying"`, `attempt=1`, `class=transient`, `status=200`, `unexpected EOF`} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %s:\n%s", want, logs)
			}
		}
		if strings.Contains(logs, "s3cr3t") {
			t.Errorf("a secret logged:\n%s", logs)
		}
	})
}
