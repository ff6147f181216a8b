package retry_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/retry"
)

func TestNewBudgetValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  retry.BudgetConfig
		want string // substring of the error; "" means valid
	}{
		{"zero is all defaults", retry.BudgetConfig{}, ""},
		{"ratio one", retry.BudgetConfig{Ratio: 1}, ""},
		{"ratio none", retry.BudgetConfig{Ratio: retry.NoRetries}, ""},
		{"floor none", retry.BudgetConfig{MinRetries: retry.NoRetries}, ""},
		{"max equals floor", retry.BudgetConfig{MinRetries: 7, Max: 7}, ""},
		{"floor above default max", retry.BudgetConfig{MinRetries: 500}, ""},
		{"ratio above one", retry.BudgetConfig{Ratio: 1.5}, "retry: BudgetConfig.Ratio must be in [1e-9, 1], 0 or NoRetries (got 1.5)"},
		{"ratio negative", retry.BudgetConfig{Ratio: -0.5}, "BudgetConfig.Ratio"},
		{"ratio NaN", retry.BudgetConfig{Ratio: math.NaN()}, "BudgetConfig.Ratio"},
		{"ratio too fine", retry.BudgetConfig{Ratio: 1e-12}, "BudgetConfig.Ratio"},
		{"floor negative", retry.BudgetConfig{MinRetries: -2}, "retry: BudgetConfig.MinRetries must be in [0, 1000000] or NoRetries (got -2)"},
		{"floor absurd", retry.BudgetConfig{MinRetries: 2_000_000}, "BudgetConfig.MinRetries"},
		{"max negative", retry.BudgetConfig{Max: -1}, "retry: BudgetConfig.Max must be in [1, 1000000] (got -1)"},
		{"max absurd", retry.BudgetConfig{Max: 1 << 40}, "BudgetConfig.Max"},
		{"max below floor", retry.BudgetConfig{MinRetries: 10, Max: 5}, "retry: BudgetConfig.Max must be >= MinRetries (10) (got 5)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := retry.NewBudget(tt.cfg)
			if tt.want == "" {
				if err != nil || b == nil {
					t.Fatalf("NewBudget(%+v) = %v, %v; want a budget", tt.cfg, b, err)
				}
				return
			}
			if err == nil || !errors.Is(err, retry.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewBudget(%+v) error = %v; want ErrInvalidConfig containing %q", tt.cfg, err, tt.want)
			}
		})
	}
}

func TestBudgetDefaults(t *testing.T) {
	t.Parallel()
	b := mustBudget(t, retry.BudgetConfig{})
	if got := b.Stats().Tokens; got != 3 {
		t.Fatalf("fresh budget holds %v tokens; want the floor %d", got, 3)
	}
	for i := range 10_000 {
		b.Deposit()
		if b.Stats().Tokens > 100 {
			t.Fatalf("after %d deposits the budget holds %v tokens; want <= %d", i+1, b.Stats().Tokens, 100)
		}
	}
	if got := b.Stats().Tokens; got != 100 {
		t.Fatalf("after 10000 deposits the budget holds %v tokens; want the cap %d", got, 100)
	}
	// Five first attempts at the default ratio 0.2 earn exactly one retry.
	b = mustBudget(t, retry.BudgetConfig{MinRetries: retry.NoRetries})
	for range 4 {
		b.Deposit()
	}
	if b.Withdraw() {
		t.Fatalf("4 deposits at ratio 0.2 (%v tokens) granted a retry", b.Stats().Tokens)
	}
	b.Deposit()
	if !b.Withdraw() {
		t.Fatalf("5 deposits at ratio 0.2 (%v tokens) granted no retry", b.Stats().Tokens)
	}
}

func TestBudgetNoRetries(t *testing.T) {
	t.Parallel()
	b := mustBudget(t, retry.BudgetConfig{Ratio: retry.NoRetries, MinRetries: retry.NoRetries})
	for range 1000 {
		b.Deposit()
	}
	if b.Withdraw() {
		t.Fatalf("Withdraw on a budget with no ratio and no floor granted a retry")
	}
	if b.Stats().Attempts != 1000 || b.Stats().Retries != 0 || b.Stats().Denied != 1 {
		t.Fatalf("counters = %d attempts, %d retries, %d denied; want 1000, 0, 1", b.Stats().Attempts, b.Stats().Retries, b.Stats().Denied)
	}
}

