//go:build !race

package budget_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
