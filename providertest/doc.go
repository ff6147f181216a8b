// Package providertest is a rate-limited provider to test collectors
// against: a simulated, Binance-compatible market-data API that enforces a
// limit its client is not told, answers over-limit requests the way real
// providers do, and counts what the client did.
//
// It is named like [net/http/httptest]: a real HTTP server, in memory or on
// loopback, that a test points its client at. The "provider" is the
// third-party API a collector pulls from, the thing forage's budget protects;
// providertest is not a conformance suite for budget.Provider
// implementations.
//
// The policies are pluggable: every way a provider limits, refuses,
// announces, fails and lies is a [Config] field, and each combines with the
// others.
//
//   - The true limit ([Limit]): GCRA ([Limit.Rate]) or a fixed window
//     ([Limit.Count]) on a per-path weight ([Config.Weight]), changed
//     mid-run by [Config.Schedule] or [Server.SetLimit].
//   - The answer to an over-limit request ([Answer]): 429 with or without
//     Retry-After, 503, a silent slow-down, and Binance's 418 ban after
//     repeated refusals.
//   - The usage headers ([Headers]): Binance's, the IETF draft's, or both.
//   - Transient faults ([Config.FaultRate], [Fault]: a 5xx status or a
//     connection reset; a 503 is noise that looks like a refusal), request
//     delays on the way in ([Config.Uplink], so requests sent back to back
//     arrive jittered, as through a real network stack) and response delays
//     on the way out ([Config.Latency]).
//   - Lies ([Lie]: short pages, null or empty answers, dropped rows, rows
//     newest first, shifted open times, values carrying a forged CSV line,
//     a redirect loop; the lies about rows combine), and quiet intervals
//     left out as some exchanges do ([Config.Sparse], not a lie), while
//     [Server.KlinesAt] keeps telling the truth to compare with.
//
// Run a collector against a few such combinations and compare what it
// fetched with what the limit allowed. [Server.Stats] says whether the
// client was ever banned or over the limit, and how many candles it was
// served, so a test can assert "never banned, never over the limit, no
// data lost".
//
// A [Server] answers four endpoints with Binance's shapes and error codes:
//
//   - GET /api/v3/klines: deterministic candles for each configured [Symbol],
//     from its listing up to and including the forming candle (the one that
//     contains now, whose values move with the clock); see [Server.KlinesAt]
//     for the exact paging semantics.
//   - GET /api/v3/exchangeInfo: the symbols, all with status TRADING.
//   - GET /api/v3/time: {"serverTime": ms}; GET /api/v3/ping: {}.
//
// Candles follow one price path per symbol, so opens and closes agree
// across intervals (an hour opens at its first minute's open); highs, lows
// and volumes are drawn per candle and do not aggregate.
//
// Everything reads time from [Config.Now] and draws randomness from a
// generator seeded by [Config.Seed], so a run is deterministic for a given
// sequence of requests. Two ways to reach the server:
//
//   - [Server.Client] serves requests in memory in the caller's goroutine
//     and waits out latency on a timer. Inside a
//     [testing/synctest] bubble that timer is fake, so minutes of provider
//     time pass instantly.
//   - A Server is an [http.Handler]: [net/http/httptest.NewServer] serves
//     it on a real loopback listener for wall-clock runs; injected connection
//     resets are then real TCP resets. Go's http.Transport silently retries
//     a GET once when a reused keep-alive connection is reset, so a client
//     that must see injected resets should disable keep-alives.
package providertest
