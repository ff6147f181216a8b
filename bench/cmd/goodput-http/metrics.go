package main

import (
	"slices"
	"time"
)

// successes returns the times at which 200 answers were written within
// [0, run], ascending: the server's count of what the client got.
func successes(events []event, run time.Duration) []time.Duration {
	var out []time.Duration
	for _, e := range events {
		if e.status == 200 && e.done >= 0 && e.done <= run {
			out = append(out, e.done)
		}
	}
	slices.Sort(out)
	return out
}

// firstArrival returns the arrival of the earliest request, and false if
// there was none.
func firstArrival(events []event) (time.Duration, bool) {
	if len(events) == 0 {
		return 0, false
	}
	first := events[0].at
	for _, e := range events[1:] {
		first = min(first, e.at)
	}
	return first, true
}

// t90 returns the time from first until the successes in a sliding second
// (t-1s, t] first reach 90% of what the provider serves per second at t
// (limit(t), in requests per second, already net of noise), and false if
// they never do. ok must be ascending.
func t90(ok []time.Duration, first time.Duration, limit func(time.Duration) float64) (time.Duration, bool) {
	lo := 0
	for hi, t := range ok {
		for ok[lo] <= t-time.Second {
			lo++
		}
		if float64(hi-lo+1) >= 0.9*limit(t) {
			return max(t-first, 0), true
		}
	}
	return 0, false
}

// perSecond buckets events by the second of their answer (for 200s) or
// arrival (for the rest) into counts of successes, refusals (429, 418 and
// 503 answers of the limit, told apart from noise by the caller's refused
// func), and everything else, for traces.
func perSecond(events []event, run time.Duration, refused func(event) bool) [][3]int {
	out := make([][3]int, int((run+time.Second-1)/time.Second))
	for _, e := range events {
		t, k := e.at, 2
		switch {
		case e.status == 200:
			t, k = e.done, 0
		case refused(e):
			k = 1
		}
		if s := int(t / time.Second); t >= 0 && s < len(out) {
			out[s][k]++
		}
	}
	return out
}

// work returns each of the first n symbols' part of the 200s answered
// within [0, run]: the work each process of a pg client did.
func work(events []event, run time.Duration, n int) []float64 {
	out := make([]float64, n)
	total := 0
	for _, e := range events {
		if e.status == 200 && e.done >= 0 && e.done <= run {
			total++
			if e.sym >= 0 && e.sym < n {
				out[e.sym]++
			}
		}
	}
	for i := range out {
		out[i] /= float64(max(total, 1))
	}
	return out
}

// measure fills k from the successes ok (ascending) of a run of length run
// against rw: the share of the limit served in the 5 s before the kill and
// from one lease after it to the end, and the time until 90% of the limit
// was served within a second again.
func (k *killReport) measure(rw row, ok []time.Duration, run time.Duration) {
	served := func(from, to time.Duration) float64 {
		from = max(from, 0)
		if to <= from {
			return 0
		}
		lo, _ := slices.BinarySearch(ok, from)
		hi, _ := slices.BinarySearch(ok, to)
		return float64(hi-lo) / (rw.rate(k.At, run) * (1 - rw.faultRate) * (to - from).Seconds())
	}
	k.Before = served(k.At-5*time.Second, k.At)
	k.After = served(k.At+lease, run)
	i, _ := slices.BinarySearch(ok, k.At)
	k.Recover, k.Recovered = t90(ok[i:], k.At, func(t time.Duration) float64 {
		return rw.rate(t, run) * (1 - rw.faultRate)
	})
}
