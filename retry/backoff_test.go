package retry_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/forage-go/forage/retry"
)

func TestNewBackoffValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  retry.BackoffConfig
		want string // substring of the error; "" means valid
	}{
		{"zero is all defaults", retry.BackoffConfig{}, ""},
		{"base above default cap", retry.BackoffConfig{Base: time.Minute}, ""},
		{"base equals cap", retry.BackoffConfig{Base: time.Second, Cap: time.Second}, ""},
		{"day", retry.BackoffConfig{Base: 24 * time.Hour, Cap: 24 * time.Hour}, ""},
		{"base negative", retry.BackoffConfig{Base: -time.Second}, "retry: BackoffConfig.Base must be in [0, 24h] (got -1s)"},
		{"base absurd", retry.BackoffConfig{Base: 25 * time.Hour}, "BackoffConfig.Base"},
		{"cap negative", retry.BackoffConfig{Cap: -1}, "retry: BackoffConfig.Cap must be in [0, 24h] (got -1ns)"},
		{"cap absurd", retry.BackoffConfig{Cap: math.MaxInt64}, "BackoffConfig.Cap"},
		{"cap below base", retry.BackoffConfig{Base: time.Second, Cap: time.Millisecond}, "retry: BackoffConfig.Cap must be >= Base (1s) (got 1ms)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := retry.NewBackoff(tt.cfg)
			if tt.want == "" {
				if err != nil || b == nil {
					t.Fatalf("NewBackoff(%+v) = %v, %v; want a backoff", tt.cfg, b, err)
				}
				return
			}
			if err == nil || !errors.Is(err, retry.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewBackoff(%+v) error = %v; want ErrInvalidConfig containing %q", tt.cfg, err, tt.want)
			}
		})
	}
}

func TestBackoffCeiling(t *testing.T) {
	t.Parallel()
	b := mustBackoff(t, retry.BackoffConfig{})
	tests := []struct {
		n    int
		want time.Duration
	}{
		{-5, 100 * time.Millisecond},
		{0, 100 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{7, 12800 * time.Millisecond},
		{8, 20 * time.Second},
		{62, 20 * time.Second},
		{63, 20 * time.Second},
		{64, 20 * time.Second},
		{math.MaxInt, 20 * time.Second},
	}
	for _, tt := range tests {
		if got := retry.Ceiling(b, tt.n); got != tt.want {
			t.Errorf("Ceiling(%d) = %v; want %v", tt.n, got, tt.want)
		}
	}
}

// modelCeiling is min(cap, base·2^n) in floating point, exact here because
// every duration involved is below 2^53 ns and a power-of-two product is
// exact (or +Inf, which compares as larger than cap).
func modelCeiling(base, ceiling time.Duration, n int) time.Duration {
	if float64(base)*math.Pow(2, float64(n)) >= float64(ceiling) {
		return ceiling
	}
	return base << n
}

// TestBackoffFullJitterBounds: every sleep is in [0, min(Cap, Base·2^n)] for
// the n-th call since the last Reset, for any Base, Cap and random values,
// including faulty sources (NaN, negative, ≥ 1) and hundreds of calls.
func TestBackoffFullJitterBounds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		day := int64(24 * time.Hour)
		base := time.Duration(rapid.Int64Range(1, day).Draw(rt, "base"))
		ceiling := time.Duration(rapid.Int64Range(int64(base), day).Draw(rt, "cap"))
		us := rapid.SliceOfN(rapid.OneOf(
			rapid.Float64Range(0, 1),
			rapid.SampledFrom([]float64{math.NaN(), -1, 1, math.Nextafter(1, 0), 2, math.Inf(1), math.Inf(-1)}),
		), 1, 300).Draw(rt, "rand")
		i := 0
		b := mustBackoff(rt, retry.BackoffConfig{Base: base, Cap: ceiling, Rand: func() float64 { u := us[i%len(us)]; i++; return u }})
		n := 0
		for step := range len(us) {
			if step%97 == 96 {
				b.Reset()
				n = 0
			}
			want := modelCeiling(base, ceiling, n)
			if got := retry.Ceiling(b, n); got != want {
				rt.Fatalf("step %d: Ceiling(%d) = %v; want %v", step, n, got, want)
			}
			u := us[step]
			d := b.NextBackOff()
			if d < 0 || d > want {
				rt.Fatalf("step %d: NextBackOff() = %v with rand %v; want in [0, %v]", step, d, u, want)
			}
			if u >= 0 && u < 1 && d != min(time.Duration(u*float64(want)), want) {
				rt.Fatalf("step %d: NextBackOff() = %v with rand %v; want %v·%v", step, d, u, u, want)
			}
			n++
		}
	})
}

func TestBackoffSequence(t *testing.T) {
	t.Parallel()
	b := mustBackoff(t, retry.BackoffConfig{Base: 100 * time.Millisecond, Cap: time.Second, Rand: func() float64 { return 0.5 }})
	var got []time.Duration
	for range 6 {
		got = append(got, b.NextBackOff())
	}
	b.Reset()
	got = append(got, b.NextBackOff())
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 50 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("sleeps (-want +got):\n%s", diff)
	}
}

