// Package klines is a [slice.Source] and [slice.Sink] for candles (klines)
// from any Binance-compatible REST API, shared by the example programs.
//
// The Source asks GET /api/v3/klines for the first Page candles after the
// committed cursor (the open time of the last candle stored) up to the
// collection's end, so a stretch without candles, such as the years before
// a symbol's listing, costs one request. It keeps only closed candles,
// moves the cursor to the last candle it received (never past one it did
// not), and reports the span the answer covered, empty answers included,
// so a halted market is covered rather than re-fetched forever. Answers are
// checked (oldest first, on the interval's boundaries, inside the asked
// span, no duplicates): a violation is a classified provider error. The
// Source predicts where each page ends ([slice.Predictor]), so a stream run
// fetches ahead.
//
// The file Sink keeps one CSV file per symbol and interval and upserts on
// the open time: a replayed slice never writes a candle twice.
package klines
