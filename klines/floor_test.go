package klines_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/forage-go/forage/klines"
)

// TestStep reads an interval's length; an unknown interval is an error.
func TestStep(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		interval, want string
	}{{"1m", "1m0s <nil>"}, {"4h", "4h0m0s <nil>"}, {"1w", "168h0m0s <nil>"}, {"1M", `0s klines: unknown interval "1M"`}} {
		d, err := klines.Step(c.interval)
		if got := fmt.Sprint(d, " ", err); got != c.want {
			t.Errorf("Step(%q) = %s, want %s", c.interval, got, c.want)
		}
	}
}

// Candles are aligned as the exchange aligns them: to the Unix epoch, and
// weeks to Mondays; 3d candles differ from time.Truncate's year 1 by two
// days.
func TestFloorAlignsAsTheExchange(t *testing.T) {
	at := time.Date(2000, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		interval string
		want     time.Time
	}{
		{"1m", at},
		{"1h", at},
		{"1d", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"3d", time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC)},
		{"1w", time.Date(1999, 12, 27, 0, 0, 0, 0, time.UTC)}, // a Monday
	} {
		step, err := klines.Step(c.interval)
		if err != nil {
			t.Fatal(err)
		}
		if got := klines.Floor(at, step); !got.Equal(c.want) {
			t.Errorf("Floor(%v, %s) = %v, want %v", at, c.interval, got, c.want)
		}
	}
}
