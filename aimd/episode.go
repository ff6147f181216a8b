package aimd

import (
	"math"
	"slices"
	"time"

	"github.com/forage-go/forage"
)

// Thresholds of the episode estimate, the refusal budget and the noise
// meter. They were tuned with the simulations (sim_test.go here, and the
// budget package's goodput tables); see the package documentation for the
// why.
const (
	// episodeMinOK is the fewest successes an episode needs before its
	// delivered rate says anything about the limit; a controller that
	// sees only a share of the traffic (see Controller.SetShare) needs
	// as many more as it sees less.
	episodeMinOK = 5
	// episodeMargin places the rate after a cut just under the rate the
	// provider delivered in the episode that ended with the refusal.
	episodeMargin = 0.97
	// twoPointSpread is how much two episodes' lengths must differ, as a
	// share of the longer, for the two-point estimate.
	twoPointSpread = 0.15
	twoPointSpan   = 5.0 // seconds: the longest episode the two-point estimate uses
	twoPointStep   = 0.8 // the most one two-point estimate lowers the episode's
	// twoPointSure is how many more successes one episode must have had
	// than the other for the two-point estimate to be taken whole, not a
	// twoPointStep at a time: a count or two of jitter then moves it by a
	// few per cent only. twoPointTight is how far under the lowest rate
	// of both episodes the estimate must lie: the client sent above it
	// through both, so each spent its whole allowance.
	twoPointSure  = 12
	twoPointTight = 0.98
	// floorSpread is how uncertain (as a share of it) a two-point
	// estimate may be and still confirm the floor (see floor).
	floorSpread = 0.6
	// spreadCut is the cut after an episode that began at the end of a
	// pause while the provider's burst allowance is not yet known, and
	// either was refused within the hold (see Controller.held) or was
	// short (under spreadShort successes): the episode overstated the
	// limit by up to the allowance over its length, and a rate this far
	// under it makes the next episode long enough for the two-point
	// estimate to tell the two apart.
	spreadCut   = 0.85
	spreadShort = 4 * twoPointSure
	// refusalWindow is the rolling window of the refusal budget: providers
	// that ban count violations per minute, not per cent.
	refusalWindow = time.Minute
	// refusalProbe is how many overshoots within refusalWindow stop the
	// probe above the ceiling; from refusalProbe+1 on, each further one
	// lowers a temporary cap under the ceiling by refusalStep (it applies
	// to the cut too, not only to the climb), so the
	// refusals of a jittery provider that allows no burst stay well under
	// the five a minute that common ban policies punish.
	refusalProbe = 2
	// rateRefusal is the longest pause a refusal may ask for and count
	// against the refusal budget of a controller that sees a share of the
	// traffic (see State.Refusals): a limit of a rate asks for a second or
	// so (the next token), a spent window for the rest of the window.
	rateRefusal = 2 * time.Second
	// refusalAhead is how far after now an overshoot another controller
	// logged may lie (see refusalLog.merge): its clock may run ahead.
	refusalAhead = time.Second
	refusalStep  = 0.05
	refusalFloor = 0.75 // the temporary cap never goes under this share of the ceiling
	// noiseSlow and noiseFast are the weights of one response in the slow
	// (noise floor) and fast (recent) averages of the 503 share.
	noiseSlow = 1.0 / 64
	noiseFast = 1.0 / 32
	// noiseProof is how many successes, sent after a cut for a 503, must
	// come back before the next 503 for that cut to count as having worked.
	// noiseFailed of the last noiseTrials such cuts that did not (a 503
	// sooner than that after each) show the 503s are not about the rate:
	// one cut may simply not have been deep enough, most of several are
	// not a chance.
	noiseProof  = 30
	noiseTrials = 8
	noiseFailed = 3
	// noiseExcess is how far above twice the noise floor the recent 503
	// share must rise, once a provider is known to be noisy, before a 503
	// counts as pressure again.
	noiseExcess = 0.1
	// outageRun and outageGap are how many 503s in a row, over how long
	// with no success between, read as a provider that is down rather than
	// one shedding load (see Controller.readOverload).
	outageRun = 3
	outageGap = 250 * time.Millisecond
	// outageStep, outageDecay and outageFloor are how the rate goes down
	// through an outage: by outageDecay every outageStep, to outageFloor
	// (enough for a breaker to count failures; a lower rate stays).
	outageStep  = time.Second
	outageDecay = 0.7
	outageFloor = 1.0
	// noiseSettle is how many successes must have come back since a cut
	// for a 503 for the cut to have failed (see Controller.readOverload).
	// (Counted in time, half a second, a gateway's noise at 200/s never
	// proved itself.)
	noiseSettle = 3
	// noiseMaxShare is the 503 share from which 503s are never found to be
	// noise (see Controller.readOverload).
	noiseMaxShare = 0.25
	// noiseDescent is how many times under the rate the caller sent at
	// when the first cut for a 503 came a 503 must come, no cut since that
	// first one having worked, for the 503s to be noise whatever the
	// trials say (see Controller.readOverload).
	noiseDescent = 8
)

