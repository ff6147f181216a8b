package aimd_test

import (
	"math"
	"time"

	"github.com/forage-go/forage"
)

// The server model of the goodput simulation (sim_test.go). It mirrors
// providertest's answers, which the budget package's full simulation uses:
// Retry-After in whole seconds (at least 1), Binance's ban after repeated
// violations, a slow-down that delays instead of refusing.

// simEpoch is the simulated clock's origin, aligned to a minute so fixed
// windows start with the run.
var simEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// answer is how the simulated server answers an over-limit request.
type answer int

const (
	answer429      answer = iota // 429 with Retry-After, whole seconds, at least 1
	answer429ms                  // 429 with an exact Retry-After (retry-after-ms)
	answerBare429                // 429 without Retry-After
	answer503                    // 503 without Retry-After
	answerSlowDown               // 200, delayed until the request would conform
	answerBan                    // 429 with Retry-After; a ban (418) after repeated violations
	answerBareBan                // 429 without Retry-After; a ban after repeated violations
)

// simServer is a rate-limited server: GCRA or a fixed window, answering
// over-limit requests per answer. Not safe for concurrent use.
type simServer struct {
	rate    func(at time.Duration) float64 // GCRA rate or window count/window, per second
	burst   int                            // GCRA burst; 0 = fixed window
	window  time.Duration                  // fixed window length
	answer  answer
	hints   bool // send a windowed Quota (fixed window only)
	banN    int  // violations within banWin that start a ban
	banWin  time.Duration
	banFor  time.Duration
	tat     time.Duration // GCRA theoretical arrival time
	winIdx  int64         // current fixed window
	count   int           // requests counted in the current window
	bans    int
	banTill time.Duration
	viol    []time.Duration
	// banAt, when set, bans the client at the first request at or after
	// it, for banFor, whatever its rate: another client behind the same
	// address, or an earlier process, drew the ban.
	banAt time.Duration
	// spurious are times at which the first request sent refuses although
	// it conforms: a burst the client itself made, or a hiccup of the
	// provider. It does not count against the limit nor as a violation.
	spurious []time.Duration
	// refuseAgain, when set, refuses the request after the
	// refuseAgain-th refusal too, conforming or not (once): a hiccup
	// that meets the first request after a pause.
	refuseAgain, refusals int
	// faultEvery, when set, fails every faultEvery-th request the limit
	// admitted from faultFrom on with a Transient error (a gateway's 502
	// behind the rate limiter: the request counted against the limit all
	// the same).
	faultEvery int
	faultFrom  time.Duration
	admitted   int
	// fixedRA, when set, is the Retry-After of every 429, whatever the
	// wait (providers that always say 5 s, or 60).
	fixedRA time.Duration
	// countRefused makes a GCRA count refused requests too (a sliding
	// log): over the limit, every request is refused until the client
	// slows down.
	countRefused bool
	// late, when set, delays each request's arrival by what it returns
	// (the network stack and the scheduler of a busy machine): the
	// server judges the request at its arrival, not its sending.
	late func() time.Duration
}

// reply is the server's answer to one request.
type reply struct {
	kind       forage.Class
	delay      time.Duration // extra latency (slow-down)
	late       time.Duration // how late the request reached the server (see simServer.late)
	retryAfter time.Duration
	hint       forage.Quota
}

// take decides the request sent at at.
func (s *simServer) take(at time.Duration) reply {
	if s.late != nil {
		late := s.late()
		r := s.judge(at + late)
		r.late = late
		return r
	}
	return s.judge(at)
}

