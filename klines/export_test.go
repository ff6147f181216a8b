package klines

// Exports for the external tests (package klines_test) only.
var (
	ValidDecimal = validDecimal
	Time         = msTime
)

// MaxAnswer is maxAnswer, for the external tests.
const MaxAnswer = maxAnswer