// episodeLatencies is how many smoothed latencies an episode must last
// for what it delivered to be measured (see episode).
const episodeLatencies = 2

// episode returns the rate, in requests/s, that the provider delivered in
// the current episode up to a request sent at sent: the successes of
// requests sent since the episode began (the last cut, or the end of its
// pause), less one for the token a provider's burst allowance may have
// held, over the time. While the client sends above the limit, a provider
// admits the limit's rate plus what its burst allowance held, so this is
// the limit, slightly over for a provider with a large burst allowance. It
// returns 0 when the episode is too short to tell.
func (c *Controller) episode(sent time.Time) float64 {
	if c.epStart.IsZero() || sent.IsZero() || float64(c.epN) < episodeMinOK*c.weight {
		return 0
	}
	t := sent.Sub(c.epStart).Seconds()
	if t <= 0 || t < episodeLatencies*c.latency {
		// Most of the episode's requests are still on their way: the
		// successes answered so far, over the whole episode, are not
		// what the provider delivered (5 answers in 0.53 s read a 30/s
		// server 200 ms away as 7.6/s, and held it there).
		return 0
	}
	n := c.epOK + c.epFail
	if c.epPaused && c.allowance > 1 {
		// The pause refilled the allowance the two-point estimate found:
		// the episode spent it on top of the limit.
		if est := (n - c.allowance*c.weight) / t; est >= (n-1)/t/2 {
			return est
		}
	}
	return (n - 1) / t
}

// twoPoint refines est, the episode's delivered rate up to a refusal of a
// request sent at sent, with the episode before it. Behind a burst
// allowance of B units every episode that starts with a full allowance (a
// pause refills it) and sends above the limit L all through delivers
// n = B + L·T before its refusal, so one episode overstates L by (B-1)/T;
// two of different lengths give L itself, (n₂ - n₁)/(T₂ - T₁), B
// cancelled. So only episodes that began at the end of a pause qualify,
// the result must lie under the rate each began at (the rate only climbs
// through an episode), and the lengths must differ enough for the
// difference to mean something; a result the two counts barely separate
// lowers est a twoPointStep at a time. Long episodes (a fixed window spent
// over seconds) are not what this describes, nor is a result under half
// of the single episode's; and with a request or more in flight the
// successes still on their way make the counts too uncertain. It returns
// est when it cannot do better, and records this episode for the next
// one, and says how far it got.
func (c *Controller) twoPoint(sent time.Time, est float64, ok bool) (float64, fit) {
	prev := c.prevEp
	c.prevEp = episodeRecord{}
	if est <= 0 || !ok || !c.epPaused {
		return est, fitNone
	}
	n, t := c.epOK+c.epFail, sent.Sub(c.epStart).Seconds()
	c.prevEp = episodeRecord{n: n, t: t, lo: c.postCut}
	if prev.t <= 0 {
		return est, fitFirst // the first that qualifies: the next has one to compare with
	}
	if max(t, prev.t) > twoPointSpan || c.latency*n/t >= 1 || math.Abs(t-prev.t) < twoPointSpread*max(t, prev.t) {
		return est, fitApart
	}
	l := (n - prev.n) / (t - prev.t)
	if f := c.floor(sent); f > 0 && f < est && prev.n >= twoPointSure*c.weight && f >= sureDrop*c.sure.at(sent) {
		// A provider whose pause refills its allowance no further than
		// its rate over the pause delivers, from refusal to refusal,
		// exactly its rate: the floor. Two episodes of a dozen requests
		// or more that agree with it within a request show that is what
		// it is; unless an episode of the minute surely delivered more
		// (a floor is a lower bound of the limit): a provider that
		// allows no burst, refused by arrival jitter a second or so
		// after each pause, has floors of about half its rate, and two
		// episodes that happened to agree with one put a 15/s limit at
		// 5.9/s, its ceiling confirmed.
		if d := c.weight / math.Abs(t-prev.t); math.Abs(l-f) <= d && d <= floorSpread*l && !c.startRefutes((n-f*t)/c.weight) {
			c.allowance = max(1, (n-f*t)/c.weight)
			return f, fitSure
		}
	}
	if l < est/2 || l >= est || l > twoPointTight*min(prev.lo, c.postCut) || l < sureDrop*c.sure.at(sent) {
		return est, fitApart // or under what an episode of the minute surely delivered, as above
	}
	if c.startRefutes((n - l*t) / c.weight) {
		return est, fitApart // no bucket of that rate would have refused slow start so soon
	}
	if math.Abs(n-prev.n) >= twoPointSure*c.weight {
		c.allowance = max(1, (n-l*t)/c.weight)
		return l, fitSure
	}
	return max(l, est*twoPointStep), fitStep // a step at a time: two points of jittered counts can mislead
}

