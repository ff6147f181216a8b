package klines

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strconv"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// Fetch makes exactly one request for the slice, one attempt to the
// provider's budget, and merges nothing across attempts.
//
// A ranged slice asks for the first Page candles of its span. The page
// keeps the closed candles from the span's start up to the first hole
// between two rows, and moves the cursor to the last of them. An answer
// that is empty in settled history, or starts later than asked, claims a
// stretch without candles: the page keeps nothing and its cursor asks the
// next slice to confirm the claim.
//
// A confirmation asks, without a startTime, for the last candle before
// the stretch's end: a candle
// inside the stretch, or another last candle than the one the cursor
// stands on, exposes the lie, a permanent provider error; so does no
// candle at all when the cursor stands on one, since an honest exchange
// still has it. A listing, a halt or a delisting shows the cursor's
// candle, or, with none received yet, one before the stretch or none.
// The stretch is then covered, but only if a candle confirms it: one the
// provider showed before it or after it. With none (nothing received
// and nothing anywhere up to the head), nothing is covered and the cursor
// stays: caught up for now, and the next run asks again.
//
// Holes between rows: a provider may leave quiet intervals out, and a
// lying one may drop rows. Asking again from every hole would cost a
// request or two per candle against the first, so a page cut at a hole
// remembers how many rows the answer held after it, up to where, and a
// digest of their open times; the next slice verifies them by the other
// path: the last that many candles and one up to there, without a
// startTime. If that answer is the cursor's candle and the same rows, the
// two paths agree on the holes, and the rows are kept, holes and all: two
// requests per page. If not, nothing is kept and the next slice asks again
// from the first hole. A provider that hides the same candles from both
// paths cannot be told from one that has none.
func (s *Source) Fetch(ctx context.Context, sl slice.Slice) (slice.Page[Candle], forage.Outcome) {
	if s.step == 0 {
		return slice.Page[Candle]{}, forage.Outcome{Err: forage.Mark(errors.New("klines: Source used before Init"), forage.Permanent)}
	}
	c, err := parseCursor(sl.After)
	if err != nil {
		return slice.Page[Candle]{}, forage.Outcome{Err: forage.Mark(err, forage.Permanent)}
	}
	switch {
	case s.confirming(c, sl.After):
		return s.confirm(ctx, sl, c)
	case c.hasSeen:
		return s.verify(ctx, sl, c)
	}
	return s.ranged(ctx, sl, c)
}

// ranged fetches the first Page candles of sl's span; c is its cursor.
func (s *Source) ranged(ctx context.Context, sl slice.Slice, c cursor) (slice.Page[Candle], forage.Outcome) {
	r := sl.Range
	// One candle more than the span, and than the page (up to Binance's
	// most): the provider's showing it proves the page's last candle closed
	// at the provider (see closed). It is never kept.
	ask, limit := checkpoint.Range{Start: r.Start, End: r.End.Add(s.step)}, min(s.Page+1, maxPage)
	rows, out := s.get(ctx, url.Values{
		"startTime": {strconv.FormatInt(ask.Start.UnixMilli(), 10)},
		"endTime":   {strconv.FormatInt(ask.End.UnixMilli()-1, 10)},
		"limit":     {strconv.Itoa(limit)},
	}, ask, limit)
	if out.Err != nil {
		return slice.Page[Candle]{}, out
	}
	s.saw(len(rows))
	rows = s.closed(rows, r.End)
	rows = rows[:min(len(rows), s.Page)]
	if len(rows) == 0 {
		return s.empty(sl, c), out
	}
	n := s.accepted(r, rows)
	if n == 0 { // a late start: confirm the stretch before it
		late := c.base()
		late.hasConfirm, late.confirm, late.confirmCandle = true, rows[0].OpenTime.UnixMilli(), true
		return slice.Page[Candle]{Next: s.claim(sl, late)}, out
	}
	next := onCandle(rows[n-1].OpenTime)
	if n < len(rows) {
		next.hasSeen, next.seen, next.count, next.sum = true, rows[len(rows)-1].OpenTime.UnixMilli(), len(rows)-n, digest(rows[n:])
	}
	covered := checkpoint.Range{Start: r.Start, End: rows[n-1].OpenTime.Add(s.step)}
	return slice.Page[Candle]{Records: rows[:n], Next: next.bytes(), Covered: covered}, out
}

