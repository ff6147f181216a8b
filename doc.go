// Package forage is an embeddable SDK for budgeted collection: pulling data
// from third-party providers whose rate limits are unknown or only partly
// known, as fast as the provider allows, never banned, never losing or
// duplicating data, and resuming exactly where a run stopped.
//
// The root package is the vocabulary every other package speaks, and the
// tutorial. forage is a set of small packages that compose, each usable on
// its own.
//
// # The vocabulary
//
// What one request attempt told us is an [Outcome]: its status, its error,
// the provider's Retry-After and its account of its quota ([Quota]).
// [FromHTTP] reads one from an HTTP exchange (redacting the URL's secrets
// from the error), and [Outcome.Class] gives its [Class]: Success,
// Throttled (429, 418), Overloaded (503), Transient (other 5xx, 408,
// timeouts, resets), Permanent (other 4xx, non-network errors) or Canceled.
// The policies read the class directly: retry spends tokens only on
// [Class.Retryable] classes, aimd moves the rate on it and on the Quota,
// the breaker counts pressure and transient failures as failures. When a
// call stops, its [Reason] says why, in three families: budget exhaustion
// ([Reason.Exhausted]), source pressure ([Reason.SourcePressure]) and
// failure. [FromHTTPJSON] also decodes a success's JSON body, and a body
// that is not the page (garbage in a 200) is a Transient failure, asked
// again, never a page skipped; a host that reads bodies another way
// classifies its garbage itself with [Mark]. [ParseRetryAfter] and [ParseQuota] are the pieces FromHTTP
// is made of, for a host that reads its responses another way: it builds
// an [Outcome] from them and asks its Class.
//
// What a collector keeps about a provider between runs is a
// [ProviderRecord]: the learned rate and ceiling, the pause in force and
// its reason, an operator's status, counters; the budget package saves it
// and every store keeps it.
//
// # Which package to reach for
//
//   - You know the rate and must hold it: [github.com/forage-go/forage/gcra],
//     a lock-free GCRA limiter with an explicit-time API.
//   - You do not know the rate: [github.com/forage-go/forage/aimd] discovers
//     the ceiling from a conservative start, decreasing once per overshoot.
//   - Retries must not amplify an outage: [github.com/forage-go/forage/retry]
//     gives a ratio retry budget and full-jitter backoff with Retry-After as
//     its floor.
//   - Stop calling a provider that is down: [github.com/forage-go/forage/breaker].
//   - All of it, per provider, for every request:
//     [github.com/forage-go/forage/budget]. Its Provider is the one gate every
//     request attempt passes; its Registry holds one Provider per provider
//     key; its Transport puts the gate under any http.Client.
//   - Progress that is never lost nor passed:
//     [github.com/forage-go/forage/checkpoint] commits cursors only after the
//     data is durable, with leases, gap records and coverage ranges.
//   - One stream moved forward resumably: [github.com/forage-go/forage/slice]
//     runs slice after slice (fetch through a Provider, durable write, fenced
//     commit), writes a gap record on every planned stop, fills ranges, drains
//     gaps, and plans gap fills without re-fetching what is covered.
//   - Many streams: [github.com/forage-go/forage/schedule] runs jobs by
//     priority with fresh data first and backfill when a provider has room,
//     within global and per-provider limits, waiting out each provider's
//     reset. [github.com/forage-go/forage/admin] serves it to operators: an
//     http.Handler with a JSON API and a status page.
//   - Many processes: the nested module github.com/forage-go/forage/pgstore
//     implements the stores on PostgreSQL and shares one provider's pacing
//     across processes.
//   - Candles from a Binance-compatible API, ready to run:
//     [github.com/forage-go/forage/klines] is a Source and a crash-safe file
//     Sink, and a worked example of writing your own.
//   - Testing your collector: [github.com/forage-go/forage/providertest] is a
//     rate-limited provider, like net/http/httptest, that enforces a limit
//     your client is not told and counts what it did.
//
// # The composition
//
// In a dozen lines:
//
//	reg, _ := budget.NewRegistry(budget.RegistryConfig{})
//	binance, _ := reg.Get("binance") // one Provider per key, made on first use
//	run, _ := budget.NewRun(budget.Envelope{MaxRequests: 500, Deadline: time.Now().Add(time.Minute)})
//	err := binance.Do(ctx, run, func(ctx context.Context) forage.Outcome {
//		resp, err := client.Do(req.WithContext(ctx)) // exactly one outbound request
//		if err == nil {
//			defer resp.Body.Close()
//			// decode the page here, inside the attempt
//		}
//		return forage.FromHTTP(resp, err)
//	})
//	if reason, ok := budget.ReasonOf(err); ok && reason.Exhausted() {
//		// the run's budget is spent: record a gap, resume next run
//	}
//
// See the README for the diagram of one request attempt, and docs/GUARANTEES.md
// for every guarantee with the tests that hold it.
package forage
