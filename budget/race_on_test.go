//go:build race

package budget_test

// raceEnabled reports whether the race detector is on: the goodput tables
// are measurements, ten times slower under it, and run from make goodput.
const raceEnabled = true
