package main

import (
	"fmt"
	"strconv"
	"time"
)

// maxStep bounds an interval: a year, more than any exchange's longest
// candle (a month).
const maxStep = 366 * 24 * time.Hour

// intervalStep returns the length of a Binance interval ("1m", "4h",
// "1w"), or an error for an unknown one: the rule klines.Source.Init
// checks its Interval by.
func intervalStep(interval string) (time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	if len(interval) < 2 {
		return 0, fmt.Errorf("unknown interval %q", interval)
	}
	n, err := strconv.Atoi(interval[:len(interval)-1])
	u, ok := units[interval[len(interval)-1]]
	if err != nil || !ok || n <= 0 || time.Duration(n) > maxStep/u {
		return 0, fmt.Errorf("unknown interval %q", interval) // a huge count would overflow
	}
	return time.Duration(n) * u, nil
}

// candleFloor returns the open time of the candle of length step that
// contains t, as Binance aligns candles: to the Unix epoch, and weeks to
// Mondays (1970-01-05). It is not time.Time.Truncate, which counts from
// the year 1: the two differ for 3d candles by two days.
func candleFloor(t time.Time, step time.Duration) time.Time {
	var off int64
	if step%(7*24*time.Hour) == 0 {
		off = (4 * 24 * time.Hour).Milliseconds()
	}
	ms, d := t.UnixMilli(), step.Milliseconds()
	if d <= 0 {
		return t.UTC()
	}
	m := (ms - off) % d
	if m < 0 {
		m += d
	}
	return time.UnixMilli(ms - m).UTC()
}
