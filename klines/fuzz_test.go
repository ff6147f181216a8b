package klines

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// FuzzFileRecord: the file record codec. A candle is encoded as exactly one
// line that decodes to it, or refused with nothing appended; a file of
// candles the sink accepted reads back as exactly those candles, whatever
// text the refused ones held; and any bytes decode without a panic into
// records each of which is a whole line of the input, as it would have
// been written: no line yields a row that was not written as that line,
// and a line that is not a record stops the read, named, never skipped.
func FuzzFileRecord(f *testing.F) {
	f.Add(int64(60000), "824.45", "825", "824", "824.5", "3", []byte("60000,1,2,0.5,1.5,10\n"))
	f.Add(int64(0), "1\n60000,6.66,6.66,6.66,6.66,6.66", "1", "1", "1", "1", []byte("x\n60000,6.66,6.66,6.66,6.66,6.66"))
	f.Add(int64(-60000), "NaN", "+Inf", "", "1e3", "-1", []byte("+1,1,1,1,1,1\n-0,1,1,1,1,1\n01,1,1,1,1,1\n"))
	f.Add(int64(1<<62), "0.00000001", "1,2", "1.", ".5", `"1"`, []byte("1,1,1,1,1,1,1\n\n1,1,1,1,1"))
	f.Fuzz(func(t *testing.T, ms int64, o, h, l, c, v string, junk []byte) {
		x := Candle{OpenTime: msTime(ms), Open: o, High: h, Low: l, Close: c, Volume: v}
		line, err := appendRecord([]byte("prefix\n"), x)
		switch {
		case err != nil && string(line) != "prefix\n":
			t.Fatalf("refused %+v (%v) but appended %q", x, err, line)
		case err != nil && x.check() == nil, err == nil && x.check() != nil:
			t.Fatalf("appendRecord(%+v) = %v, but check says %v", x, err, x.check())
		}
		var file []byte
		var wrote []Candle
		for _, w := range []Candle{{OpenTime: msTime(ms - 1), Open: "1", High: "1", Low: "1", Close: "1", Volume: "1"}, x, {OpenTime: msTime(ms + 1), Open: "2", High: "2", Low: "2", Close: "2", Volume: "2"}} {
			if b, err := appendRecord(file, w); err == nil {
				file, wrote = b, append(wrote, w)
			}
		}
		var read []Candle
		if err := eachRecord("f", file, func(c Candle) { read = append(read, c) }); err != nil || len(read) != len(wrote) {
			t.Fatalf("wrote %d records %q, read %d (%v): %+v", len(wrote), file, len(read), err, read)
		}
		for i := range read {
			if !same(read[i], wrote[i]) {
				t.Fatalf("record %d reads %+v, wrote %+v", i, read[i], wrote[i])
			}
		}
		lines := make(map[string]bool)
		for _, l := range bytes.Split(junk, []byte{'\n'}) {
			lines[string(l)] = true
		}
		n := 0
		err = eachRecord("f", junk, func(c Candle) {
			n++
			b, err := appendRecord(nil, c)
			if err != nil || !lines[string(bytes.TrimSuffix(b, []byte{'\n'}))] {
				t.Fatalf("%q yields %+v, which is not one of its lines (%v)", junk, c, err)
			}
		})
		// Every line is a record, or the read stops, naming the first that
		// is not: nothing is skipped.
		whole := bytes.Count(junk, []byte{'\n'})
		if !bytes.HasSuffix(junk, []byte{'\n'}) && len(junk) > 0 {
			whole++
		}
		if err == nil && n != whole || err != nil && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("f line %d ", n+1))) {
			t.Fatalf("%q: %d records of %d lines, then %v", junk, n, whole, err)
		}
	})
}

// same reports whether a and b are the same candle.
func same(a, b Candle) bool {
	return a.OpenTime.Equal(b.OpenTime) && a.values() == b.values()
}

