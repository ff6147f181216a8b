package aimd

import (
	"math"
	"slices"
	"time"

	"github.com/forage-go/forage"
)

// The bucket fit. Most providers limit with a token bucket (a GCRA): rate
// L, burst allowance B, full when idle. Which buckets would have answered
// every request of the run so far as the provider did, each at the time it
// was sent? Slow start alone bounds the limit only from above (any bucket
// with a large enough allowance admits a climb); a refusal after a pause
// then leaves a band of rates, each with its own allowance, which every
// later answer narrows; after a third refusal it is usually one rate. The
// band holds the episode estimate and the two-point estimate as special
// cases, and unlike them it uses every answer, including those of requests
// that were still in flight when a refusal came back (the usual case at
// tens of milliseconds of latency, where those two cannot count).
const (
	// fitLogSize is how many answers the fit keeps: the first ones of a
	// run, where the limit is found.
	fitLogSize = 1024
	// fitUnit is the resolution of a logged send time: 2^31 units is six
	// hours.
	fitUnit = 10 * time.Microsecond
	// fitFastest is the fastest rate the fit looks at, in requests per
	// fitUnit: its clock must resolve a hundredth of one interval, so
	// 1000/s.
	fitFastest = 0.01
	// fitBefore is how long before the first answered request the log's
	// clock starts.
	fitBefore = time.Minute
	// fitRatio is the ratio between two rates the fit tries.
	fitRatio = 1.02
	// fitSpan is how far under the refused rate the fit looks, as a
	// factor; fitAbove, how far over it.
	fitSpan  = 10.0
	fitAbove = 1.1
	// fitOutliers is how many admitted requests (0 or 1) may have been
	// admitted against the model: a request held up on its way to the
	// provider arrives later than it was sent, with more of the allowance
	// refilled.
	fitOutliers = 1
	// fitJitter is how much sooner after the request before it a refused
	// request may have reached the provider than it was sent: the one
	// before was held up on its way. By the model it then had up to
	// rate × fitJitter of a token more than it did.
	fitJitter = 2 * time.Millisecond
	// fitMinRefusals is how many refusals, answered apart, the fit needs
	// to name a bucket whose allowance is over fitLargeAllowance's worth
	// of its rate, when a provider that allows no burst at the fastest
	// rate admitted, refused by arrival jitter (as much as the latencies
	// show, up to fitFastJitter), explains the answers too (see fit).
	// fitPeakRun is how many admitted requests in a row that rate is
	// measured over: more than a slow bucket's small allowance admits at
	// once over its rate (16 at 35/s is an allowance of 12 over 9.8/s).
	fitMinRefusals    = 3
	fitLargeAllowance = time.Second
	fitFastJitter     = 5 * time.Millisecond
	fitPeakRun        = 16
	// fitTight is how far apart, as a factor, the lowest and the highest
	// rate that fit may lie for the fit to name the limit.
	fitTight = 1.2
	// fitLongPause is the longest pause a refusal may ask for that a
	// bucket explains: a longer one is a spent window or a ban.
	fitLongPause = 5 * time.Second
	// fitRefine is how many steps the fit takes to look closer between
	// two rates of its grid, at most fitRefines times.
	fitRefine  = 24
	fitRefines = 4
	// fitNear is how close under 0, in requests, the margin of a rate of
	// the grid must be for the fit to look closer around it.
	fitNear = 0.5
)

// fitEntry is one answer: when its request was sent, in fitUnits since the
// log's base, shifted left by one, with the low bit set if it was
// admitted.
type fitEntry uint32

func (e fitEntry) at() int64 { return int64(e >> 1) }
func (e fitEntry) ok() bool  { return e&1 == 1 }

// fitLog keeps the first fitLogSize answers of a run, for the fit. It is
// dropped when full, when the answers stop being a bucket's (a long pause,
// a share of the traffic), or once the fit has named the limit. Not safe
// for concurrent use; the Controller's mutex guards it.
type fitLog struct {
	base   time.Time
	e      []fitEntry
	off    bool
	jitter time.Duration // the arrival jitter the latencies show (see Controller.arrivalJitter)
}

// note records the answer of class kind to a request sent at sent, or
// drops the log for good when stop is set.
func (l *fitLog) note(sent time.Time, kind forage.Class, stop bool) {
	if stop {
		l.drop()
	}
	if l.off || sent.IsZero() {
		return
	}
	ok := kind == forage.Success
	if !ok && kind != forage.Throttled && kind != forage.Overloaded {
		return // says nothing of the bucket
	}
	if l.e == nil {
		// Answers come back out of order: leave room for requests sent
		// before the first one answered.
		l.base = sent.Add(-fitBefore)
		l.e = make([]fitEntry, 0, 64)
	}
	d := max(sent.Sub(l.base), 0) / fitUnit
	if len(l.e) == fitLogSize || d >= 1<<31 {
		l.drop()
		return
	}
	e := fitEntry(d) << 1
	if ok {
		e |= 1
	}
	l.e = append(l.e, e)
}

