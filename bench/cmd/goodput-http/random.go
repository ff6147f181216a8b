package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/forage-go/forage/providertest"
)

// The rows drawn at random (-random N): providers nobody tuned for, in real
// time, as budget/sweep_test.go draws them in simulated time. Row i is
// drawn from i and -seed alone, so a row re-runs by itself (-random 1
// -random-from i, or -rows '#i:').
const (
	// maxRandom bounds -random: 500 rows of two 30 s cells at -parallel 4
	// is over two hours already.
	maxRandom = 500
	// maxRandomFrom bounds -random-from.
	maxRandomFrom = 1_000_000
)

// Every window a drawn fixed window may have divides 30 s, so a 30 s or
// 120 s run (aligned to a window's start, see runCell) spans whole windows
// and the count pro-rated to the run is exactly what it could serve; a
// window that halves divides 15 s, so the halving at half such a run falls
// on a window's start too.
var (
	drawnWindows       = []int{1, 2, 3, 5, 6, 10, 15, 30}
	drawnHalvedWindows = []int{1, 3, 5, 15}
)

// randomRows returns the n rows drawn from row from on, under seed.
func randomRows(from, n int, seed uint64) []row {
	rs := make([]row, n)
	for k := range rs {
		rs[k] = drawRow(from+k, seed)
	}
	return rs
}

// drawRow draws row i under seed. Every parameter is drawn on every call,
// in a fixed order, so changing one share leaves the others' draws alone:
//
//   - the limit: 4–60/s, or (a fifth) 2–12/s, to 0.1/s; a GCRA with burst
//     1 (a third), 2–5 (a third) or 1–25 (a third), or (a sixth) a fixed
//     window of about the same rate over 1–30 s (see drawnWindows);
//   - the answer: 429 with Retry-After, a bare 429 (a quarter), a 503 (a
//     tenth) or a slow-down (a twentieth); and, but for a slow-down, a ban
//     of 2 minutes after 5 refusals a minute (a quarter);
//   - the IETF usage headers (a sixth), half of them with Binance's
//     X-MBX-USED-WEIGHT-1M;
//   - random faults (a sixth): 5% or 10% of the admitted requests, 502 or
//     a plain-text 503;
//   - a limit that halves at half the run (a tenth);
//   - the provider's latency: 1–60 ms, plus a uniform extra of up to a
//     third of it, in whole milliseconds.
//
// The row's name states all of it (see drawnName). Drawn rows are long
// (measured at long runs too) and shared (the pg clients run against them
// when named).
func drawRow(i int, seed uint64) row {
	r := rand.New(rand.NewPCG(uint64(i), seed))
	slow, rate, slowRate := r.IntN(5) == 0, 4+56*r.Float64(), 2+10*r.Float64()
	if slow {
		rate = slowRate
	}
	rate = math.Round(rate*10) / 10
	burst := [3]int{1, 2 + r.IntN(4), 1 + r.IntN(25)}[r.IntN(3)]
	fixed, halves := r.IntN(6) == 0, r.IntN(10) == 0
	windows := drawnWindows
	if halves {
		windows = drawnHalvedWindows
	}
	window := time.Duration(windows[r.IntN(len(windows))]) * time.Second
	answer, bans := r.IntN(20), r.IntN(4) == 0
	headers, binance := r.IntN(6) == 0, r.IntN(2) == 0
	faulty, faultRate, fault := r.IntN(6) == 0, [2]float64{0.05, 0.10}[r.IntN(2)],
		[2]providertest.Fault{http.StatusBadGateway, http.StatusServiceUnavailable}[r.IntN(2)]
	latency := 1 + r.IntN(60)
	jitter := r.IntN(latency/3 + 1)

	rw := row{
		limit:   providertest.Limit{Rate: rate, Burst: burst},
		halves:  halves,
		latency: time.Duration(latency) * time.Millisecond,
		jitter:  time.Duration(jitter) * time.Millisecond,
		long:    true,
		shared:  true,
	}
	if fixed {
		rw.limit = providertest.Limit{Count: max(int(math.Round(rate*window.Seconds())), 1), Window: window}
	}
	switch {
	case answer < 5:
		rw.answer.NoRetryAfter = true
	case answer < 7:
		rw.answer.Status = http.StatusServiceUnavailable
	case answer == 7:
		rw.answer.SlowDown = true
	}
	if bans && !rw.answer.SlowDown {
		rw.answer.BanAfter, rw.answer.BanWindow, rw.answer.BanFor = 5, time.Minute, 2*time.Minute
	}
	if headers {
		rw.headers = providertest.Headers{IETF: true, Binance: binance}
	}
	if faulty {
		rw.faultRate, rw.faults = faultRate, []providertest.Fault{fault}
	}
	rw.name = drawnName(i, rw)
	return rw
}

