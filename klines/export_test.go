package klines

import "time"

// Exports for the external tests (package klines_test) only.
var (
	ValidDecimal = validDecimal
	Time         = msTime
	EncodeCursor = plainCursor
	ShownCandle  = shownCandle
)

// MaxAnswer is maxAnswer, for the external tests.
const MaxAnswer = maxAnswer

// Has reports whether the candle that opens at t is stored.
func (s *FileSink) Has(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.have[t.UnixMilli()]
}

// Len returns how many candles are stored.
func (s *FileSink) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.have)
}
