package klines

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// The file format is one record per line, "open_time_ms,open,high,low,
// close,volume\n", the format of every file the sink has written. The
// codec cannot be forged by provider data: a record is written only if
// each value is a plain decimal (validDecimal: digits and one point, no
// comma, quote or newline), and a line is read back only if it is exactly
// such a record. Whatever a provider sends, the bytes it contributes to a
// line are digits and points, so it cannot end a line early or add a field.

// appendRecord appends c's record to b, or fails, appending nothing, if a
// value of c is not a decimal number.
func appendRecord(b []byte, c Candle) ([]byte, error) {
	if err := c.check(); err != nil {
		return b, fmt.Errorf("klines: cannot store it: %w", err)
	}
	b = strconv.AppendInt(b, c.OpenTime.UnixMilli(), 10)
	for _, v := range c.values() {
		b = append(append(b, ','), v...)
	}
	return append(b, '\n'), nil
}

// parseRecord decodes one line, without its newline, and reports whether
// it is a record appendRecord could have written.
func parseRecord(line []byte) (Candle, bool) {
	var f [6][]byte
	for i := range f {
		field, rest, found := bytes.Cut(line, []byte{','})
		if found == (i == len(f)-1) {
			return Candle{}, false // too few or too many fields
		}
		f[i], line = field, rest
	}
	ms, ok := parseMillis(f[0])
	if !ok {
		return Candle{}, false
	}
	c := Candle{OpenTime: msTime(ms), Open: string(f[1]), High: string(f[2]), Low: string(f[3]), Close: string(f[4]), Volume: string(f[5])}
	return c, c.check() == nil
}

// parseMillis parses an open time as appendRecord writes it: an optional
// minus and decimal digits, nothing else (strconv alone would take "+1").
func parseMillis(b []byte) (int64, bool) {
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	return ms, err == nil && !(ms == 0 && len(b) > 1)
}

// ErrCorrupt is wrapped by the error of a candle file with a line that is
// not a record: [OpenFileSink] and [Export] refuse such a file rather than
// skip the line, since the stream's checkpoint is past its candle and it
// would never be fetched again.
var ErrCorrupt = errors.New("klines: corrupt candle file")

// eachRecord calls f with every record in data, the contents of the file
// at path, in file order. A line that is not a record is corruption (a
// line torn by a crash is cut before this is called): eachRecord stops
// there with an error wrapping ErrCorrupt that names the file and the line
// and says how to recover. A line never yields more than one record.
func eachRecord(path string, data []byte, f func(Candle)) error {
	for n := 1; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		c, ok := parseRecord(line)
		if !ok {
			return fmt.Errorf("%w: %s line %d is not a candle record (%q): move the file aside and reset the stream's checkpoint, so every candle is fetched again, "+
				"or delete the line and reset the checkpoint to before the candle it held", ErrCorrupt, path, n, clip(string(line)))
		}
		f(c)
		data = rest
	}
	return nil
}