// startRefutes reports whether slow start refutes a burst allowance of b
// requests: a bucket full when the run began admits its whole allowance
// before it refuses anything, whatever the rate, and slow start was
// refused after fewer successes than that (a token's slack aside). Not
// known (false) when slow start met no refusal of its own (a restored
// controller, DisableSlowStart). A provider that allows no burst,
// refused by arrival jitter about a second after each pause, delivers
// about half its rate from refusal to refusal, pauses included; two such
// episodes agreed with a bucket of that rate whose pauses refill its
// allowance, and a 17/s provider was held at 8/s, the ceiling confirmed,
// although slow start had been refused on its seventh request.
func (c *Controller) startRefutes(b float64) bool {
	return c.startOK > 0 && b > float64(c.startOK)+1
}

// fit says how far twoPoint got.
type fit int

const (
	fitNone  fit = iota // the episode does not qualify
	fitFirst            // the first that qualifies: none before it to compare with
	fitApart            // the two episodes could not be told apart: est as it was
	fitStep             // est lowered a step towards the two-point estimate
	fitSure             // est is the two-point estimate
)

// episodeRecord is what twoPoint keeps of the episode before.
type episodeRecord struct {
	n, t float64 // successes, seconds
	lo   float64 // the rate it began at
}

// refill returns the rate at which the provider admitted requests from the
// last cut to a refusal of a request sent at sent, after a pause: n/T for n
// successes in T seconds, or 0 when the episode did not begin at a pause's
// end. The refusal at the last cut left the provider's allowance empty, so
// n is at most L·T + 1 (see floor); when the pause was too short for the
// allowance to fill up (a slow provider: a second's pause refills one or
// two requests of it), n is also about L·T, and n/T is the limit itself,
// give or take a request over T. It may lie far under the limit of a
// provider whose allowance filled up during the pause and then idled.
func (c *Controller) refill(sent time.Time) float64 {
	if t := c.sinceCut(sent); c.epPaused && t > 0 {
		return c.epOK / t
	}
	return 0
}

// sinceCut returns the seconds from the last cut to sent, or 0 when there
// was no cut or sent is unknown or not after it.
func (c *Controller) sinceCut(sent time.Time) float64 {
	if c.lastCut.IsZero() || sent.IsZero() {
		return 0
	}
	return max(0, sent.Sub(c.lastCut).Seconds())
}

// floor returns a rate the provider surely admits, as the episode up to a
// refusal of a request sent at sent shows it, or 0 when it shows none. The
// last cut came with a refusal, which leaves a provider's allowance empty;
// since then, whatever pause followed and whatever its allowance, the
// provider cannot have admitted more than L·T + 1 requests in the T seconds
// before sent, so (n - 1)/T is at or under its limit L. It is the limit
// itself for a provider whose allowance a pause refills no further than the
// limit's rate over the pause (a large allowance, or a short pause), and a
// lower bound for one that refills it sooner and idles the rest of the
// pause.
func (c *Controller) floor(sent time.Time) float64 {
	if t := c.sinceCut(sent); c.epN >= 2 && t > 0 {
		return (c.epOK - c.weight) / t
	}
	return 0
}