// drop forgets the log for good.
func (l *fitLog) drop() { l.off, l.e = true, nil }

// restart forgets the answers so far: the log starts again at the next
// one (a log dropped for good stays so).
func (l *fitLog) restart() { l.e = nil }

// fitResult is the band of rates of the buckets that answer as the
// provider did, and whether it names the limit: it is narrower than
// fitTight, and no bucket that allows no burst explains the answers (one
// that does fits at any rate over the fastest sent at: see fitMargin).
type fitResult struct {
	lo, hi float64
	named  bool
	burst  float64 // the least allowance at lo
}

// fit returns the band of rates in [top/fitSpan, top] at which a token
// bucket, full at the first request, answers every logged request as the
// provider did (with some allowance), or ok false when none does, or when
// the band reaches the bottom: the answers do not bound the rate from
// below (slow start's, or a fixed window spent until its reset, which
// looks like a bucket with next to no rate). A band that names the limit
// (see fitResult) drops the log: its work is done.
func (l *fitLog) fit(top float64) (fitResult, bool) {
	if l.off || len(l.e) < 8 || !(top > 0) || top*fitUnit.Seconds() > fitFastest {
		return fitResult{}, false
	}
	es := slices.Clone(l.e)
	slices.Sort(es) // by send time: the order the provider saw them in
	if !slices.ContainsFunc(es, func(e fitEntry) bool { return !e.ok() }) {
		return fitResult{}, false
	}
	bottom := top / fitSpan
	var grid, margin []float64
	lo, hi, plain := math.Inf(1), 0.0, false
	seen := func(r float64) { lo, hi = min(lo, r), max(hi, r) }
	for rate := bottom; rate <= top*(1+1e-9); rate *= fitRatio {
		m, _, p := fitMargin(es, rate, fitJitter)
		if p || m >= 0 {
			seen(rate)
		}
		plain = plain || p
		grid, margin = append(grid, rate), append(margin, m)
	}
	// A band narrower than the grid's step lies between two rates of it,
	// where the margin is near 0 or peaks: look closer there, lowest
	// first (the bottom of the band sets the rate), up to the lowest rate
	// of the grid that fits.
	for i, refined := 1, 0; i < len(grid)-1 && grid[i] < lo && refined < fitRefines; i++ {
		m := margin[i]
		if math.IsInf(m, -1) || m < -fitNear && (m < margin[i-1] || m < margin[i+1]) {
			continue
		}
		refined++
		a, b := grid[i-1], grid[i+1]
		for range fitRefine {
			m1, m2 := a+(b-a)/3, b-(b-a)/3
			if fitRoom(es, m1) < fitRoom(es, m2) {
				a = m1
			} else {
				b = m2
			}
		}
		if x := (a + b) / 2; fitRoom(es, x) >= 0 {
			seen(x)
		}
	}
	if hi == 0 || lo <= bottom*fitRatio {
		return fitResult{}, false
	}
	if plain {
		hi = top // bounded only by the rates sent at
	}
	_, burst, _ := fitMargin(es, lo, fitJitter)
	if burst > lo*fitLargeAllowance.Seconds() && fitRefusals(es) < fitMinRefusals {
		// A large allowance at a low rate, from two refusals, explains a
		// climb admitted far over that rate; so may a provider that
		// allows no burst at the climb's top, refused by a few
		// milliseconds of arrival jitter (a 200/s provider refused at
		// 113/s a second after slow start's 213/s fitted 25/s with an
		// allowance of 140, and held there). When it does, with as much
		// jitter as the latencies show (up to fitFastJitter), a third
		// refusal tells them apart.
		// Such a provider is looked for from the fastest rate slow start
		// was admitted over fitPeakRun requests in a row (proof that the
		// provider admits fast traffic, which no slow bucket with a
		// small allowance gives) up to twice it: fitPeak averages a run
		// of slow start, whose last requests went faster still. (Looked
		// for at fitPeak's rate alone, a 200/s provider refused by
		// arrival jitter at 112/s a second after slow start's exit was
		// fitted as 18/s with an allowance of 49, and held there for
		// the minute: 9% of it over two minutes; measured over 32
		// requests, slow start's fastest was under the refused rate.
		// Looked for at any rate over the refused one without that
		// proof, a 9.8/s provider
		// with an allowance of 9 that bans at seven refusals a minute,
		// refused with 18 requests in flight, was taken for a plain
		// 40/s, and banned.)
		if peak := fitPeak(es); peak > top {
			for r := peak; r <= 2*peak && r*fitUnit.Seconds() <= fitFastest; r *= fitRatio {
				if _, _, p := fitMargin(es, r, min(l.jitter, fitFastJitter)); p {
					return fitResult{}, false
				}
			}
		}
	}
	named := !plain && hi <= fitTight*lo
	if named {
		l.drop()
	}
	return fitResult{lo: lo, hi: hi, named: named, burst: burst}, true
}

