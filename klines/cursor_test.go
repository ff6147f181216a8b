package klines

import (
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// cursorGen draws a cursor Fetch could write: a base (none, a plain time,
// a candle, or a stretch's end after the last candle known) and at most
// one of a claim to confirm or rows to verify.
func cursorGen() *rapid.Generator[cursor] {
	return rapid.Custom(func(t *rapid.T) cursor {
		var c cursor
		ms := rapid.Int64Range(-1<<40, 1<<42)
		switch rapid.IntRange(0, 3).Draw(t, "base") {
		case 1:
			c.last, c.hasLast = ms.Draw(t, "last"), true
		case 2:
			c.last, c.hasLast, c.hasCand = ms.Draw(t, "last"), true, true
			c.cand = c.last
		case 3:
			c.last, c.hasLast, c.hasCand = ms.Draw(t, "last"), true, true
			c.cand = c.last - rapid.Int64Range(1, 1<<30).Draw(t, "before")
		}
		switch rapid.IntRange(0, 2).Draw(t, "pending") {
		case 1:
			c.hasConfirm, c.confirm, c.confirmCandle = true, ms.Draw(t, "confirm"), rapid.Bool().Draw(t, "candle")
			c.again = rapid.Bool().Draw(t, "again")
		case 2:
			if c.hasLast {
				c.hasSeen, c.seen, c.count, c.sum = true, ms.Draw(t, "seen"), rapid.IntRange(1, 1000).Draw(t, "count"), rapid.Uint64().Draw(t, "sum")
			}
		}
		return c
	})
}

// TestCursorSpellings pins which texts are cursors: each has one
// spelling, so a cursor that reads is the one Fetch wrote.
func TestCursorSpellings(t *testing.T) {
	t.Parallel()
	for s, ok := range map[string]bool{
		"1": true, "-60000": true, "1k": true, "5k1": true, "?5": true, "?5k": true, "1k?5": true, "1k~9:3:af": true,
		"": true, "k": false, "1k1": false, "1k2": false, "01": false, "1?01": false, "~1:1:1": false, "1~1:01:a": false,
		"1~1:1:0a": false, "1~2:3:A": false, "1~2:3:+a": false, "1~2:0:a": false, "1~2:1001:a": false, "1?5?6": false, "1x": false,
		"1k?5kr": true, "?5r": true, "1?5rk": false, "1?5rr": false, "1r": false, "1~9:3:afr": false,
	} {
		c, err := parseCursor([]byte(s))
		if (err == nil) != ok || err == nil && c.String() != s {
			t.Fatalf("%q reads as %+v (%q), %v: want ok %v", s, c, c.String(), err, ok)
		}
	}
}

// TestPropCursorRoundTrips: every cursor reads back as itself; a plain
// time, as every earlier version wrote it, reads as that time and nothing
// pending; and any bytes read without a panic, as a cursor that encodes
// back to those bytes, or an error.
func TestPropCursorRoundTrips(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := cursorGen().Draw(t, "cursor")
		back, err := parseCursor(c.bytes())
		if err != nil || back != c {
			t.Fatalf("%q reads as %+v (%v), want %+v", c.String(), back, err, c)
		}
		ms := rapid.Int64().Draw(t, "plain")
		if p, err := DecodeCursor(strconv.AppendInt(nil, ms, 10)); err != nil || p.UnixMilli() != ms {
			t.Fatalf("plain %d decodes as %v, %v", ms, p, err)
		}
		raw := rapid.SliceOf(rapid.SampledFrom([]byte("0123456789-k?~:abf"))).Draw(t, "bytes")
		if c, err := parseCursor(raw); err == nil && c.String() != string(raw) {
			t.Fatalf("%q reads as %+v, which encodes as %q", raw, c, c.String())
		}
	})
}