// sureRate is the best floor (see floor) an episode in the refusal window
// showed: a later short episode's floor is no measure of the limit when a
// long one before it showed the provider admitting more. A cut that finds
// the limit far under the rate forgets it for the rate (the limit may
// have shrunk), not for telling a slow limit from one that fell (most).
type sureRate struct {
	rate float64
	when time.Time
	most float64   // the best floor of the minute, deep cuts or not
	seen time.Time // when most was noted
}

// note records the floor f of the episode a cut at now ended, or forgets
// the record when deep (the limit lies far under what it showed).
func (s *sureRate) note(now time.Time, f float64, deep bool) {
	if f > 0 && (f > s.most || now.Sub(s.seen) >= refusalWindow) {
		s.most, s.seen = f, now
	}
	switch {
	case deep:
		s.rate, s.when = 0, time.Time{}
	case f > 0 && f > s.at(now):
		s.rate, s.when = f, now
	}
}

// at returns the recorded rate, or 0 once it is older than the refusal
// window.
func (s *sureRate) at(now time.Time) float64 {
	if s.when.IsZero() || now.Sub(s.when) >= refusalWindow {
		return 0
	}
	return s.rate
}

// shown returns the best floor an episode in the refusal window showed,
// deep cuts or not.
func (s *sureRate) shown(now time.Time) float64 {
	if s.seen.IsZero() || now.Sub(s.seen) >= refusalWindow {
		return 0
	}
	return s.most
}

// surer returns the rate the provider surely admits, for the fourth
// overshoot in a minute (see cut), from f, the floor of the episode that
// ends now, ep, what it delivered (0 when it lasted under sureSpan: a
// shorter one after a pause delivers the allowance the pause refilled, and
// tells nothing: f stands), r0, the rate it was sent at, and unsteady (see
// Controller.unsteady); and whether the limit fell.
//
//   - A short episode after a pause whose floor no limit that held steady
//     since the episode before explains (unsteady): a refusal of arrival
//     jitter a few requests after the pause, or a limit that fell within
//     the last second. Half the best floor of the minute, or its own if
//     more: under a limit that halved, and far over the floor of a pause
//     that counted as a second of next to nothing. (Held at that floor, a
//     200/s provider that allows no burst, refused by arrival jitter four
//     times in a minute, was held at 1/s for 40 s.)
//   - An episode that delivered what it was sent at, and about the best
//     floor of the minute (see sureRate), was refused by arrival jitter:
//     that floor stands, not the episode's own, which counts the pause.
//     (Refusals at 93-98% of a 17/s limit, seconds apart, dropped the
//     rate to 55-60% of it for the rest of the minute.)
//   - One that delivered less shows the limit fell: its own floor.
//   - One with no floor (a single success after its pause) after a run of
//     them: refill, what the pauses refilled, which the caller passes
//     only when slow start was admitted many requests (an allowance hid
//     the limit: 1/s with an allowance of 20 admits one request a pause
//     at any rate, and the cuts halved the rate from 30/s until the fifth
//     refusal banned); unless an episode of the minute was admitted far
//     more than that (the limit fell, and the deep cut follows it: 0).
func (c *Controller) surer(now time.Time, f, refill, ep, r0 float64, unsteady bool) (float64, bool) {
	s := c.sure.at(now)
	switch {
	case s > 0 && ep == 0 && unsteady:
		return max(f, s*deepCut), true
	case s > 0 && ep == 0:
		return f, true // too short to tell whether the limit fell: its own floor, and the caller's caution
	case s > 0 && (ep < sureDrop*s || ep < sureSent*r0):
		// The episode delivered less than it was sent at, or far less
		// than the record: the limit fell, and the record is no measure
		// of it; nor are the pauses' refills (the limit allowed more
		// than one request a pause a moment ago).
		return f, true
	case f > 0:
		return max(f, s), false
	case s > 0 || c.sure.shown(now) > refillFar*refill:
		return 0, false // an episode showed more: the limit fell, and the deep cut follows it
	}
	return refill, false
}

