// Package retry decides whether and when to retry a request to a rate-limited
// provider: a ratio retry budget for the run and full-jitter exponential
// backoff. Which outcomes deserve a retry, and what the provider's headers
// say, is the root package's vocabulary: [github.com/forage-go/forage.Class] and
// [github.com/forage-go/forage.ParseRetryAfter].
//
// # The idea
//
// A per-request attempt limit ("retry up to 3 times") does not bound the
// total retry volume: when a provider degrades, every request in flight
// multiplies its load by the attempt limit, exactly when the provider can
// least take it. A [Budget] bounds retries across the whole run instead: every
// first attempt deposits [BudgetConfig.Ratio] tokens (0.2 by default, after
// Linkerd and the AWS SDK retry quota), every retry withdraws one, and a small
// floor ([BudgetConfig.MinRetries]) lets a tiny run still retry once or twice.
// Over any run, retries ≤ Ratio·attempts + MinRetries. When the budget is
// empty the caller stops retrying and defers the rest of the work.
//
// Between retries, [Backoff] sleeps a uniformly random time in
// [0, min(Cap, Base·2^attempt)] ("full jitter", from the AWS architecture
// blog): clients that failed together spread out instead of retrying in
// synchronized waves. Backoff implements [backoff.BackOff] of
// github.com/cenkalti/backoff/v4, so it composes with [backoff.Retry] and
// [backoff.WithMaxRetries]. A server's Retry-After ([github.com/forage-go/forage.ParseRetryAfter]) is a
// floor on the sleep ([Floor]), never a replacement for
// the jitter.
//
// Only some outcomes deserve a retry: [github.com/forage-go/forage.Class.Retryable] says which
// classes ([github.com/forage-go/forage.Outcome.Class]) may spend a retry token.
//
// # Composition
//
//	out := forage.FromHTTP(resp, err)
//	if out.Class().Retryable() && budget.Withdraw() {
//		sleep := retry.Floor(bo.NextBackOff(), out.RetryAfter) // max(full jitter, Retry-After)
//		...
//	}
//
// A [Budget] is shared by every request of a run and is safe for concurrent
// use; a [Backoff] belongs to one logical request and is not.
package retry
