package klines

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The cursor is opaque to the runner; to the Source it is text:
//
//	cursor  = base [ "~" seen ":" digest | "?" T [ "k" ] [ "r" ] ]
//	base    = "" | last [ "k" [ cand ] ]
//
// every time in Unix milliseconds, the digest in hexadecimal.
//
//   - last: every candle opening at or before it is stored or was
//     confirmed absent. A plain "<last>" is what every earlier version
//     wrote, and still reads as that.
//   - "k": the provider has shown a candle at last; "k<cand>": its last
//     candle known, before last, is at cand (last ends a stretch
//     confirmed empty). A provider that then says it has no candle up to
//     a later time, or that its last one is elsewhere, lies.
//   - "~seen:count:digest": the answer that moved the cursor here was cut
//     at a hole between its rows and ran on to seen with count more rows;
//     digest sums their open times. The next slice verifies them with one
//     request by the other path (see [Source.Fetch]).
//   - "?T": the provider answered no candle from the one after last up to
//     T; the next slice confirms it with one request ([Source.Fetch]).
//     "?Tk": the answer's first candle was at T (it started late).
//     "?T…r": the claim an earlier process left, made again by this
//     one's answer (see Source.claim): spelt apart from the cursor it
//     replaces, so that the page making it is progress, not "caught up".
type cursor struct {
	last, cand, seen, confirm int64
	sum                       uint64
	count                     int
	hasLast, hasCand          bool
	hasSeen, hasConfirm       bool
	confirmCandle, again      bool
}

// String encodes c.
func (c cursor) String() string {
	var b []byte
	if c.hasLast {
		b = strconv.AppendInt(b, c.last, 10)
		if c.hasCand {
			b = append(b, 'k')
			if c.cand != c.last {
				b = strconv.AppendInt(b, c.cand, 10)
			}
		}
	}
	switch {
	case c.hasConfirm:
		b = strconv.AppendInt(append(b, '?'), c.confirm, 10)
		if c.confirmCandle {
			b = append(b, 'k')
		}
		if c.again {
			b = append(b, 'r')
		}
	case c.hasSeen:
		b = strconv.AppendInt(append(b, '~'), c.seen, 10)
		b = strconv.AppendInt(append(b, ':'), int64(c.count), 10)
		b = strconv.AppendUint(append(b, ':'), c.sum, 16)
	}
	return string(b)
}

// bytes encodes c as a cursor.
func (c cursor) bytes() []byte { return []byte(c.String()) }

// base returns c without its pending confirmation or digest.
func (c cursor) base() cursor {
	c.hasSeen, c.hasConfirm, c.confirmCandle, c.again, c.seen, c.sum, c.count, c.confirm = false, false, false, false, 0, 0, 0, 0
	return c
}

// onCandle returns the cursor of a received candle at t.
func onCandle(t time.Time) cursor {
	ms := t.UnixMilli()
	return cursor{last: ms, cand: ms, hasLast: true, hasCand: true}
}

// parseCursor decodes a cursor; the empty one is the zero cursor.
func parseCursor(b []byte) (cursor, error) {
	var c cursor
	s := string(b)
	bad := func() (cursor, error) { return cursor{}, fmt.Errorf("klines: bad cursor %q", clip(s)) }
	if i := strings.IndexByte(s, '?'); i >= 0 {
		t := s[i+1:]
		c.hasConfirm = true
		if c.again = strings.HasSuffix(t, "r"); c.again {
			t = t[:len(t)-1]
		}
		if c.confirmCandle = strings.HasSuffix(t, "k"); c.confirmCandle {
			t = t[:len(t)-1]
		}
		ms, ok := parseMillis([]byte(t))
		if !ok {
			return bad()
		}
		c.confirm, s = ms, s[:i]
	} else if i := strings.IndexByte(s, '~'); i >= 0 {
		f := strings.Split(s[i+1:], ":")
		if len(f) != 3 || s[:i] == "" {
			return bad()
		}
		ms, ok := parseMillis([]byte(f[0]))
		n, okN := parseMillis([]byte(f[1]))
		d, err := strconv.ParseUint(f[2], 16, 64)
		if !ok || !okN || err != nil || n < 1 || n > 1000 || strconv.FormatUint(d, 16) != f[2] {
			return bad() // one spelling per cursor
		}
		c.hasSeen, c.seen, c.count, c.sum, s = true, ms, int(n), d, s[:i]
	}
	if s == "" {
		return c, nil
	}
	last, cand, k := strings.Cut(s, "k")
	ms, ok := parseMillis([]byte(last))
	if !ok {
		return bad()
	}
	c.last, c.hasLast = ms, true
	if k {
		c.hasCand, c.cand = true, ms
		if cand != "" {
			if c.cand, ok = parseMillis([]byte(cand)); !ok || c.cand >= c.last {
				return bad()
			}
		}
	}
	return c, nil
}

// plainCursor returns the plain cursor that covers every candle up to and
// including the one that opens at t, the format every version reads.
func plainCursor(t time.Time) []byte { return strconv.AppendInt(nil, t.UnixMilli(), 10) }

// shownCandle returns the open time of the last candle the provider showed
// up to a cursor (its "k" forms): a candle stored once the cursor was
// committed. False when the cursor does not say: none shown yet, or a
// plain cursor of an earlier version. Unlike [DecodeCursor], whose time
// may end a stretch confirmed empty, it names a candle that exists (see
// [FileSink.Check]).
func shownCandle(b []byte) (time.Time, bool) {
	c, err := parseCursor(b)
	if err != nil || !c.hasLast || !c.hasCand {
		return time.Time{}, false
	}
	return time.UnixMilli(c.cand).UTC(), true
}

// DecodeCursor returns the open time of the last candle a cursor covers
// (see the package doc); a plain cursor of earlier versions is
// just that time. A cursor that covers no candle yet (a confirmation
// pending before any) is an error.
func DecodeCursor(b []byte) (time.Time, error) {
	c, err := parseCursor(b)
	if err != nil {
		return time.Time{}, err
	}
	if !c.hasLast {
		return time.Time{}, fmt.Errorf("klines: cursor %q covers no candle yet", clip(string(b)))
	}
	return time.UnixMilli(c.last).UTC(), nil
}
