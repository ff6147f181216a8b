package klines_test

import (
	"testing"

	"github.com/forage-go/forage/klines"
)

// TestOpenFileSinkRefusesAPath: a symbol or interval that would name a
// file outside the directory ("../x" wrote beside it; found by a review)
// is refused, as is an interval whose count overflows a step.
func TestOpenFileSinkRefusesAPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range [][2]string{{"../escaped", "1m"}, {"BTCUSDT", "../1m"}, {"..", "1m"}, {"a/b", "1m"}, {"", "1m"}} {
		if s, err := klines.OpenFileSink(dir, c[0], c[1]); err == nil {
			_ = s.Close()
			t.Errorf("OpenFileSink(%q, %q) = nil error, want a refusal", c[0], c[1])
		}
	}
	for _, iv := range []string{"20211507185753197s", "5000000w", "0m", "-1h"} {
		if d, err := klines.Step(iv); err == nil {
			t.Errorf("Step(%q) = %v, want an error", iv, d)
		}
	}
}