// closed returns the rows that open before end and are closed, by this
// clock and by the provider's (rows are oldest first): a row that opens at
// or after end, or at or after the forming candle by this clock, is not
// kept, and the last row kept, unless settled, must be followed by one in
// the answer (ranged asks one candle past its span for it). A provider
// whose clock runs behind ours serves the candle this clock just closed as
// still forming, with values that move; stored, it would be final (the
// sink upserts on the open time, and no later page asks for it again).
// Withheld, it is fetched with its successor, a poll later.
func (s *Source) closed(rows []Candle, end time.Time) []Candle {
	end = minTime(end, s.floor(s.theirs()))
	n := len(rows)
	for n > 0 && !rows[n-1].OpenTime.Before(end) {
		n--
	}
	if n == len(rows) && n > 0 && !rows[n-1].OpenTime.Before(s.settled()) {
		n-- // no successor shown: perhaps still forming at the provider
	}
	return rows[:n]
}

// empty is the page of an answer without closed candles for sl, whose
// cursor is c: near the head, where the newest candles may not be
// published yet, no progress, with when to ask again for them (a
// catch-up or a fill is not done without them; a followed head is caught
// up for now, see [slice.Page.NotYet]); in settled history, a claim to
// confirm.
func (s *Source) empty(sl slice.Slice, c cursor) slice.Page[Candle] {
	end := minTime(sl.Range.End, s.settled())
	if !sl.Range.Start.Before(end) {
		if len(sl.After) > 0 {
			return slice.Page[Candle]{Next: sl.After, NotYet: s.askAgain(sl.Range.Start)}
		}
		return slice.Page[Candle]{Next: plainCursor(sl.Range.Start.Add(-s.step))}
	}
	claim := c.base()
	claim.hasConfirm, claim.confirm = true, end.UnixMilli()
	return slice.Page[Candle]{Next: s.claim(sl, claim)}
}

// askAgain returns when to ask again for the candle opening at start,
// which closed by this clock but is not published, or not closed, at the
// provider yet: half as long again as it is late, from a second to a
// minute (a provider a few seconds behind serves it seconds later; one
// that has none there, a halt, is asked a minute apart until the stretch
// is settled history, which a claim then covers).
func (s *Source) askAgain(start time.Time) time.Time {
	now := s.now()
	closes := start.Add(s.step).Add(now.Sub(s.theirs())) // by this clock
	if closes.After(now) {
		return closes.Add(time.Second) // not closed by the provider's clock either
	}
	return now.Add(min(max(now.Sub(closes)/2, time.Second), time.Minute))
}

// claim returns the cursor after sl that asks the next slice to confirm
// the claim c, noted as this Source's own (see await). A claim the cursor
// before already holds, left by an earlier process (this Source asks again
// rather than confirm what it did not see made; see confirming) and made
// again by this answer, is spelt apart from it (the "r" mark, toggled):
// the same bytes would read as no progress, caught up, and leave the
// stretch and everything after it unfetched run after run.
func (s *Source) claim(sl slice.Slice, c cursor) []byte {
	if bytes.Equal(c.bytes(), sl.After) {
		c.again = !c.again
	}
	return s.await(c)
}

// accepted returns how many of the leading rows, checked and closed, of
// the answer for r the page keeps: up to the first hole, or none when the
// answer starts late.
func (s *Source) accepted(r checkpoint.Range, rows []Candle) int {
	if !rows[0].OpenTime.Equal(r.Start) {
		return 0
	}
	i := 1
	for i < len(rows) && rows[i].OpenTime.Equal(rows[i-1].OpenTime.Add(s.step)) {
		i++
	}
	return i
}

