package aimd

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
)

// fitEpoch is the send-time origin of the fit tests.
var fitEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// bucketRun sends at a rate per phase, pausing between phases, to a token
// bucket (rate, burst), full at the first request, and logs every answer
// as the controller does. It returns the log and the fastest rate sent at.
func bucketRun(t *rapid.T, rate, burst float64) (*fitLog, float64) {
	var l fitLog
	level, now, last, top := burst, time.Duration(0), time.Duration(0), 0.0
	for p := range rapid.IntRange(1, 6).Draw(t, "phases") {
		x := rapid.Float64Range(0.3, 3).Draw(t, "share") * rate
		top = max(top, x)
		n := rapid.IntRange(1, 200).Draw(t, "requests")
		gap := time.Duration(float64(time.Second) / x).Round(fitUnit)
		if p > 0 {
			now += rapid.SampledFrom([]time.Duration{0, 100 * time.Millisecond, time.Second, 2 * time.Second}).Draw(t, "pause")
		}
		for range n {
			level = min(burst, level+rate*(now-last).Seconds())
			last = now
			kind := forage.Throttled
			if level >= 1 {
				level, kind = level-1, forage.Success
			}
			l.note(fitEpoch.Add(now), kind, false)
			now += gap
		}
	}
	return &l, top
}

// TestFitFindsTheBucket: whatever a client sent to a token bucket, at
// whatever rates and pauses, when the fit names a band of rates the
// bucket's own rate lies in it (to within a step of the fit's grid).
func TestFitFindsTheBucket(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(1, 300).Draw(t, "rate")
		burst := float64(rapid.IntRange(1, 40).Draw(t, "burst"))
		l, top := bucketRun(t, rate, burst)
		top *= fitAbove
		if rate < top/fitSpan {
			return // under where the fit looks
		}
		es := slices.Clone(l.e)
		f, ok := l.fit(top)
		if !ok {
			return
		}
		if rate > f.hi*fitRatio || f.named && rate < f.lo/fitRatio {
			slices.Sort(es)
			for r := top / fitSpan; r <= top; r *= fitRatio {
				m, _, p := fitMargin(es, r, fitJitter)
				t.Logf("%.4f %.3f %v", r, m, p)
			}
			for _, r := range []float64{rate * 0.99, rate, rate * 1.01} {
				m, _, p := fitMargin(es, r, fitJitter)
				t.Logf("at %.4f %.3f %v", r, m, p)
			}
			t.Fatalf("bucket %.2f/s burst %.0f: band [%.2f, %.2f]", rate, burst, f.lo, f.hi)
		}
	})
}

// TestFitNeverMisleadsOnGarbage: any log at all (answers at random times,
// in any order) either fits no bucket or names a finite, positive band
// under the top it was given, and never panics.
func TestFitNeverMisleadsOnGarbage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l fitLog
		for range rapid.IntRange(0, 300).Draw(t, "n") {
			at := time.Duration(rapid.Int64Range(0, int64(10*time.Second)).Draw(t, "at"))
			kind := rapid.SampledFrom([]forage.Class{forage.Success, forage.Throttled, forage.Overloaded, forage.Transient}).Draw(t, "kind")
			l.note(fitEpoch.Add(at), kind, false)
		}
		top := rapid.Float64Range(0.01, 1e4).Draw(t, "top")
		f, ok := l.fit(top)
		if ok && !(f.lo > 0 && f.lo <= f.hi && f.hi <= top*(1+1e-9)) {
			t.Fatalf("band [%v, %v] for top %v", f.lo, f.hi, top)
		}
	})
}