// drawnName names drawn row i by all it drew, e.g. "random #7: gcra
// 23.4/s burst 5, bare 429, bans, +5% 503, 37+12ms" (the latency, then
// the uniform extra of up to so much).
func drawnName(i int, rw row) string {
	parts := []string{fmt.Sprintf("gcra %g/s burst %d", rw.limit.Rate, rw.limit.Burst)}
	if rw.fixedWindow() {
		parts[0] = fmt.Sprintf("window %d/%v", rw.limit.Count, rw.limit.Window)
	}
	a := rw.answer
	switch {
	case a.SlowDown:
		parts = append(parts, "slow-down")
	case a.Status == http.StatusServiceUnavailable:
		parts = append(parts, "503")
	case a.NoRetryAfter:
		parts = append(parts, "bare 429")
	default:
		parts = append(parts, "429+retry-after")
	}
	if a.BanAfter > 0 {
		parts = append(parts, "bans")
	}
	switch h := rw.headers; {
	case h.IETF && h.Binance:
		parts = append(parts, "IETF + MBX headers")
	case h.IETF:
		parts = append(parts, "IETF headers")
	}
	if rw.faultRate > 0 {
		parts = append(parts, fmt.Sprintf("+%g%% %d", 100*rw.faultRate, rw.faults[0]))
	}
	if rw.halves {
		parts = append(parts, "halves mid-run")
	}
	parts = append(parts, fmt.Sprintf("%d+%dms", rw.latency.Milliseconds(), rw.jitter.Milliseconds()))
	return fmt.Sprintf("random #%d: %s", i, strings.Join(parts, ", "))
}

// drawnLabel returns the "#7" of a drawn row's name.
func drawnLabel(name string) string {
	label, _, _ := strings.Cut(strings.TrimPrefix(name, "random "), ":")
	return label
}

// aggregate renders, for the rows drawn at random, one line per client
// and run length: the rows measured, the goodput's mean, tenth percentile
// and median over them (the sweep's order statistics: the values at n/10
// and n/2 of the sorted n), the mean refused share, and the rows banned of
// those that ban. Failed cells are counted apart and left out of the rest.
func aggregate(rs []row, cols []string, durs []time.Duration, get func(row, string, time.Duration) (result, bool)) string {
	var b strings.Builder
	b.WriteString("the drawn rows at a glance: goodput over the rows (mean, tenth percentile, median), mean refused share, rows banned of those that ban\n\n")
	b.WriteString("| client | run | rows | goodput mean | tenth | median | refused mean | banned |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range cols {
		for _, d := range durs {
			var goodputs []float64
			var refused float64
			var failed, banners int
			var banned []string
			for _, rw := range rs {
				r, ok := get(rw, c, d)
				switch {
				case !ok:
					continue
				case r.Failed:
					failed++
					continue
				}
				goodputs = append(goodputs, r.Goodput)
				refused += r.RefusedShare
				if rw.answer.BanAfter > 0 {
					banners++
					if r.Bans > 0 {
						banned = append(banned, drawnLabel(rw.name))
					}
				}
			}
			n := len(goodputs)
			if n+failed == 0 {
				continue
			}
			rows := fmt.Sprint(n)
			if failed > 0 {
				rows += fmt.Sprintf(" (%d failed)", failed)
			}
			if n == 0 {
				fmt.Fprintf(&b, "| %s | %s | %s | – | – | – | – | – |\n", c, d, rows)
				continue
			}
			slices.Sort(goodputs)
			mean := 0.0
			for _, g := range goodputs {
				mean += g / float64(n)
			}
			ban := fmt.Sprintf("%d of %d", len(banned), banners)
			if len(banned) > 0 {
				ban += ": " + strings.Join(banned, ", ")
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.1f%% | %.1f%% | %.1f%% | %.2f%% | %s |\n",
				c, d, rows, 100*mean, 100*goodputs[n/10], 100*goodputs[n/2], 100*refused/float64(n), ban)
		}
	}
	return b.String()
}