// verify makes the verification c asks for (see [Source.Fetch]): the
// last c.count+1 candles up to c.seen, without a startTime, must be the
// cursor's candle and the rows the ranged answer held after it. Then they
// are kept, holes and all; otherwise nothing is, and the next slice asks
// again from the first hole.
func (s *Source) verify(ctx context.Context, sl slice.Slice, c cursor) (slice.Page[Candle], forage.Outcome) {
	seen := msTime(c.seen)
	rows, out := s.get(ctx, url.Values{
		"endTime": {strconv.FormatInt(c.seen, 10)},
		"limit":   {strconv.Itoa(c.count + 1)},
	}, checkpoint.Range{End: seen.Add(s.step)}, c.count+1)
	if out.Err != nil {
		return slice.Page[Candle]{}, out
	}
	if len(rows) != c.count+1 || rows[0].OpenTime.UnixMilli() != c.last || digest(rows[1:]) != c.sum {
		return slice.Page[Candle]{Next: c.base().bytes()}, out
	}
	covered := checkpoint.Range{Start: sl.Range.Start, End: seen.Add(s.step)}
	return slice.Page[Candle]{Records: rows[1:], Next: onCandle(seen).bytes(), Covered: covered}, out
}

// digest sums the open times of rows.
func digest(rows []Candle) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, c := range rows {
		binary.BigEndian.PutUint64(b[:], uint64(c.OpenTime.UnixMilli()))
		h.Write(b[:])
	}
	return h.Sum64()
}

// confirm makes the confirmation c asks for (see [Source.Fetch]): the
// stretch from sl's start to c.confirm.
func (s *Source) confirm(ctx context.Context, sl slice.Slice, c cursor) (slice.Page[Candle], forage.Outcome) {
	start, end := sl.Range.Start, msTime(c.confirm)
	rows, out := s.get(ctx, url.Values{
		"endTime": {strconv.FormatInt(c.confirm-1, 10)},
		"limit":   {"1"},
	}, checkpoint.Range{End: end}, 1)
	if out.Err != nil {
		return slice.Page[Candle]{}, out
	}
	s.concluded(sl.After)
	stretch := checkpoint.Range{Start: start, End: end}
	switch {
	case len(rows) == 1 && !rows[0].OpenTime.Before(start):
		return lie(out, "answered no candle in %v, but has one at %v", stretch, rows[0].OpenTime)
	case len(rows) == 1 && c.hasCand && rows[0].OpenTime.UnixMilli() != c.cand:
		return lie(out, "answered %v as its last candle before %v, but sent one at %v", rows[0].OpenTime, end, msTime(c.cand))
	case len(rows) == 0 && c.hasCand:
		return lie(out, "answered no candle before %v, but sent one at %v", end, msTime(c.cand))
	case len(rows) == 0 && !c.confirmCandle:
		return slice.Page[Candle]{Next: sl.After}, out // nothing confirms it: cover nothing
	}
	next := cursor{last: end.Add(-s.step).UnixMilli(), hasLast: true, cand: c.cand, hasCand: c.hasCand}
	if len(rows) == 1 && !rows[0].OpenTime.Before(s.From) {
		// (Not one before From: the stream never stored it, and a cursor
		// names only candles stored (see shownCandle). An exchange that
		// leaves quiet minutes out showed the one before a quiet From,
		// and the host's check of its store then found it missing at
		// every later start.)
		next.cand, next.hasCand = rows[0].OpenTime.UnixMilli(), true
	}
	return slice.Page[Candle]{Next: next.bytes(), Covered: stretch}, out
}

// lie returns out failed with a permanent provider error saying what the
// provider's answers contradict.
func lie(out forage.Outcome, format string, args ...any) (slice.Page[Candle], forage.Outcome) {
	out.Err = forage.Mark(fmt.Errorf("klines: the provider "+format+": an answer that leaves out candles", args...), forage.Permanent)
	return slice.Page[Candle]{}, out
}

// msTime converts an open time in Unix milliseconds to a time.Time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
