package budget_test

// The random sweep: providers drawn at random over what the tables do not
// pin (limit, burst allowance, workers, latency, arrival jitter, whether
// Retry-After comes, whether a fifth refusal in a minute bans), each driven
// for 30 simulated seconds through budget.Provider (zero Config) under
// testing/synctest. No row is a target: it is where a change meets
// providers nobody tuned for, and its aggregates (bans, mean goodput) are
// compared before and after a change to the control law. Runs with several
// workers are not exactly repeatable under synctest, so only the
// aggregates over many providers mean anything.
//
// Run: make sweep (SWEEP=120 go test -run TestSweep -v ./budget)
//   SWEEP=n           how many providers (default off: the test skips)
//   SWEEP_FROM=k      start at provider k (each is drawn from its index)
//   SWEEP_ONLY=k      only provider k (trace it with SHORT_TRACE=1)
//   SWEEP_KIND=slow   limits of 2-12/s instead of 4-60/s
//   SWEEP_KIND=small  limits of 3-15/s, allowances of 2-6, Retry-After, half banning
//   SWEEP_RUN=2m      simulated run length (default 30s)
//   SWEEP_WORKERS=8   every provider driven by this many workers
//   SWEEP_BANS=all    every provider bans at the fifth refusal in a minute
//   SWEEP_BANS=none   none does
//   SWEEP_LATMUL=4    every provider this many times farther away

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// sweepProvider is one provider of the random sweep.
type sweepProvider struct {
	limit   float64
	burst   int
	workers int
	latency time.Duration
	jitter  time.Duration // arrival (send-to-server) jitter
	bare    bool          // 429 without Retry-After
	bans    bool          // bans at the fifth refusal in a minute
}

// drawSweep draws provider i of the sweep of kind (see the file comment).
func drawSweep(i int, kind string) sweepProvider {
	r := rand.New(rand.NewPCG(uint64(i), 99))
	p := sweepProvider{
		limit:   4 + r.Float64()*56,
		workers: 1 + r.IntN(8),
		latency: time.Duration(1+r.IntN(60)) * time.Millisecond,
		jitter:  time.Duration(r.ExpFloat64() * 1.5e6),
		bare:    r.IntN(4) == 0,
		bans:    r.IntN(4) == 0,
	}
	switch r.IntN(3) {
	case 0:
		p.burst = 1
	case 1:
		p.burst = 2 + r.IntN(4)
	default:
		p.burst = 1 + r.IntN(25)
	}
	switch kind {
	case "slow":
		p.limit = 2 + r.Float64()*10
	case "small":
		p.limit, p.burst, p.bare, p.bans = 3+r.Float64()*12, 2+r.IntN(5), false, r.IntN(2) == 0
	}
	return p
}

func TestSweep(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SWEEP"))
	if n <= 0 {
		t.Skip("the random sweep runs with SWEEP=n (make sweep)")
	}
	from, _ := strconv.Atoi(os.Getenv("SWEEP_FROM"))
	only, kind := os.Getenv("SWEEP_ONLY"), os.Getenv("SWEEP_KIND")
	run, _ := time.ParseDuration(os.Getenv("SWEEP_RUN")) // 0: shortRun
	workers, _ := strconv.Atoi(os.Getenv("SWEEP_WORKERS"))
	latMul, _ := strconv.ParseFloat(os.Getenv("SWEEP_LATMUL"), 64)
	bans := os.Getenv("SWEEP_BANS")
	var banned, banners int
	var goodputs []float64
	for i := from; i < from+n; i++ {
		if only != "" && only != strconv.Itoa(i) {
			continue
		}
		p := drawSweep(i, kind)
		if workers > 0 {
			p.workers = workers
		}
		if latMul > 0 {
			p.latency = time.Duration(float64(p.latency) * latMul)
		}
		switch bans {
		case "all":
			p.bans = true
		case "none":
			p.bans = false
		}
		a := providertest.Answer{NoRetryAfter: p.bare}
		if p.bans {
			a.BanAfter = 5
			banners++
		}
		cfg := providertest.Config{Seed: uint64(i + 1), Limit: providertest.Limit{Rate: p.limit, Burst: p.burst}, Answer: a,
			Latency: p.latency, Jitter: p.latency / 4, UplinkJitter: p.jitter, Symbols: []providertest.Symbol{{Name: "BTCUSDT"}}}
		// What the workers could send at most, one request each in flight.
		most := float64(p.workers) / (p.latency + p.latency/8).Seconds()
		res := runShort(t, shortRow{name: "sweep", cfg: cfg, rate: min(p.limit, most), workers: p.workers, run: run}, noJitter)
		if res.bans > 0 {
			banned++
		}
		goodputs = append(goodputs, res.goodput)
		t.Logf("%4d %5.1f/s burst %2d, %d workers %-5v away, jitter %-8v retry-after %-5v bans at 5 %-5v: goodput %5.1f%% refused %5.2f%% bans %d learned %.1f/s",
			i, p.limit, p.burst, p.workers, p.latency, p.jitter.Round(10*time.Microsecond), !p.bare, p.bans, 100*res.goodput, 100*res.refused, res.bans, res.learned)
	}
	if len(goodputs) == 0 {
		return
	}
	slices.Sort(goodputs)
	mean := 0.0
	for _, g := range goodputs {
		mean += g / float64(len(goodputs))
	}
	t.Logf("%d providers: banned %d of the %d that ban at five; goodput mean %.1f%%, tenth %.1f%%, median %.1f%%",
		len(goodputs), banned, banners, 100*mean, 100*goodputs[len(goodputs)/10], 100*goodputs[len(goodputs)/2])
}