// TestBudgetModel checks the budget against an exact model in thousandths
// of a token, over random sequences of deposits and withdrawals: every
// decision matches, the balance stays in [0, Max], and the retries granted
// never exceed Ratio·attempts + MinRetries.
func TestBudgetModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		ratioMilli := rapid.IntRange(1, 1000).Draw(rt, "ratioMilli")
		floor := rapid.IntRange(0, 10).Draw(rt, "minRetries")
		maxTokens := rapid.IntRange(max(floor, 1), 50).Draw(rt, "max")
		cfg := retry.BudgetConfig{Ratio: float64(ratioMilli) / 1000, MinRetries: floor, Max: maxTokens}
		if floor == 0 {
			cfg.MinRetries = retry.NoRetries
		}
		b, err := retry.NewBudget(cfg)
		if err != nil {
			rt.Fatalf("NewBudget(%+v): %v", cfg, err)
		}
		model := floor * 1000 // thousandths of a token
		var attempts, granted, denied uint64
		step := 0
		rt.Repeat(map[string]func(*rapid.T){
			"deposit": func(rt *rapid.T) {
				step++
				b.Deposit()
				attempts++
				model = min(model+ratioMilli, maxTokens*1000)
			},
			"withdraw": func(rt *rapid.T) {
				step++
				want := model >= 1000
				if got := b.Withdraw(); got != want {
					rt.Fatalf("step %d: Withdraw() = %v with model balance %d/1000; want %v", step, got, model, want)
				}
				if want {
					model -= 1000
					granted++
				} else {
					denied++
				}
			},
			"": func(rt *rapid.T) {
				if got, want := b.Stats().Tokens, float64(model)/1000; math.Abs(got-want) > 1e-9 {
					rt.Fatalf("step %d: Tokens() = %v; want %v", step, got, want)
				}
				if tok := b.Stats().Tokens; tok < 0 || tok > float64(maxTokens) {
					rt.Fatalf("step %d: Tokens() = %v outside [0, %d]", step, tok, maxTokens)
				}
				bound := cfg.Ratio*float64(attempts) + float64(floor)
				if float64(b.Stats().Retries) > bound+1e-9 {
					rt.Fatalf("step %d: %d retries granted > Ratio %v · %d attempts + MinRetries %d", step, b.Stats().Retries, cfg.Ratio, attempts, floor)
				}
				if b.Stats().Attempts != attempts || b.Stats().Retries != granted || b.Stats().Denied != denied {
					rt.Fatalf("step %d: counters %d/%d/%d; want %d/%d/%d", step, b.Stats().Attempts, b.Stats().Retries, b.Stats().Denied, attempts, granted, denied)
				}
			},
		})
	})
}

// TestBudgetRatioBound checks the bound for arbitrary float ratios, where
// the budget rounds the ratio down to nano-tokens.
func TestBudgetRatioBound(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		ratio := rapid.Float64Range(1e-9, 1).Draw(rt, "ratio")
		floor := rapid.IntRange(1, 5).Draw(rt, "minRetries")
		b := mustBudget(rt, retry.BudgetConfig{Ratio: ratio, MinRetries: floor, Max: 1000})
		ops := rapid.SliceOfN(rapid.Bool(), 0, 2000).Draw(rt, "deposits")
		for i, deposit := range ops {
			if deposit {
				b.Deposit()
			} else {
				b.Withdraw()
			}
			if bound := ratio*float64(b.Stats().Attempts) + float64(floor); float64(b.Stats().Retries) > bound+1e-9 {
				rt.Fatalf("op %d: %d retries > %v·%d + %d", i, b.Stats().Retries, ratio, b.Stats().Attempts, floor)
			}
		}
	})
}

// TestBudgetConcurrent hammers one budget from many goroutines; under -race
// it also checks the memory safety of the lock-free paths.
func TestBudgetConcurrent(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 8, 5000
	b := mustBudget(t, retry.BudgetConfig{Ratio: 0.3, MinRetries: 5, Max: 20})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				if (i+w)%3 == 0 {
					b.Withdraw()
				} else {
					b.Deposit()
				}
			}
		})
	}
	wg.Wait()
	if got := b.Stats().Attempts + b.Stats().Retries + b.Stats().Denied; got != workers*perWorker {
		t.Fatalf("attempts+retries+denied = %d; want %d calls", got, workers*perWorker)
	}
	if bound := 0.3*float64(b.Stats().Attempts) + 5; float64(b.Stats().Retries) > bound {
		t.Fatalf("%d retries > 0.3·%d + 5", b.Stats().Retries, b.Stats().Attempts)
	}
	if tok := b.Stats().Tokens; tok < 0 || tok > 20 {
		t.Fatalf("Tokens() = %v outside [0, 20]", tok)
	}
}

func TestBudgetAllocs(t *testing.T) {
	b := mustBudget(t, retry.BudgetConfig{})
	if n := testing.AllocsPerRun(1000, func() {
		b.Deposit()
		b.Withdraw()
		_ = b.Stats()
	}); n != 0 {
		t.Fatalf("Deposit+Withdraw+Stats allocate %v times; want 0", n)
	}
}

func BenchmarkBudget(b *testing.B) {
	b.Run("DepositWithdraw", func(b *testing.B) {
		bu := mustBudget(b, retry.BudgetConfig{})
		b.ReportAllocs()
		for b.Loop() {
			bu.Deposit()
			bu.Withdraw()
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		bu := mustBudget(b, retry.BudgetConfig{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.Deposit()
				bu.Withdraw()
			}
		})
	})
}

// fataler is the part of testing.TB that *rapid.T also has, so helpers
// serve both.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustBudget(tb fataler, cfg retry.BudgetConfig) *retry.Budget {
	tb.Helper()
	b, err := retry.NewBudget(cfg)
	if err != nil {
		tb.Fatalf("NewBudget(%+v): %v", cfg, err)
	}
	return b
}
