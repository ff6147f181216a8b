// Package klines is a [slice.Source] and [slice.Sink] for candles (klines)
// from any Binance-compatible REST API, shared by the example programs.
//
// The Source plans one request window after the committed cursor (the open
// time of the last candle stored), asks GET /api/v3/klines for it, keeps only
// closed candles, and reports the window it answered for, empty answers
// included, so a halted market is covered rather than re-fetched forever.
// The file Sink keeps one CSV file per symbol and interval and upserts on the
// open time: a replayed slice never writes a candle twice.
package klines
