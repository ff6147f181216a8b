package cfgerr_test

import (
	"errors"
	"testing"

	"github.com/forage-go/forage/internal/cfgerr"
)

var (
	errA = errors.New("a: invalid config")
	errB = errors.New("b: invalid config")
)

func TestMustFormatAndSentinel(t *testing.T) {
	t.Parallel()
	err := cfgerr.For("a", errA).Must("Config.Rate", "be > 0", -1)
	if got, want := err.Error(), "a: Config.Rate must be > 0 (got -1)"; got != want {
		t.Errorf("Must = %q, want %q", got, want)
	}
	if !errors.Is(err, errA) || errors.Is(err, errB) {
		t.Errorf("%v: Is(errA)=%v Is(errB)=%v, want true, false", err, errors.Is(err, errA), errors.Is(err, errB))
	}
}

func TestWrapKeepsBothSentinels(t *testing.T) {
	t.Parallel()
	inner := cfgerr.For("b", errB).Must("Config.X", "be >= 0", -2)
	err := cfgerr.For("a", errA).Wrap("Config.Nested", inner)
	if got, want := err.Error(), "a: Config.Nested: b: Config.X must be >= 0 (got -2)"; got != want {
		t.Errorf("Wrap = %q, want %q", got, want)
	}
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Errorf("%v matches errA %v, errB %v; want both", err, errors.Is(err, errA), errors.Is(err, errB))
	}
}