// TestFitLogStops: the log keeps the first fitLogSize answers and is
// dropped for good after, or when told to stop; a log from before a long
// pause or a shared controller is no single bucket's.
func TestFitLogStops(t *testing.T) {
	var l fitLog
	for i := range fitLogSize + 1 {
		l.note(fitEpoch.Add(time.Duration(i)*time.Millisecond), forage.Success, false)
	}
	if !l.off || l.e != nil {
		t.Fatalf("after %d answers: off %v, %d kept; want dropped", fitLogSize+1, l.off, len(l.e))
	}
	var m fitLog
	m.note(fitEpoch, forage.Success, false)
	m.note(fitEpoch.Add(time.Millisecond), forage.Throttled, true)
	if !m.off || m.e != nil {
		t.Fatalf("told to stop: off %v, %d kept; want dropped", m.off, len(m.e))
	}
}

// BenchmarkFit measures the fit of a full log (fitLogSize answers: a
// climb, then episodes at a 50/s bucket with a burst of 10 after pauses),
// which runs at most once per cut.
func BenchmarkFit(b *testing.B) {
	var l fitLog
	level, now, last := 10.0, time.Duration(0), time.Duration(0)
	x := 4.0
	for len(l.e) < fitLogSize-1 {
		level = min(10, level+50*(now-last).Seconds())
		last = now
		kind := forage.Throttled
		if level >= 1 {
			level, kind = level-1, forage.Success
		}
		l.note(fitEpoch.Add(now), kind, false)
		if kind == forage.Throttled {
			now += time.Second
			x = 55
		} else {
			x = min(x*1.02, 120)
		}
		now += time.Duration(float64(time.Second) / x)
	}
	b.ReportAllocs()
	for b.Loop() {
		keep := l
		keep.e = append([]fitEntry(nil), l.e...)
		if _, ok := keep.fit(130); !ok {
			b.Fatal("no fit")
		}
	}
}

// TestFitLogStopsWhenTheAnswersAreNoOneBucket: the controller drops the log
// once its answers stop being one bucket's: when it sees a share of the
// traffic, when a refusal asks for a long pause (a spent window, a ban),
// and when its 503s turn out to be noise.
func TestFitLogStopsWhenTheAnswersAreNoOneBucket(t *testing.T) {
	ok := Signal{Class: forage.Success, Latency: 10 * time.Millisecond}
	for name, setup := range map[string]func(c *Controller) Signal{
		"share":      func(c *Controller) Signal { c.SetShare(0.5); return ok },
		"long pause": func(*Controller) Signal { return Signal{Class: forage.Throttled, RetryAfter: time.Minute} },
		"noise":      func(c *Controller) Signal { c.noise.noisy = true; return ok },
	} {
		t.Run(name, func(t *testing.T) {
			c, err := New(Config{})
			if err != nil {
				t.Fatal(err)
			}
			now := fitEpoch
			for range 10 {
				now = now.Add(100 * time.Millisecond)
				c.ObserveAt(now, ok)
			}
			if c.fits.off || len(c.fits.e) != 10 {
				t.Fatalf("before: off %v, %d logged; want on, 10", c.fits.off, len(c.fits.e))
			}
			c.ObserveAt(now.Add(100*time.Millisecond), setup(c))
			if !c.fits.off || c.fits.e != nil {
				t.Fatalf("after: off %v, %d logged; want dropped", c.fits.off, len(c.fits.e))
			}
		})
	}
}

