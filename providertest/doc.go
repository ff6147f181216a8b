// Package sim is a simulated, Binance-compatible market-data provider: the
// rate-limited server that forage's tests, benchmarks and examples collect from.
//
// A [Server] serves three endpoints with Binance's shapes and error codes:
//
//   - GET /api/v3/klines: deterministic candles for each configured [Symbol],
//     from its listing up to and including the forming candle (the one that
//     contains now, whose values move with the clock); see [Server.KlinesAt]
//     for the exact paging semantics and [ParseKlines] to read a response.
//   - GET /api/v3/exchangeInfo: the symbols, all with status TRADING.
//   - GET /api/v3/time: {"serverTime": ms}; GET /api/v3/ping: {}.
//
// Candles follow one price path per symbol, so opens and closes agree across
// intervals (an hour opens at its first minute's open); highs, lows and
// volumes are drawn per candle and do not aggregate.
//
// The idea is to make provider pressure reproducible. The server enforces a
// true limit the client does not know ([Limit]: GCRA or a fixed window, on a
// per-path weight), answers over-limit requests the way real providers do
// ([Answer]: 429 with or without Retry-After, 503, a silent slow-down, or
// Binance's 418 ban after repeated violations), can change that limit mid-run
// ([Config.Schedule], [Server.SetLimit]), announces its usage in headers
// ([Headers]: Binance's, the IETF draft's, or both at once), injects
// transient faults ([Config.FaultRate]; [Fault503] is noise that looks like a
// refusal), delays requests on their way in ([Config.Uplink], so requests
// sent back to back arrive jittered, as through a real network stack) and
// responses on their way out ([Config.Latency]), and counts what the client
// did ([Server.Stats]) so a test can assert "never banned, never over the
// limit, no data lost". It can also lie ([Config.Lie]: short pages, null or
// empty answers, to ranged requests or to every one, dropped rows, rows
// newest first, shifted open times, values carrying a forged CSV line, a
// redirect loop), or leave quiet intervals out as some exchanges do
// ([LieSparse]), while [Server.KlinesAt] keeps telling the truth to compare
// with.
//
// Everything reads time from [Config.Now] and draws randomness from a
// generator seeded by [Config.Seed], so a run is deterministic for a given
// sequence of requests. Two ways to reach the server:
//
//   - [Server.Transport] (or [Server.Client]) serves requests in memory in the
//     caller's goroutine and waits out latency on a timer. Inside a
//     testing/synctest bubble that timer is fake, so minutes of provider time
//     pass instantly.
//   - [Server.Listen] serves on a real loopback listener for wall-clock runs;
//     injected connection resets are then real TCP resets.
//
// The package is internal: it is a test fixture with a stable shape, not part
// of forage's public API.
package providertest
