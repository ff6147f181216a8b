// Package scripted is the run every metrics adapter's test exports: one
// provider, successes, a retried 503, a 429 with Retry-After, a 500 that
// opens the breaker and a call it refuses. Run it inside a synctest bubble
// so its latencies and waits are exact.
package scripted

import (
	"context"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/breaker"
	"github.com/forage-go/forage/budget"
)

// answers returns an attempt that takes latency and answers the codes in
// turn (the last one again once they run out), with retryAfter on a 429.
func answers(latency, retryAfter time.Duration, codes ...int) func(context.Context) forage.Outcome {
	i := 0
	return func(context.Context) forage.Outcome {
		time.Sleep(latency)
		c := codes[min(i, len(codes)-1)]
		i++
		o := forage.Outcome{Status: c}
		if c == 429 {
			o.RetryAfter = retryAfter
		}
		return o
	}
}

// Run runs the scripted calls against a provider keyed
// api.example.com that reports to m: three successes, a 503 retried to a
// success, a 429 with Retry-After 1s, a 500 that opens the breaker (two
// failures in a row), and a call the open breaker refuses. The 429 cuts
// the rate; the 503, alone in slow start (see aimd), and the 500
// (transient) do not.
func Run(t testing.TB, m budget.Metrics) {
	t.Helper()
	p, err := budget.NewLocal("api.example.com", budget.Config{
		Adaptive:       aimd.Config{Initial: 10, Max: 10},
		Breaker:        breaker.Config{MinRequests: 2},
		AttemptTimeout: budget.NoTimeout,
		Metrics:        m,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if err := p.Do(ctx, nil, answers(20*time.Millisecond, 0, 200)); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		attempt func(context.Context) forage.Outcome
		want    forage.Reason // "" for success
	}{
		{answers(20*time.Millisecond, 0, 503, 200), ""},
		{answers(20*time.Millisecond, time.Second, 429), forage.ReasonThrottled},
		{answers(20*time.Millisecond, 0, 500), forage.ReasonUnavailable},
		{answers(20*time.Millisecond, 0, 200), forage.ReasonCircuitOpen},
	}
	for i, s := range steps {
		var opts []budget.CallOption
		if i > 0 {
			opts = append(opts, budget.CallOption{NoRetry: true}) // the 503 alone is retried
		}
		err := p.Do(ctx, nil, s.attempt, opts...)
		if r, _ := budget.ReasonOf(err); r != s.want {
			t.Fatalf("step %d: stop reason %q (err %v), want %q", i, r, err, s.want)
		}
	}
}