// TestFitLogOffAfterARestart: a controller that starts from a state an
// earlier process learned keeps no log: the provider's allowance at its
// first request is not known to be full, as the fit takes it to be. One
// restored in the middle of a run (a process sharing a provider adopting
// the shared rate) keeps it.
func TestFitLogOffAfterARestart(t *testing.T) {
	ok := Signal{Class: forage.Success, Latency: 10 * time.Millisecond}
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(State{Rate: 10, Ceiling: 20, Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	c.ObserveAt(fitEpoch, ok)
	if !c.fits.off {
		t.Fatalf("restored before its first answer: off %v, %d logged; want dropped", c.fits.off, len(c.fits.e))
	}
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	d.ObserveAt(fitEpoch, ok)
	if err := d.Restore(State{Rate: 10, Ceiling: 20}); err != nil {
		t.Fatal(err)
	}
	d.ObserveAt(fitEpoch.Add(100*time.Millisecond), ok)
	if d.fits.off || len(d.fits.e) != 2 {
		t.Fatalf("restored mid-run: off %v, %d logged; want kept, 2", d.fits.off, len(d.fits.e))
	}
}

// climbLog logs a climb from 10/s, ×1.5 every 100 ms, up to top and 40
// requests at it (every request admitted): the log as slow start leaves
// it.
func climbLog(l *fitLog, top float64) time.Duration {
	now, x, atTop := time.Duration(0), 10.0, 0
	for next := 100 * time.Millisecond; atTop < 40; {
		l.note(fitEpoch.Add(now), forage.Success, false)
		now += time.Duration(float64(time.Second) / x).Round(fitUnit)
		if x == top {
			atTop++
		}
		if now >= next {
			x, next = min(x*1.5, top), next+100*time.Millisecond
		}
	}
	return now
}

// TestFitNamesNoLargeAllowanceFromTwoRefusals: any two refusals fit some
// bucket. A provider that allows no burst at 200/s, admitting slow start's
// climb to 213/s and refusing (by arrival jitter: the request before was
// held up on its way) at its top and then at 113/s, 34 requests after a
// second's pause, fits 25/s with an allowance of about 140; traced over
// loopback HTTP, that fit held the rate at 24/s for the rest of the run
// (12.7% of the limit). With as much jitter in the latencies, such a fit
// waits for a third refusal; a bucket with that allowance then draws one
// where it says, and is named. Latencies without jitter name it at once,
// as before (a large allowance hides a limit that bans at five).
func TestFitNamesNoLargeAllowanceFromTwoRefusals(t *testing.T) {
	l := fitLog{jitter: 4 * time.Millisecond} // 3 ms of latency, 7 at the 95th percentile
	now, x := climbLog(&l, 213), 113.0
	l.note(fitEpoch.Add(now), forage.Throttled, false)
	now += time.Second
	for range 34 {
		l.note(fitEpoch.Add(now), forage.Success, false)
		now += time.Duration(float64(time.Second) / x).Round(fitUnit)
	}
	l.note(fitEpoch.Add(now), forage.Throttled, false)
	top := x * fitAbove
	still := fitLog{e: slices.Clone(l.e)} // latencies that show no jitter
	if f, ok := l.fit(top); ok && (f.named || f.hi < top/fitAbove) {
		t.Fatalf("two refusals: band [%.1f, %.1f] named %v, allowance %.0f; want nothing under the refused rate", f.lo, f.hi, f.named, f.burst)
	}
	if f, ok := still.fit(top); !ok || !f.named {
		t.Fatalf("two refusals, no jitter in the latencies: band [%.1f, %.1f] named %v (ok %v); want named, as before", f.lo, f.hi, f.named, ok)
	}

	// The bucket the two refusals fit: 25/s, an allowance of 140.
	var b fitLog
	level, last := 140.0, time.Duration(0)
	now, x = 0, 10
	next, refusals := 100*time.Millisecond, 0
	for refusals < 3 {
		level = min(140, level+25*(now-last).Seconds())
		last = now
		if level < 1 {
			b.note(fitEpoch.Add(now), forage.Throttled, false)
			refusals++
			now, x = now+time.Second, []float64{113, 87, 87}[refusals-1]
			continue
		}
		level--
		b.note(fitEpoch.Add(now), forage.Success, false)
		now += time.Duration(float64(time.Second) / x).Round(fitUnit)
		if refusals == 0 && now >= next {
			x, next = x*1.5, next+100*time.Millisecond
		}
	}
	f, ok := b.fit(87 * fitAbove)
	if !ok || !f.named || f.lo > 25*fitRatio || f.hi < 25/fitRatio {
		t.Fatalf("three refusals of a 25/s bucket with an allowance of 140: band [%.1f, %.1f] named %v (ok %v); want 25/s named", f.lo, f.hi, f.named, ok)
	}
}