// unsteady reports whether the short episode after a pause that a refusal
// of a request sent at sent ends refutes a limit that fell to about its
// floor and held steady since the episode before it. From a refusal (the
// provider's allowance empty), a provider of L/s whose allowance holds
// what a pause of P seconds refills (as one must, for a limit that low to
// have admitted the episode) admits at most L·(P+T) + 1 requests in the
// P+T seconds to a refusal, and refuses only once L·(P+T) - 2 or more
// were admitted (a token's fraction either side): n admitted bound L
// within [(n-1)/(P+T), (n+2)/(P+T)]. The episode before, also ended by a
// refusal after a pause, showed a floor (see floor) that the same limit
// would have to reach; over this one's top, no limit held steady through
// both: the refusal was arrival jitter (its place in the episode is a
// matter of chance), or the limit fell within the last second. A short
// episode that admitted fewer than fewTokens requests measures too little
// to refute anything, and the one before it stands (see cut). (Two in a
// row that admitted next to nothing after their pauses, each refused by
// jitter, look like a provider that admits one request a pause, and held
// a 66/s provider at 1.6/s.)
func (c *Controller) unsteady(sent time.Time) bool {
	t := c.sinceCut(sent)
	if c.briefFloor <= 0 || !c.epPaused || t <= 0 || sent.Sub(c.epStart) >= sureSpan {
		return false
	}
	return c.epOK >= 2*c.weight && c.briefFloor > (c.epOK+2*c.weight)/t
}

// spanUnpaused reports whether the span of refusals up to a request sent
// at sent measures anything (see spanFloor): it began, no pause came since,
// and the controller sees the whole traffic.
func (c *Controller) spanUnpaused(sent time.Time) bool {
	sp := &c.span
	return !sp.from.IsZero() && !sent.IsZero() && c.weight <= 1 && !c.pausedUntil.After(sp.from)
}

// strikeSpan follows the successes since the first refusal that cut in
// the refusal window (see Controller.spanFloor). Not safe for concurrent
// use; the Controller's mutex guards it.
type strikeSpan struct {
	from  time.Time    // when the refused request that began it was sent; zero = none
	ok    float64      // successes of requests sent after from (weighted, see SetShare)
	floor float64      // the rate spanFloor set at the ban guard's cut; 0 = none
	last  [8]time.Time // when the last successes counted were sent
	next  int
}

// add counts a success of a request sent at sent.
func (sp *strikeSpan) add(sent time.Time, weight float64) {
	sp.ok += weight
	sp.last[sp.next] = sent
	sp.next = (sp.next + 1) % len(sp.last)
}

// after returns how many of the last successes counted were sent after t.
func (sp *strikeSpan) after(t time.Time) int {
	n := 0
	for _, at := range sp.last {
		if at.After(t) {
			n++
		}
	}
	return n
}

// spanFloor returns a rate the provider surely admits, from the span of
// refusals that cut in the refusal window, up to a refusal answered at now
// of a request sent at sent; 0 when the span shows none. A refusal leaves
// a provider's allowance empty, so from the span's first refusal to this
// one it admitted at most L·T + 1 requests, whatever its allowance: n - 1
// successes over T, less the answered requests sent after this one (they
// reached it after it), is at or under its limit L, and close to it when
// the caller sent over the limit all along. Not across a pause, when an
// allowance may have filled and idled (each episode's own floor counts
// then, see floor), nor at a controller that sees a share of the traffic.
// (Refused with no Retry-After, a slow start that an allowance of 4 hid
// took a 4/s provider to its fifth refusal within 3 s at one request at a
// time: each cut still left the rate over the limit.)
func (c *Controller) spanFloor(now, sent time.Time) float64 {
	sp := &c.span
	if !c.spanUnpaused(sent) {
		return 0
	}
	// The successes answered by now were sent up to a latency ago: a
	// refusal that overtook requests sent before it (a queue that sheds
	// at once what it cannot hold, and serves the rest seconds later)
	// measures the span only up to there.
	end := sent
	if e := now.Add(-time.Duration(c.latency * float64(time.Second))); e.Before(end) {
		end = e
	}
	// Arrivals bunched by the network may stretch the span at the
	// provider by twice the arrival jitter; latencies spread over
	// several intervals at the ceiling are not that (a provider that
	// allows no burst would refuse nearly every request), but a queue's
	// wait. (Read as jitter, a queue of 50 that a 30/s host serves in
	// 1.7 s held 64 workers at 7.8/s for a minute.)
	jitter := 2 * c.arrivalJitter().Seconds()
	if c.ceiling > 0 && jitter >= queueIntervals/c.ceiling {
		jitter = 0
	}
	t := end.Sub(sp.from).Seconds() + jitter
	if n := sp.ok - c.weight*float64(1+sp.after(sent)); t > 0 && n > 0 {
		return max(n/t, c.floor(sent))
	}
	return c.floor(sent)
}

