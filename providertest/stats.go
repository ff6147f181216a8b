package providertest

import "time"

// Stats counts what clients did to a [Server]. Every request lands in exactly
// one of OK, Throttled, Unavailable, Banned, Faults and BadRequests, so they
// sum to Requests. A request is counted when the server decides its answer,
// at arrival, even if the client then gives up during the latency; a request
// whose context has already ended, or ends during the uplink delay
// ([Config.Uplink]), never reaches the server. Stats is a value;
// copy it freely.
type Stats struct {
	// Requests is every request received, whatever its fate.
	Requests int64
	// OK is the requests served with 200, slowed-down ones included, and
	// the redirects of [Lie.RedirectLoop].
	OK int64
	// Throttled is the 429 answers (with or without Retry-After).
	Throttled int64
	// Unavailable is the 503 answers of the limit policy ([Answer.Status]
	// 503).
	Unavailable int64
	// Banned is the 418 answers, including the one that started each ban.
	Banned int64
	// Bans is the number of ban periods entered.
	Bans int64
	// Faults is the injected faults (500, 502, 503, 504 and resets).
	Faults int64
	// BadRequests is the admitted requests answered 4xx for bad parameters,
	// unknown symbols, unknown paths or methods.
	BadRequests int64
	// SlowedDown is the over-limit requests served late
	// ([Answer.SlowDown]); they are also counted in OK.
	SlowedDown int64
	// Candles is the number of candles in OK klines responses (the rows
	// sent, when the server lies).
	Candles int64
	// MaxPerSecond is the most requests that passed the limit (not banned,
	// not rejected; faulted, bad and slowed-down ones included) in any sliding
	// one-second window (t-1s, t], counted by arrival time, not by weight.
	MaxPerSecond int64
	// MaxArrivalsPerSecond is the same peak over every request received,
	// rejected ones included.
	MaxArrivalsPerSecond int64
	// Limit is the true limit in force when Stats was taken.
	Limit Limit
}

// Stats returns the counts so far, after applying any Schedule entry due now.
func (s *Server) Stats() Stats {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applySchedule(now)
	st := s.stats
	st.MaxPerSecond = s.passed.max
	st.MaxArrivalsPerSecond = s.arrived.max
	st.Limit = s.lim.limit
	return st
}

// peak tracks the most events in any sliding one-second window. Not safe for
// concurrent use; the Server's mutex guards it.
type peak struct {
	times []int64 // arrival times (ns) within the last second, ascending from head
	head  int
	max   int64
}

// add records an event at now (ns). The clock is read before the server's
// mutex is taken, so concurrent requests may be added slightly out of order;
// the peak is then approximate by that skew.
func (p *peak) add(now int64) {
	for p.head < len(p.times) && p.times[p.head] <= now-int64(time.Second) {
		p.head++
	}
	if p.head > len(p.times)/2 {
		p.times = append(p.times[:0], p.times[p.head:]...)
		p.head = 0
	}
	p.times = append(p.times, now)
	p.max = max(p.max, int64(len(p.times)-p.head))
}