// FuzzParsePage: any answer body, for any window and page size, is decoded
// without a panic, and the rows it accepts keep the klines contract: at
// most the page, on the interval's boundaries, inside the window, strictly
// ascending, with decimal values that the file sink stores and reads back
// unchanged. Fetched as a page (the same body answering the confirmation),
// what it stores is contiguous, closed, inside the slice's span, and the
// cursor stays inside it too.
func FuzzParsePage(f *testing.F) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	f.Add([]byte(`[[1893456000000,"1","2","0.5","1.5","10",1893456059999,"15",3,"5","7","0"]]`), uint16(5), uint16(0), uint16(60))
	f.Add([]byte(`[[1893456060000,"1","2","0.5","1.5","10"],[1893456000000,"1","2","0.5","1.5","10"]]`), uint16(5), uint16(0), uint16(60))
	f.Add([]byte(`[[1893456000000,"1\n1893456000000,6.66","2","0.5","1.5","10"]]`), uint16(1), uint16(0), uint16(2))
	f.Add([]byte(`null`), uint16(3), uint16(1), uint16(3))
	f.Add([]byte(`[]`), uint16(3), uint16(1), uint16(3000))
	f.Add([]byte(`[[1893456000001,"1","2","0.5","1.5","10"],[1893456120000,"1","2","0.5","1.5",null]]`), uint16(9), uint16(0), uint16(9))
	f.Fuzz(func(t *testing.T, body []byte, page, start, span uint16) {
		now := time.UnixMilli(base).UTC().Add(48 * time.Hour).Add(30 * time.Second)
		s := &Source{Base: "http://x", Symbol: "A", Interval: "1m", Page: int(page%1000) + 1, Now: func() time.Time { return now },
			Client: &http.Client{Transport: fixedBody(body)}}
		if err := s.Init(); err != nil {
			t.Fatal(err)
		}
		from := time.UnixMilli(base).UTC().Add(time.Duration(start%3000) * time.Minute)
		w := checkpoint.Range{Start: from, End: from.Add(time.Duration(span%3000+1) * time.Minute)}
		rows, err := s.decode(body, w, s.Page)
		if err == nil {
			if len(rows) > s.Page {
				t.Fatalf("%d rows accepted, more than the page %d", len(rows), s.Page)
			}
			for i, c := range rows {
				ms := c.OpenTime.UnixMilli()
				if ms%60000 != 0 || c.OpenTime.Before(w.Start) || !c.OpenTime.Before(w.End) || i > 0 && !c.OpenTime.After(rows[i-1].OpenTime) {
					t.Fatalf("row %d accepted at %v in window %v, after %v", i, c.OpenTime, w, rows[max(i-1, 0)].OpenTime)
				}
				line, err := appendRecord(nil, c)
				if back, ok := parseRecord(bytes.TrimSuffix(line, []byte{'\n'})); err != nil || !ok || !same(back, c) {
					t.Fatalf("row %d %+v accepted, but the sink stores it as %q (%v) and reads %+v", i, c, line, err, back)
				}
			}
		}
		pg, out := s.Fetch(context.Background(), slice.Slice{Range: w})
		if out.Err != nil {
			if len(pg.Records) > 0 {
				t.Fatalf("a failed fetch (%v) returned %d records", out.Err, len(pg.Records))
			}
			return
		}
		if c, err := parseCursor(pg.Next); err == nil && c.hasConfirm {
			// A claim of a stretch without candles, to confirm: nothing
			// kept, nothing covered, the stretch inside the span.
			if T := msTime(c.confirm); len(pg.Records) > 0 || !pg.Covered.IsZero() || !T.After(w.Start) || T.After(w.End) {
				t.Fatalf("a claim up to %v with %d records, covered %v, in the span %v", T, len(pg.Records), pg.Covered, w)
			}
			return
		}
		next, err := DecodeCursor(pg.Next)
		if err != nil || next.Before(w.Start.Add(-time.Minute)) || !next.Before(w.End) {
			t.Fatalf("cursor %v (%v) outside the span %v", next, err, w)
		}
		for i, c := range pg.Records {
			if !c.OpenTime.Before(now.Truncate(time.Minute)) || i > 0 && !c.OpenTime.Equal(pg.Records[i-1].OpenTime.Add(time.Minute)) {
				t.Fatalf("record %d at %v: not closed or not contiguous", i, c.OpenTime)
			}
		}
		if n := len(pg.Records); n > 0 && !pg.Records[n-1].OpenTime.Equal(next) {
			t.Fatalf("cursor %v, but the last record opens at %v", next, pg.Records[n-1].OpenTime)
		}
		if !pg.Covered.IsZero() && (pg.Covered.Start.Before(w.Start) || pg.Covered.End.After(w.End)) {
			t.Fatalf("covered %v outside the span %v", pg.Covered, w)
		}
	})
}

// fixedBody answers every request with body, status 200.
type fixedBody []byte

func (b fixedBody) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(string(b))), Header: http.Header{}}, nil
}