// queueIntervals is how many intervals at the ceiling the latencies'
// spread must exceed to be read as a queue's wait rather than arrival
// jitter (see spanFloor).
const queueIntervals = 4

// startEpisode starts a new episode at now, or at the end of the pause in
// force: nothing is sent before it.
func (c *Controller) startEpisode(now time.Time) {
	c.epStart, c.epOK, c.epN, c.epFail, c.epPaused = now, 0, 0, 0, false
	if c.pausedUntil.After(now) {
		c.epStart, c.epPaused = c.pausedUntil, true
	}
}

// refusalLog remembers the times of recent overshoots (cuts), or of
// refused requests (see Controller.violations), for the
// refusal budget. Not safe for concurrent use; the Controller's mutex
// guards it.
type refusalLog struct {
	at   [8]time.Time
	next int
}

// add records an overshoot at now.
func (l *refusalLog) add(now time.Time) {
	l.at[l.next] = now
	l.next = (l.next + 1) % len(l.at)
}

// latest returns the latest time logged, or the zero time when none is.
func (l *refusalLog) latest() time.Time {
	var t time.Time
	for _, at := range l.at {
		if at.After(t) {
			t = at
		}
	}
	return t
}

// count returns how many overshoots fell within refusalWindow before now.
func (l *refusalLog) count(now time.Time) int {
	n := 0
	for _, t := range l.at {
		if !t.IsZero() && now.Sub(t) < refusalWindow {
			n++
		}
	}
	return n
}

