package aimd

import "time"

// Thresholds for reading a refusal episode as a spent quota.
const (
	// quotaMinRefusal: shorter refusals are ordinary overshoots. Two
	// refusals with a second's Retry-After each, back to back (the first
	// request after the pause refused too: a hiccup, another client, a
	// jitter), span 2 s; read as a spent quota, they set a 17/s
	// provider's ceiling to the 7.6/s its cycle delivered.
	quotaMinRefusal = 2500 * time.Millisecond
	quotaMinShare   = 4  // the refusal is at least 1/4 of the cycle
	quotaMinOK      = 10 // successes needed for a meaningful rate
)

// quotaMeter measures what the provider delivered over a cycle: a productive
// period followed by a refusal episode (refusals with no success between). A
// long episode means a quota was spent (a fixed window, a ban), and the
// delivered rate over the whole cycle is then the sustainable one.
//
// The episode lasts as long as the provider kept saying no: until its last
// refusal, or the end of the pause it asked for in that refusal, whichever
// is later; not until the next success, which may come much later for
// reasons of the caller's own (no demand, a pause another process drew, or
// waiting its turn among processes that share the provider: see SetShare). Not safe for concurrent use; the
// Controller's mutex guards it.
type quotaMeter struct {
	start    time.Time // start of the productive period; zero = none yet
	ok       int       // successes since start
	refusing bool      // in a refusal episode
	since    time.Time // first refusal of the episode
	noUntil  time.Time // the latest refusal of the episode, or the end of the pause it asked for
	sinceReq time.Time // when the first refused request was sent
	okBefore int       // successes of the period before the episode
	done     bool      // the episode's estimate has been taken
}

// refuse records a refusal at now of a request sent at sent, which asked
// for a pause until until (zero for none).
func (q *quotaMeter) refuse(now, sent, until time.Time) {
	if q.start.IsZero() {
		q.start = now
	}
	if !q.refusing {
		q.refusing, q.since, q.sinceReq, q.okBefore, q.done, q.noUntil = true, now, sent, q.ok, false, now
	}
	if until.Before(now) {
		until = now
	}
	if until.After(q.noUntil) {
		q.noUntil = until
	}
}

// success records a success at now of a request sent at sent. When it ends
// a refusal episode it returns the episode's estimate, if any, and starts a
// new period. A success for a request sent before the first refused one is
// a late answer from before the episode and does not end it.
func (q *quotaMeter) success(now, sent time.Time) (est float64, ok bool) {
	if q.start.IsZero() {
		q.start = now
	}
	if q.refusing && !sent.IsZero() && !sent.After(q.sinceReq) {
		q.ok++
		q.okBefore++
		return 0, false
	}
	if q.refusing {
		// The provider said no until noUntil; the time after that until
		// this success is the caller's.
		end := q.noUntil
		if now.Before(end) {
			end = now
		}
		est, ok = q.estimate(end)
		q.refusing, q.start, q.ok = false, now, 0
	}
	q.ok++
	return est, ok
}

// estimate returns the delivered rate, in requests/s, over the cycle ending
// at end, when the refusal episode is long enough to be a spent quota. Each
// episode yields at most one estimate.
func (q *quotaMeter) estimate(end time.Time) (float64, bool) {
	if !q.refusing || q.done || q.okBefore < quotaMinOK {
		return 0, false
	}
	cycle, refusal := end.Sub(q.start), end.Sub(q.since)
	if refusal < quotaMinRefusal || refusal*quotaMinShare < cycle {
		return 0, false
	}
	q.done = true
	return float64(q.okBefore) / cycle.Seconds(), true
}