// TestBackoffFullJitterSpread is why full jitter: at the same retry, its
// sleeps cover the whole [0, ceiling] range, while the library's
// ExponentialBackOff with its default RandomizationFactor 0.5 keeps every
// sleep within ±50% of the interval, never near zero.
func TestBackoffFullJitterSpread(t *testing.T) {
	t.Parallel()
	const samples = 10_000
	src := rand.New(rand.NewPCG(1, 2))
	full := mustBackoff(t, retry.BackoffConfig{Base: time.Second, Cap: time.Second, Rand: src.Float64})
	lib := backoff.NewExponentialBackOff(backoff.WithInitialInterval(time.Second), backoff.WithMaxElapsedTime(0))
	var fullLow, libLow int
	for range samples {
		full.Reset()
		lib.Reset()
		if full.NextBackOff() < 100*time.Millisecond {
			fullLow++
		}
		if lib.NextBackOff() < 100*time.Millisecond {
			libLow++
		}
	}
	if fullLow < samples/20 || fullLow > samples/5 { // expect ≈ 10%
		t.Errorf("full jitter: %d of %d sleeps below 10%% of the ceiling; want about 10%%", fullLow, samples)
	}
	if libLow != 0 {
		t.Errorf("ExponentialBackOff: %d of %d sleeps below 10%% of the interval; want 0 (it jitters ±50%%)", libLow, samples)
	}
}

func TestFloorOfNextBackOff(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		us := rapid.SliceOfN(rapid.Float64Range(0, 1), 1, 50).Draw(rt, "rand")
		ras := rapid.SliceOfN(rapid.Int64Range(-int64(time.Minute), int64(time.Minute)), len(us), len(us)).Draw(rt, "retryAfter")
		src := func() func() float64 {
			i := 0
			return func() float64 { u := us[i]; i++; return u }
		}
		floored := mustBackoff(rt, retry.BackoffConfig{Rand: src()})
		plain := mustBackoff(rt, retry.BackoffConfig{Rand: src()})
		for i := range us {
			ra := time.Duration(ras[i])
			jitter := plain.NextBackOff()
			got := retry.Floor(floored.NextBackOff(), ra)
			if got != max(jitter, ra) || got < ra || got < jitter {
				rt.Fatalf("call %d: Floor(NextBackOff(), %v) = %v with jitter %v; want max of both", i, ra, got, jitter)
			}
		}
	})
}

func TestFloor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sleep, retryAfter, want time.Duration
	}{
		{time.Second, 0, time.Second},
		{time.Second, -time.Hour, time.Second},
		{time.Second, 5 * time.Second, 5 * time.Second},
		{5 * time.Second, time.Second, 5 * time.Second},
		{0, time.Second, time.Second},
		{backoff.Stop, time.Hour, backoff.Stop},
		{backoff.Stop, 0, backoff.Stop},
	}
	for _, tt := range tests {
		if got := retry.Floor(tt.sleep, tt.retryAfter); got != tt.want {
			t.Errorf("Floor(%v, %v) = %v; want %v", tt.sleep, tt.retryAfter, got, tt.want)
		}
	}
}

// TestBackoffWithMaxRetries: Backoff composes with the library's wrappers;
// WithMaxRetries stops it and its Reset restarts the exponent.
func TestBackoffWithMaxRetries(t *testing.T) {
	t.Parallel()
	b := mustBackoff(t, retry.BackoffConfig{Base: time.Second, Cap: time.Minute, Rand: func() float64 { return 0.5 }})
	capped := backoff.WithMaxRetries(b, 3)
	var got []time.Duration
	for range 5 {
		got = append(got, capped.NextBackOff())
	}
	capped.Reset()
	got = append(got, capped.NextBackOff())
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, backoff.Stop, backoff.Stop, 500 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("WithMaxRetries(Backoff, 3) sleeps (-want +got):\n%s", diff)
	}
}

// TestBackoffRetrySleeps runs backoff.Retry with real timers in a synctest
// bubble: the operation is retried after exactly the sleeps the Backoff
// returned, in fake time.
func TestBackoffRetrySleeps(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := rand.New(rand.NewPCG(7, 7))
		b := mustBackoff(t, retry.BackoffConfig{Base: time.Second, Cap: 10 * time.Second, Rand: src.Float64})
		start := time.Now()
		var calls []time.Duration // time of each call since start
		var sleeps []time.Duration
		op := func() error {
			calls = append(calls, time.Since(start))
			if len(calls) < 5 {
				return errors.New("flaky")
			}
			return nil
		}
		if err := backoff.RetryNotify(op, b, func(_ error, d time.Duration) { sleeps = append(sleeps, d) }); err != nil {
			t.Fatalf("Retry: %v", err)
		}
		var at time.Duration
		want := []time.Duration{0}
		for _, d := range sleeps {
			at += d
			want = append(want, at)
		}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Fatalf("call times (-want +got), sleeps %v:\n%s", sleeps, diff)
		}
	})
}

func TestBackoffAllocs(t *testing.T) {
	b := mustBackoff(t, retry.BackoffConfig{})
	if n := testing.AllocsPerRun(1000, func() { retry.Floor(b.NextBackOff(), time.Second) }); n != 0 {
		t.Fatalf("Floor(NextBackOff()) allocates %v times; want 0", n)
	}
}

func BenchmarkBackoffNext(b *testing.B) {
	bo := mustBackoff(b, retry.BackoffConfig{})
	b.ReportAllocs()
	for b.Loop() {
		bo.NextBackOff()
	}
}

func mustBackoff(tb fataler, cfg retry.BackoffConfig) *retry.Backoff {
	tb.Helper()
	b, err := retry.NewBackoff(cfg)
	if err != nil {
		tb.Fatalf("NewBackoff(%+v): %v", cfg, err)
	}
	return b
}

// TestNoJitterSleepsTheCeiling: with Rand set to NoJitter every sleep is
// exactly its ceiling, min(Cap, Base·2^n).
func TestNoJitterSleepsTheCeiling(t *testing.T) {
	t.Parallel()
	b, err := retry.NewBackoff(retry.BackoffConfig{Base: 100 * time.Millisecond, Cap: time.Second, Rand: retry.NoJitter})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second} {
		if got := b.NextBackOff(); got != want {
			t.Fatalf("step %d: sleep %v, want the ceiling %v", i, got, want)
		}
	}
}
