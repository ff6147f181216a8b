// Package klines collects candles (klines) from any Binance-compatible REST
// API: a [slice.Source] that fetches them and a crash-safe [slice.Sink] that
// stores them in a file, to run under a slice runner or a scheduler, and a
// worked example of writing a Source and a Sink for forage.
//
// [Source] asks GET /api/v3/klines for the first Page candles after the
// committed cursor (the open time of the last candle stored) up to the
// collection's end, so a stretch without candles, such as the years before
// a symbol's listing, costs one request, plus one to confirm it. Every
// Fetch makes exactly one request, so every request is one attempt to the
// provider's budget, paced like any other (but for net/http's own second
// send of a GET whose reused connection failed before the answer; see
// budget.Transport); what a page leaves to check is
// written into its cursor, and the next slice checks it. The Source keeps
// only closed candles, moves the cursor to the last candle it received
// (never past one it did not), and reports the span the answer covered,
// confirmed stretches without candles included, so a halted market is
// covered rather than re-fetched forever.
//
// A candle is stored only once it is closed by this clock and by the
// provider's: one that closed less than 10 minutes ago (two intervals, for
// longer ones) must be followed by another in the answer (each request
// asks one candle past its page for it), since a provider whose clock, or
// feed, runs behind ours still serves it as forming, its values moving.
// That recent stretch is never claimed empty either: it may not be
// published yet. The provider's clock is read from the Date of its answers
// (up to a day behind ours): a provider 15 minutes behind has its forming
// candle, and the minutes it has not reached, judged by its own clock.
// What is due by the stream's end but not published yet stops the run
// behind ([forage.ReasonBehind]), with when to ask again: a backfill is
// never done without its last candles, and a fill keeps the rest of its
// range a gap.
//
// A provider may lie. Answers are checked (oldest first, on the interval's
// boundaries, inside the asked span, no duplicates, prices and volumes
// plain decimal numbers, at most 8 MiB, no redirect): a violation is a
// permanent provider error that says what broke, so the run stops at its
// last commit and the next one asks again. Text the provider sent is
// redacted (URL query values, credentials) before it goes into an error. An
// answer that starts later than asked, or is empty in settled history,
// claims a stretch without candles; the next slice confirms the claim by
// asking, without a startTime, for the last candle before the stretch's
// end. A candle inside the stretch exposes the lie; so does any answer but
// the candle the cursor stands on, once one was received: an honest
// exchange still has it. A listing, a halt or a delisting shows that
// candle, or, before any, one before the stretch or none. A stretch is
// covered only if a candle confirms it (one before it, or the one that
// ended it): with nothing received and nothing anywhere, nothing is covered
// and the next run asks again. A hole between two rows of an answer is
// verified the same way, all rows after it at once, so a provider that
// leaves quiet intervals out costs two requests per page, not two per
// candle (see [Source.Fetch]). A provider that hides the same candles from
// both request paths cannot be told from one that has none; nothing else
// can, short of a second provider. Nor can one that moves its whole
// history earlier by whole intervals, from an answer that starts after a
// stretch without candles (before the listing, a quiet interval): its
// rows are aligned and nothing it showed contradicts them. Moved later,
// or from an answer that starts on a candle, a moved row is caught before
// it is stored: it falls outside the window asked, the answer's or its
// confirmation's. The Source predicts where each page ends
// ([slice.Predictor]), so a stream run fetches ahead.
//
// The cursor is text. Its plain form, which [DecodeCursor] reads, is the
// open time of the last candle covered, in Unix milliseconds, in decimal
// ("1709290800000"); the Source may append to it what is pending (a claim
// to confirm, rows to verify), which DecodeCursor reads past. A host that
// wants a stream to start at a given candle commits the plain cursor of
// the candle before it: strconv.AppendInt(nil, t.UnixMilli(), 10).
//
// [FileSink] keeps one CSV file per symbol and interval,
// "<dir>/<symbol>-<interval>.csv", one line per candle:
// open_time_ms,open,high,low,close,volume. It upserts on the open time: a
// replayed slice never writes a candle twice. It writes a value only if it
// is a plain decimal number (digits and one point) and reads a line back
// only if it is exactly such a record, so a provider's text can never
// forge or overwrite a line; [Export] reads a file back.
package klines
