package klines

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/redact"
)

// maxAnswer is the largest klines answer read, in bytes: 1000 rows of
// Binance's format take about 200 KiB, so an answer past 8 MiB is not a
// page of klines.
const maxAnswer = 8 << 20

// errTooLarge is the error of an answer longer than maxAnswer.
var errTooLarge = errors.New("klines: answer larger than 8 MiB")

// readBody reads a whole answer, or fails with errTooLarge past maxAnswer
// rather than hand a truncated body to the decoder.
func readBody(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, maxAnswer+1))
	if err == nil && len(body) > maxAnswer {
		return nil, errTooLarge
	}
	return body, err
}

// decode parses a klines answer for the window w and checks it: the rows,
// or an error saying how the answer breaks the contract.
func (s *Source) decode(body []byte, w checkpoint.Range, limit int) ([]Candle, error) {
	rows, err := parse(body)
	if err != nil {
		return nil, err
	}
	return rows, s.check(w, rows, limit)
}

// check enforces what a klines answer for the window w promises: at most
// limit rows, open times on the interval's boundaries, inside w (a zero
// w.Start means no lower bound), strictly ascending (oldest first, no
// duplicates), and prices and volume that are decimal numbers (see
// [validDecimal]). A provider that breaks it would otherwise make the
// cursor skip or repeat candles, or put its text in the store.
func (s *Source) check(w checkpoint.Range, rows []Candle, limit int) error {
	if len(rows) > limit {
		return fmt.Errorf("klines: the answer holds %d rows, more than the %d asked", len(rows), limit)
	}
	for i, c := range rows {
		t := c.OpenTime
		switch {
		case !s.floor(t).Equal(t):
			return fmt.Errorf("klines: row %d opens at %v, not on a %s boundary", i, t, s.Interval)
		case t.Before(w.Start) || !t.Before(w.End):
			return fmt.Errorf("klines: row %d opens at %v, outside the asked window %v", i, t, w)
		case i > 0 && t.Equal(rows[i-1].OpenTime):
			return fmt.Errorf("klines: row %d repeats the open time %v", i, t)
		case i > 0 && t.Before(rows[i-1].OpenTime):
			return fmt.Errorf("klines: row %d opens at %v, before row %d at %v: rows must be oldest first", i, t, i-1, rows[i-1].OpenTime)
		}
		if err := c.check(); err != nil {
			return fmt.Errorf("klines: row %d: %w", i, err)
		}
	}
	return nil
}

// check fails unless c's prices and volume are decimal numbers.
func (c Candle) check() error {
	for j, v := range c.values() {
		if !validDecimal(v) {
			return fmt.Errorf("the %s at %v is %q, not a decimal number", valueNames[j], c.OpenTime, clip(v))
		}
	}
	return nil
}

// values returns c's prices and volume in file order.
func (c Candle) values() [5]string { return [5]string{c.Open, c.High, c.Low, c.Close, c.Volume} }

// valueNames name Candle.values in messages.
var valueNames = [5]string{"open", "high", "low", "close", "volume"}

// maxDecimal is the longest decimal accepted, in bytes: Binance sends at
// most 8 decimals after 12 or so digits.
const maxDecimal = 64

// validDecimal reports whether v is a plain non-negative decimal number as
// Binance writes prices and volumes: digits, optionally a point and more
// digits ("16843.21000000"), at most 64 bytes. No sign, exponent, spaces,
// NaN or Inf: klines prices and volumes are never negative, and nothing
// else may reach a store.
func validDecimal(v string) bool {
	if len(v) == 0 || len(v) > maxDecimal {
		return false
	}
	digits, point := 0, -1
	for i := 0; i < len(v); i++ {
		switch b := v[i]; {
		case b >= '0' && b <= '9':
			digits++
		case b == '.' && point < 0 && digits > 0:
			point = i
		default:
			return false
		}
	}
	return point != len(v)-1
}

// clip shortens v for an error message and redacts any secret in it (a
// URL's query values or credentials, a secret key's value): v may be a
// provider's text.
func clip(v string) string {
	if len(v) > maxDecimal {
		v = v[:maxDecimal] + "..."
	}
	return redact.String(v)
}

// apiError turns a provider's error body ({"code":-1121,"msg":"Invalid
// symbol."}) into an error carrying its message, redacted: a provider may
// echo a signed request URL back.
func apiError(status int, body []byte) error {
	var e struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}
	if json.Unmarshal(body, &e) == nil && e.Msg != "" {
		return fmt.Errorf("klines: provider said %d %s (code %d)", status, redact.String(e.Msg), e.Code)
	}
	return fmt.Errorf("klines: provider said %d", status)
}

// errorObject reads a 200 answer whose body is Binance's error object
// ({"code":-1000,"msg":"…"}) instead of klines: the error it says, marked
// with its class by the code: the server's own trouble (-1000 unknown,
// -1001 disconnected, -1006 unexpected response, -1007 timeout, -1008
// overloaded) is worth a retry; too many requests (-1003, -1015) is
// throttled; any other code (a bad symbol or parameter) is permanent. It
// returns nil for any other body.
func errorObject(body []byte) error {
	var e struct {
		Code *int   `json:"code"`
		Msg  string `json:"msg"`
	}
	if json.Unmarshal(body, &e) != nil || e.Code == nil {
		return nil
	}
	err := fmt.Errorf("klines: provider said %q (code %d) with HTTP 200", redact.Clip(redact.String(e.Msg), 200), *e.Code)
	switch *e.Code {
	case -1000, -1001, -1006, -1007, -1008:
		return forage.Mark(err, forage.Transient)
	case -1003, -1015:
		return forage.Mark(err, forage.Throttled)
	}
	return forage.Mark(err, forage.Permanent)
}

// errNull is the error of an answer that is JSON null, not an array.
var errNull = errors.New("klines: the provider answered null, not an array of klines")

// parse decodes Binance's array-of-arrays kline format.
func parse(body []byte) ([]Candle, error) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal(body, &rows); err != nil {
		return nil, fmt.Errorf("klines: decode: %w", err)
	}
	if rows == nil {
		return nil, errNull
	}
	out := make([]Candle, 0, len(rows))
	for i, row := range rows {
		if len(row) < 6 {
			return nil, fmt.Errorf("klines: row %d has %d fields, want at least 6", i, len(row))
		}
		var ms int64
		if err := json.Unmarshal(row[0], &ms); err != nil {
			return nil, fmt.Errorf("klines: row %d open time: %w", i, err)
		}
		c := Candle{OpenTime: time.UnixMilli(ms).UTC()}
		for j, dst := range []*string{&c.Open, &c.High, &c.Low, &c.Close, &c.Volume} {
			if err := json.Unmarshal(row[j+1], dst); err != nil {
				return nil, fmt.Errorf("klines: row %d field %d: %w", i, j+1, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}