// judge decides the request that reached the server at at.
func (s *simServer) judge(at time.Duration) reply {
	if s.banAt > 0 && at >= s.banAt {
		s.banAt, s.banTill = 0, at+s.banFor
		s.bans++
	}
	if at < s.banTill {
		return reply{kind: forage.Throttled, retryAfter: wholeSeconds(s.banTill - at)}
	}
	again := s.refuseAgain > 0 && s.refusals == s.refuseAgain
	if again || len(s.spurious) > 0 && at >= s.spurious[0] {
		if again {
			s.refuseAgain = 0
		} else {
			s.spurious = s.spurious[1:]
		}
		r := reply{kind: forage.Throttled, retryAfter: time.Second}
		switch s.answer {
		case answerBare429:
			r.retryAfter = 0
		case answer503:
			r.kind, r.retryAfter = forage.Overloaded, 0
		case answerSlowDown:
			r.kind, r.retryAfter, r.delay = forage.Success, 0, time.Second
		}
		return r
	}
	over, wait := s.limit(at)
	r := reply{hint: s.hint(at)}
	if over {
		s.refusals++
	}
	if !over {
		if s.admitted++; s.faultEvery > 0 && at >= s.faultFrom && s.admitted%s.faultEvery == 0 {
			r.kind = forage.Transient
		}
		return r
	}
	switch s.answer {
	case answer429:
		r.kind, r.retryAfter = forage.Throttled, wholeSeconds(wait)
		if s.fixedRA > 0 {
			r.retryAfter = s.fixedRA
		}
	case answer429ms:
		r.kind, r.retryAfter = forage.Throttled, wait
	case answerBare429:
		r.kind = forage.Throttled
	case answer503:
		r.kind = forage.Overloaded
	case answerSlowDown:
		r.delay = wait
	case answerBan:
		r.kind, r.retryAfter = forage.Throttled, wholeSeconds(wait)
		if s.violate(at) {
			r.retryAfter = wholeSeconds(s.banTill - at)
		}
	case answerBareBan:
		r.kind = forage.Throttled
		if s.violate(at) {
			r.retryAfter = wholeSeconds(s.banTill - at)
		}
	}
	return r
}

// limit counts the request against the limit; it reports whether the
// request is over and how long until it would conform. A slow-down server
// counts over-limit requests too (they are served later).
func (s *simServer) limit(at time.Duration) (bool, time.Duration) {
	queue := s.answer == answerSlowDown
	if s.burst > 0 {
		iv := time.Duration(math.Round(1e9 / s.rate(at)))
		tau := time.Duration(s.burst) * iv
		next := max(s.tat, at) + iv
		if next-at <= tau {
			s.tat = next
			return false, 0
		}
		if queue || s.countRefused {
			s.tat = next
		}
		return true, next - at - tau
	}
	if w := int64(at / s.window); w != s.winIdx {
		s.winIdx, s.count = w, 0
	}
	n := int(s.rate(at) * s.window.Seconds())
	end := time.Duration(s.winIdx+1) * s.window
	if s.count < n {
		s.count++
		return false, 0
	}
	return true, end - at
}

// hint returns the IETF-style usage of a fixed window, when enabled.
func (s *simServer) hint(at time.Duration) forage.Quota {
	if !s.hints || s.burst > 0 {
		return forage.Quota{}
	}
	n := s.rate(at) * s.window.Seconds()
	return forage.Quota{
		Limit:        n,
		Remaining:    max(n-float64(s.count), 0),
		Reset:        time.Duration(s.winIdx+1)*s.window - at,
		Window:       s.window,
		HasLimit:     true,
		HasRemaining: true,
		HasReset:     true,
		HasWindow:    true,
	}
}

// violate records a violation and reports whether it starts a ban.
func (s *simServer) violate(at time.Duration) bool {
	keep := s.viol[:0]
	for _, v := range s.viol {
		if v > at-s.banWin {
			keep = append(keep, v)
		}
	}
	s.viol = append(keep, at)
	if len(s.viol) < s.banN {
		return false
	}
	s.viol, s.banTill = s.viol[:0], at+s.banFor
	s.bans++
	return true
}

// wholeSeconds renders d as an HTTP Retry-After does: whole seconds rounded
// up, at least 1.
func wholeSeconds(d time.Duration) time.Duration {
	return max((d+time.Second-1)/time.Second, 1) * time.Second
}