// fitMargin returns how much room the answers leave a bucket of the given
// rate with an allowance, judged with up to jitter of arrival jitter (see
// fitJitter): the largest allowance at which it refuses every
// refused request, less the smallest at which it admits every admitted one
// (all but fitOutliers), and that least allowance, need. A bucket of that
// rate fits when the margin is >= 0. When only a bucket that allows no
// burst, refusing within the jitter of full, explains the refusals, the
// margin is -Inf; plain then says whether such a bucket admits every
// admitted request: it fits too (a provider that
// allows no burst draws refusals from arrival jitter alone, at any rate
// over the one sent at), and bounds the limit from neither side.
//
// Whatever the allowance B, a bucket that admitted the admitted requests
// holds B + D tokens at each request, where D, the deficit, is the least
// over every earlier request s of rate·(t - s) less the requests admitted
// in [s, t) (the bucket was last full at one of them); so one pass finds
// the least B that had a token for each admitted request and the most
// that had none for each refused one.
func fitMargin(es []fitEntry, rate float64, jitter time.Duration) (margin, need float64, plain bool) {
	slack := rate * jitter.Seconds()
	perUnit := rate * fitUnit.Seconds()
	need, need2, most := 1.0, 1.0, math.Inf(1)
	peak, admitted := math.Inf(-1), 0.0
	for _, e := range es {
		x := perUnit*float64(e.at()) - admitted
		peak = max(peak, x)
		d := x - peak // <= 0
		if e.ok() {
			if v := 1 - d; v > need {
				need, need2 = v, need
			} else if v > need2 {
				need2 = v
			}
			admitted++
			continue
		}
		most = min(most, 1+slack-d)
	}
	if fitOutliers > 0 {
		need = need2
	}
	least := 1 + 2*slack
	if most < least {
		return math.Inf(-1), need, need <= least
	}
	return most - need, need, false
}

// fitRoom is fitMargin's margin alone.
func fitRoom(es []fitEntry, rate float64) float64 {
	m, _, _ := fitMargin(es, rate, fitJitter)
	return m
}

// fitRefusals returns how many runs of refused requests es (sorted by send
// time) holds: the refusals the provider answered apart, each with the
// echoes sent with it.
func fitRefusals(es []fitEntry) int {
	n := 0
	for i, e := range es {
		if !e.ok() && (i == 0 || es[i-1].ok()) {
			n++
		}
	}
	return n
}

// fitPeak returns the fastest rate the admitted requests of es (sorted by
// send time) were sent at, over fitPeakRun of them in a row: slow start's
// top, usually.
func fitPeak(es []fitEntry) float64 {
	var ok []int64
	for _, e := range es {
		if e.ok() {
			ok = append(ok, e.at())
		}
	}
	peak := 0.0
	for i := fitPeakRun; i < len(ok); i++ {
		if d := ok[i] - ok[i-fitPeakRun]; d > 0 {
			peak = max(peak, fitPeakRun/(float64(d)*fitUnit.Seconds()))
		}
	}
	return peak
}

// applyFit narrows what the last cut set to the band of rates the fit
// finds (see fitLog), once the first request sent after the cut is
// answered: by then the requests sent before it, still in flight at the
// cut, are answered too, and a refused request is judged with every one
// that went before it. The fit only lowers: a band that names the limit
// puts the ceiling in its middle, confirmed, and the rate just under its
// bottom, and gives the allowance (as the two-point estimate does); a
// wider one under the refused rate bounds the ceiling by its top, and the
// rate by spreadCut under it.
func (c *Controller) applyFit(now time.Time) {
	top := c.fitTop
	c.fitTop = 0
	c.fits.jitter = c.arrivalJitter()
	f, ok := c.fits.fit(top)
	if !ok {
		return
	}
	rate, w, confirmed := f.hi*spreadCut, c.bound(f.hi), c.confirmed
	switch {
	case f.named:
		rate, w, confirmed = f.lo*episodeMargin, c.bound(math.Sqrt(f.lo*f.hi)), true
		c.allowance = f.burst
		c.refillCeil = false // measured, not guessed
	case f.hi >= top/fitAbove:
		return // bounded only by the refused rate: nothing new
	}
	rate = c.clamp(min(c.rate, rate, w))
	if rate == c.rate && w >= c.ceiling && confirmed == c.confirmed {
		return // the band says nothing the cut did not
	}
	if w < c.ceiling {
		c.declCeil = false
	}
	c.ceiling, c.confirmed = min(c.ceiling, w), confirmed
	c.rate, c.postCut = rate, min(c.postCut, rate)
	c.fitClimb()
	c.hist.reset(now, c.rate)
}
