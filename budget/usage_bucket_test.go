package budget_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// TestUsageHeadersOfABucketOfOneHoldNoRateDown: a 10.1/s provider that
// allows no burst and sends IETF usage headers ("RateLimit-Remaining: 0,
// RateLimit-Reset: 1" after every request it admits, and on its refusals
// and a gateway's 502s behind it) is served, over 5 s and 30 s, by eight
// workers with the default Config, within 3 points of what the same
// provider without the headers is served. Each 503 and each 502 paused the
// provider for the rounded-up second: 16-17% of it over 5 s, 57-78% over
// 30 s, where the same provider with no headers was served 79% and 90%;
// with 429 and 5% of 502s, 52% over 30 s against 81%. (A drawing of
// goodput-http -random found it.)
func TestUsageHeadersOfABucketOfOneHoldNoRateDown(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		t.Skip("a measurement, ten times slower under the race detector")
	}
	row := func(status int, noise, ietf bool) shortRow {
		cfg := providertest.Config{Seed: 7, Limit: providertest.Limit{Rate: 10.1, Burst: 1}, Answer: providertest.Answer{Status: status},
			Latency: 3 * time.Millisecond, Jitter: 3 * time.Millisecond, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}}
		cfg.Headers.IETF = ietf
		rate := 10.1
		if noise {
			cfg.FaultRate, cfg.Faults = 0.05, []providertest.Fault{http.StatusBadGateway}
			rate *= 0.95
		}
		return shortRow{cfg: cfg, rate: rate, workers: 8}
	}
	for _, v := range []struct {
		name   string
		status int
		noise  bool
	}{
		{"503", http.StatusServiceUnavailable, false},
		{"503 + 5% 502", http.StatusServiceUnavailable, true},
		{"429 + 5% 502", 0, true},
	} {
		for _, run := range []time.Duration{5 * time.Second, 30 * time.Second} {
			for seed := range uint64(3) {
				with, without := row(v.status, v.noise, true), row(v.status, v.noise, false)
				with.run, without.run = run, run
				with.cfg.Seed += seed
				without.cfg.Seed += seed
				w, wo := runShort(t, with, noJitter), runShort(t, without, noJitter)
				if w.goodput < wo.goodput-0.03 {
					t.Errorf("%s, %v, seed %d: goodput %.1f%% with the headers, %.1f%% without; want within 3 points",
						v.name, run, with.cfg.Seed, 100*w.goodput, 100*wo.goodput)
				}
			}
		}
	}
}
