// Package klines is a [slice.Source] and [slice.Sink] for candles (klines)
// from any Binance-compatible REST API, shared by the example programs.
//
// The Source asks GET /api/v3/klines for the first Page candles after the
// committed cursor (the open time of the last candle stored) up to the
// collection's end, so a stretch without candles, such as the years before
// a symbol's listing, costs one request, plus one to confirm it. It keeps
// only closed candles, moves the cursor to the last candle it received
// (never past one it did not, nor past a hole inside an answer: the next
// slice asks from the hole), and reports the span the answer covered, empty
// answers included, so a halted market is covered rather than re-fetched
// forever.
//
// A provider may lie. Answers are checked (oldest first, on the interval's
// boundaries, inside the asked span, no duplicates, prices and volumes
// plain decimal numbers, at most 8 MiB): a violation is a permanent
// provider error that says what broke, so the run stops at its last commit
// and the next one asks again. An answer that starts later than asked, or
// is empty, claims a stretch without candles; in settled history the
// Source confirms the claim by asking, without a startTime, for the last
// candle before the stretch's end: a candle inside it exposes the lie (a
// permanent error), while a listing, a halt or a delisting shows one before
// it, or none. A provider that hides candles from both requests cannot be
// told from one that has none; nothing else can, short of a second
// provider. The price of the confirmation is one request per stretch
// without candles: cheap against Binance, which sends a candle for every
// interval (with zero volume when nothing traded), about two requests per
// gap against a provider that leaves quiet intervals out. The Source
// predicts where each page ends ([slice.Predictor]), so a stream run
// fetches ahead.
//
// The file Sink keeps one CSV file per symbol and interval and upserts on
// the open time: a replayed slice never writes a candle twice. It writes a
// value only if it is a decimal number and reads a line only if it is
// exactly a record, so a provider's text can never forge a line.
package klines