// recent returns the times within refusalWindow before now, oldest
// first; nil when there are none.
func (l *refusalLog) recent(now time.Time) []time.Time {
	var out []time.Time
	for _, t := range l.at {
		if !t.IsZero() && now.Sub(t) < refusalWindow {
			out = append(out, t.Round(0)) // wall clock only: other processes read them
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// merge adds the times in ts that fell within refusalWindow before
// now (up to refusalAhead after it: another clock) and are not already
// logged; when more than the log holds, the latest are kept.
func (l *refusalLog) merge(now time.Time, ts []time.Time) {
	var in []time.Time
	for _, t := range ts {
		if d := now.Sub(t); d < refusalWindow && d >= -refusalAhead {
			in = append(in, t)
		}
	}
	if len(in) > len(l.at) { // only the latest can stay: a state from a fault may hold any number
		slices.SortFunc(in, time.Time.Compare)
		in = slices.CompactFunc(in, time.Time.Equal)
		in = in[max(0, len(in)-len(l.at)):]
	}
	all := l.recent(now)
	n := len(all)
	for _, t := range in {
		if !slices.ContainsFunc(all, t.Equal) {
			all = append(all, t)
		}
	}
	if len(all) == n {
		return
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	*l = refusalLog{}
	for _, t := range all[max(0, len(all)-len(l.at)):] {
		l.add(t)
	}
}

// cap returns the share of the ceiling the rate may reach with n
// overshoots in the window, and whether the probe above the ceiling is
// allowed.
func refusalCap(n int) (share float64, probe bool) {
	if n < refusalProbe {
		return 1, true
	}
	return max(1-refusalStep*float64(n-refusalProbe), refusalFloor), false
}

// quotaMode is what a provider's rate-limit headers have shown it to be.
type quotaMode int

const (
	quotaUnknown quotaMode = iota
	quotaWindow            // kept to its word over a whole window
	quotaBucket            // admitted more than it said was left before its reset
)

// quotaWatch follows one response's word on its quota (see
// Controller.watchQuota). Not safe for concurrent use; the Controller's
// mutex guards it.
type quotaWatch struct {
	end   time.Time // the watched reset, less a second; zero = not watching
	left  float64   // what the response said was left
	count float64   // successes since (weighted, see Controller.SetShare)
	// The last two successes that said a quota of one is spent, with a
	// Reset of a second, and whether a third came within half a second
	// of the first of them (see Controller.watchSpent).
	spent [2]time.Time
	quick bool
}

// noiseMeter tells 503s that are about the rate (a provider shedding load
// because the client sends too fast) from 503s that are not (a flaky
// gateway failing a steady share of requests whatever the rate). Not safe
// for concurrent use; the Controller's mutex guards it.
type noiseMeter struct {
	slow, fast float64   // average 503 share: over about 64 responses, and the recent share
	seen       int       // responses observed, up to 4/noiseSlow (see share)
	floor      float64   // the noise share, fixed when the provider was found noisy
	first      snapshot  // the controller before the cuts that proved it noisy
	noisy      bool      // cuts for 503s did not stop them
	restore    bool      // undo those cuts at the next success
	cutAt      time.Time // the last cut for a 503; zero = none pending proof
	cutMid     float64   // halfway between the rates before and after that cut
	okAfter    float64   // successes sent after cutAt (weighted, see Controller.SetShare)
	// The last noiseTrials cuts for 503s, oldest first: whether each
	// stopped them, and the controller before it (to undo them).
	worked [noiseTrials]bool
	before [noiseTrials]snapshot
	trials int // how many of them are recorded
	// The descent: the controller before the first cut for a 503 since
	// the last that worked (origin.rate is zero when there is none), and
	// the successes since (weighted, see Controller.SetShare).
	origin   snapshot
	okOrigin float64
	from     float64 // the rate the caller sent at then: a slow start's rate outruns a few workers far away
	// The 503s since the last success: how many, since when, and whether
	// they read as an outage (see Controller.readOverload).
	run     int
	runFrom time.Time
	down    bool
	downAt  time.Time // the last step down of the rate in an outage
}

// follow notes a response of class kind at now for the outage reading: a
// success ends a run of 503s.
func (m *noiseMeter) follow(now time.Time, kind forage.Class) {
	switch kind {
	case forage.Success:
		m.run, m.down = 0, false
	case forage.Overloaded:
		if m.run == 0 {
			m.runFrom = now
		}
		m.run++
	}
}

// cut records a cut for a 503 at now, made from the controller state b to
// rate, as the newest trial, awaiting its proof.
func (m *noiseMeter) cut(now time.Time, b snapshot, rate, sending float64) {
	if m.trials == noiseTrials {
		copy(m.worked[:], m.worked[1:])
		copy(m.before[:], m.before[1:])
		m.trials--
	}
	m.worked[m.trials], m.before[m.trials] = true, b
	m.trials++
	if m.origin.rate == 0 {
		m.origin, m.okOrigin, m.from = b, 0, sending
	}
	m.cutAt, m.okAfter, m.cutMid = now, 0, (b.rate+rate)/2
}

// record settles the newest trial: whether the cut stopped the 503s. It
// reports whether most recent trials failed (noiseFailed of the last
// noiseTrials): the 503s do not depend on the rate. The trials are then
// cleared, and first() is the controller before the earliest of them.
func (m *noiseMeter) record(worked bool) bool {
	if m.trials == 0 {
		return false
	}
	m.worked[m.trials-1] = worked
	failed := 0
	for _, w := range m.worked[:m.trials] {
		if !w {
			failed++
		}
	}
	if failed < noiseFailed {
		return false
	}
	m.first, m.trials = m.before[0], 0
	return true
}

// snapshot is the part of the controller a cut for noise changed.
type snapshot struct {
	rate, ceiling, postCut float64
	confirmed              bool
	lastCut                time.Time
}

// observe folds one response into the averages: overloaded or not.
func (m *noiseMeter) observe(overloaded bool) {
	x := 0.0
	if overloaded {
		x = 1
	}
	m.slow += noiseSlow * (x - m.slow)
	m.fast += noiseFast * (x - m.fast)
	m.seen = min(m.seen+1, 4/noiseSlow)
}

// share returns the larger of the two averages, each corrected for the
// responses it has not seen yet (both start at 0): the 503 share, early in
// a run too.
func (m *noiseMeter) share() float64 {
	n := float64(m.seen)
	if n == 0 {
		return 0
	}
	return max(m.slow/(1-math.Pow(1-noiseSlow, n)), m.fast/(1-math.Pow(1-noiseFast, n)))
}

// pressure reports whether a 503 in a noisy provider counts as pressure:
// the recent share rose well above the noise floor. The floor is fixed when
// the provider is found noisy: an average that kept following the share
// would follow a real overshoot up too, and never see it.
func (m *noiseMeter) pressure() bool {
	return m.fast > 2*m.floor+noiseExcess
}
