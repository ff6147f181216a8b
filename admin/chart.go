package admin

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/forage-go/forage/schedule"
)

// This file draws the status page's charts as inline SVG, server-side:
// numbers only, so there is nothing to escape and no script to run.

// The size of a provider's chart, in SVG user units (CSS pixels).
const (
	chartW = 320
	chartH = 90
)

// chart is one provider's chart over the history's span: polylines of
// "x,y" points for the pacing rate, the learned ceiling, the attempts sent
// per second and the refusals per second, on one scale up to Top.
type chart struct {
	W, H                          int
	Rate, Ceiling, Sent, Refusals string
	Top                           string // the scale's top, e.g. "12.5/s"
	Span                          string // what the x axis covers, e.g. "10m0s"
	Points                        int    // samples drawn
	Label                         string // what the chart shows, for screen readers
}

// chartOf draws samples (oldest first) over the span that ends at now,
// every apart at most historyLen samples.
func chartOf(now time.Time, samples []sample, every time.Duration) chart {
	span := every * historyLen
	c := chart{W: chartW, H: chartH, Span: span.String(), Points: len(samples)}
	sent, refused := make([]float64, len(samples)), make([]float64, len(samples))
	top := 1.0
	for i, s := range samples {
		if i > 0 {
			p := samples[i-1]
			if dt := s.at.Sub(p.at).Seconds(); dt > 0 && s.requests >= p.requests && s.throttled >= p.throttled {
				sent[i] = float64(s.requests-p.requests) / dt
				refused[i] = float64(s.throttled-p.throttled) / dt
			}
		}
		top = max(top, s.rate, s.ceiling, sent[i], refused[i])
	}
	top = niceTop(top)
	c.Top = strconv.FormatFloat(top, 'g', 4, 64) + "/s"
	x := func(at time.Time) float64 {
		return math.Max(0, float64(chartW)*(1-now.Sub(at).Seconds()/span.Seconds()))
	}
	y := func(v float64) float64 { return float64(chartH) * (1 - v/top) }
	line := func(v func(int) float64, from int) string {
		var b strings.Builder
		for i := from; i < len(samples); i++ {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(samples[i].at), y(v(i)))
		}
		return b.String()
	}
	c.Rate = line(func(i int) float64 { return samples[i].rate }, 0)
	c.Ceiling = line(func(i int) float64 { return samples[i].ceiling }, 0)
	c.Sent = line(func(i int) float64 { return sent[i] }, 1)
	c.Refusals = line(func(i int) float64 { return refused[i] }, 1)
	last := sample{}
	if len(samples) > 0 {
		last = samples[len(samples)-1]
	}
	c.Label = fmt.Sprintf("the last %s: rate now %.2f/s, ceiling %.2f/s, %d samples", span, last.rate, last.ceiling, len(samples))
	return c
}

// niceTop rounds v up to 1, 2 or 5 times a power of ten, for a readable
// scale.
func niceTop(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// stateBar is one state's part of the jobs-by-state bar.
type stateBar struct {
	State schedule.State
	N     int
	X, W  float64 // in percent of the bar
	Color string
}

// states lists every job state, in the order the status page shows them.
var states = []schedule.State{
	schedule.StateIdle, schedule.StateQueued, schedule.StateRunning, schedule.StateWaitingRateLimit,
	schedule.StateFailed, schedule.StatePaused, schedule.StateSuccess,
}

// stateColors gives each job state its color in the bar.
var stateColors = map[schedule.State]string{
	schedule.StateIdle: "#9ab", schedule.StateQueued: "#68c", schedule.StateRunning: "#2a7",
	schedule.StateWaitingRateLimit: "#d90", schedule.StateSuccess: "#37c", schedule.StateFailed: "#c33",
	schedule.StatePaused: "#888",
}

// stateBars splits a bar of 100% among the states by their job counts.
func stateBars(jobs map[schedule.State]int, states []schedule.State) []stateBar {
	total := 0
	for _, s := range states {
		total += jobs[s]
	}
	var out []stateBar
	x := 0.0
	for _, s := range states {
		if jobs[s] == 0 {
			continue
		}
		w := 100 * float64(jobs[s]) / float64(total)
		color := stateColors[s]
		if color == "" {
			color = "#bbb"
		}
		out = append(out, stateBar{State: s, N: jobs[s], X: x, W: w, Color: color})
		x += w
	}
	return out
}
