// Package retry decides whether and when to retry a request to a rate-limited
// provider: a ratio retry budget for the run, full-jitter exponential backoff,
// outcome classes, and the parsing of Retry-After and rate-limit headers.
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
// [backoff.WithMaxRetries]. A server's Retry-After ([ParseRetryAfter]) is a
// floor on the sleep ([Backoff.NextAfter], [Floor]), never a replacement for
// the jitter.
//
// Only some outcomes deserve a retry. [Classify] maps a response or an error
// to a [Class]: throttled (429, and 418 which Binance uses for an IP ban),
// overloaded (503), transient (other 5xx, 408, timeouts, resets, EOF),
// permanent (other 4xx, non-network errors) or canceled (the caller gave up).
// [Class.Retryable] says which ones may spend a retry token.
//
// [ParseRateLimit] reads the provider's own account of its quota from the
// IETF RateLimit headers, the common X-RateLimit-* headers and Binance's
// X-MBX-USED-WEIGHT-* headers, so a pacer can slow down before the 429.
//
// # Composition
//
//	class := retry.Classify(resp, err)
//	if class.Retryable() && budget.Withdraw() {
//		ra, _ := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), now)
//		sleep := bo.NextAfter(ra) // max(full jitter, Retry-After)
//		...
//	}
//
// A [Budget] is shared by every request of a run and is safe for concurrent
// use; a [Backoff] belongs to one logical request and is not.
package retry
