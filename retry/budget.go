package retry

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Budget defaults and limits.
const (
	// defaultRatio is the default [BudgetConfig.Ratio]: one retry token per
	// five first attempts, the Linkerd default and the share of the AWS SDK
	// retry quota.
	defaultRatio = 0.2
	// defaultMinRetries is the default [BudgetConfig.MinRetries]: enough for
	// a run of a handful of requests to ride out one short blip.
	defaultMinRetries = 3
	// defaultMaxTokens is the default [BudgetConfig.Max] (or MinRetries if
	// that is larger). It is the largest retry burst a long healthy run can
	// bank: 100, like the AWS SDK's 500-token quota at 5 tokens a retry.
	defaultMaxTokens = 100
	// NoRetries, as [BudgetConfig.Ratio], makes first attempts deposit
	// nothing; as [BudgetConfig.MinRetries], starts the budget empty. Zero
	// cannot say "none" because a zero field means its default.
	NoRetries = -1

	// maxBudgetTokens bounds MinRetries and Max: a larger budget is a
	// misconfiguration, and the bound keeps the fixed-point balance far from
	// overflow.
	maxBudgetTokens = 1_000_000
	// tokenUnit is one retry token in the fixed-point balance. Tokens are
	// counted in nano-tokens so that deposits of Ratio add up exactly, with
	// no floating-point drift over millions of attempts.
	tokenUnit = 1_000_000_000
)

// BudgetConfig configures a [Budget]. The zero BudgetConfig is valid and
// means all defaults.
type BudgetConfig struct {
	// Ratio is the number of retry tokens each first attempt deposits, so
	// the share of first attempts that may be retried. It must be in
	// [1e-9, 1] (it is kept to 9 decimals, rounded down), or NoRetries for
	// no deposits at all. Zero means the default, 0.2.
	Ratio float64
	// MinRetries is the floor: the tokens the budget holds before any
	// attempt, so a tiny run can still retry. It must be in [0, 1e6], or
	// NoRetries for an empty start. Zero means the default, 3.
	MinRetries int
	// Max caps the balance in tokens, so a long healthy run cannot bank
	// thousands of retries and spend them all in one storm when the provider
	// degrades. Size it to about Ratio times the run's request cap when
	// there is one. It must be in [1, 1e6] and at least MinRetries. Zero
	// means the default, 100 (or MinRetries if that is larger).
	Max int
}

// Budget is a run's retry budget: a token bucket where every first attempt
// deposits [BudgetConfig.Ratio] tokens, every retry withdraws one, and the
// balance starts at [BudgetConfig.MinRetries] and never exceeds
// [BudgetConfig.Max]. Over any sequence of calls, the retries it grants are
// at most Ratio·Attempts + MinRetries, and never more than the balance.
//
// Budget is safe for concurrent use by every request of a run; its methods
// are lock-free and allocate nothing.
//
// The zero Budget is not usable (its methods panic): make one with [NewBudget].
type Budget struct {
	ratio    int64 // nano-tokens deposited per first attempt
	max      int64 // nano-token cap of the balance
	tokens   atomic.Int64
	attempts atomic.Uint64
	retries  atomic.Uint64
	denied   atomic.Uint64
}

// NewBudget returns a Budget for cfg, or an error wrapping [ErrInvalidConfig]
// naming the invalid field.
func NewBudget(cfg BudgetConfig) (*Budget, error) {
	ratio, err := budgetRatio(cfg.Ratio)
	if err != nil {
		return nil, err
	}
	floor := cfg.MinRetries
	switch {
	case floor == NoRetries:
		floor = 0
	case floor == 0:
		floor = defaultMinRetries
	case floor < 0 || floor > maxBudgetTokens:
		return nil, invalid.Must("BudgetConfig.MinRetries", fmt.Sprintf("be in [0, %d] or NoRetries", maxBudgetTokens), cfg.MinRetries)
	}
	maxTokens := cfg.Max
	switch {
	case maxTokens == 0:
		maxTokens = max(defaultMaxTokens, floor)
	case maxTokens < 1 || maxTokens > maxBudgetTokens:
		return nil, invalid.Must("BudgetConfig.Max", fmt.Sprintf("be in [1, %d]", maxBudgetTokens), cfg.Max)
	case maxTokens < floor:
		return nil, invalid.Must("BudgetConfig.Max", fmt.Sprintf("be >= MinRetries (%d)", floor), cfg.Max)
	}
	b := &Budget{ratio: ratio, max: int64(maxTokens) * tokenUnit}
	b.tokens.Store(int64(floor) * tokenUnit)
	return b, nil
}

// budgetRatio validates a configured ratio and converts it to nano-tokens,
// rounding down so the granted retries never exceed Ratio·attempts.
func budgetRatio(r float64) (int64, error) {
	switch {
	case r == NoRetries:
		return 0, nil
	case r == 0:
		r = defaultRatio
	case math.IsNaN(r) || r < 1.0/tokenUnit || r > 1:
		return 0, invalid.Must("BudgetConfig.Ratio", "be in [1e-9, 1], 0 or NoRetries", r)
	}
	n := int64(math.Round(r * tokenUnit))
	if float64(n)/tokenUnit > r {
		n-- // rounding went up; stay at or below the configured ratio
	}
	return n, nil
}

// Deposit records one first attempt: it adds Ratio tokens to the balance,
// up to Max. Call it once per first attempt, not for retries, so retries do
// not earn further retries.
func (b *Budget) Deposit() {
	b.attempts.Add(1)
	for {
		cur := b.tokens.Load()
		next := min(cur+b.ratio, b.max)
		if next == cur || b.tokens.CompareAndSwap(cur, next) {
			return
		}
	}
}

// Withdraw takes one retry token and reports whether it got one. False means
// the budget is exhausted: do not retry now; later first attempts will
// refill it.
func (b *Budget) Withdraw() bool {
	for {
		cur := b.tokens.Load()
		if cur < tokenUnit {
			b.denied.Add(1)
			return false
		}
		if b.tokens.CompareAndSwap(cur, cur-tokenUnit) {
			b.retries.Add(1)
			return true
		}
	}
}

// BudgetStats is what a [Budget] has counted so far, as [Budget.Stats]
// reads it. It is a plain value, safe to copy.
type BudgetStats struct {
	// Attempts is how many first attempts have been deposited.
	Attempts uint64
	// Retries is how many retries the budget has granted.
	Retries uint64
	// Denied is how many withdrawals the budget has refused.
	Denied uint64
	// Tokens is the balance in retry tokens (fractional: deposits are a
	// fraction of a token). A retry is granted when it is at least 1.
	Tokens float64
}

// Stats returns the budget's counters and balance. Each field is exact, but
// they are read one at a time, so while other goroutines act they are not a
// single snapshot.
func (b *Budget) Stats() BudgetStats {
	return BudgetStats{
		Attempts: b.attempts.Load(),
		Retries:  b.retries.Load(),
		Denied:   b.denied.Load(),
		Tokens:   float64(b.tokens.Load()) / tokenUnit,
	}
}
