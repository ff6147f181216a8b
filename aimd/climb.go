package aimd

import (
	"math"
	"time"
)

// The shape of the cuts and the climb. They were tuned with the explicit-time
// simulation in sim_test.go; see the package documentation for the why.
const (
	// exitCut is the cut on leaving slow start: slow start overshoots by a
	// round trip of doubling, and by much more against a burst allowance,
	// which only refuses once the burst is spent.
	exitCut = 0.6
	// deepCut is the cut when the provider keeps refusing with no success
	// since the last cut, or when an overshoot comes at the rate the last cut
	// set (the limit shrank).
	deepCut = 0.5
	// shrinkSlack is how far above the rate the last cut set an overshoot
	// still counts as "at that rate": the limit shrank below it.
	shrinkSlack = 1.05
	// shortEpisode is how few successes after a cut (and its pause) make a
	// refusal a sign that the limit lies far below the rate: the first
	// request after a pause meets a full allowance. (A provider that allows
	// no burst refuses the second one at any rate over its limit, so that
	// says nothing of how far over.)
	shortEpisode = 0
	// slowStartStep bounds the slow start's growth per response.
	slowStartStep = 1.5
	// steadyShare is the share of the rate at a refusal the provider must
	// have delivered over the episode for the rate to count as steady
	// through it; farShare, the share under which the limit lies far below
	// the rate at the refusal.
	steadyShare = 0.97
	farShare    = 0.85
	// jitterShare is how close under the ceiling a steady refusal must be
	// to count as the edge of the limit rather than arrival jitter; a
	// jitter refusal cuts by jitterCut only.
	jitterShare = 0.98
	jitterCut   = 0.97
	// probeKeep is how far over the ceiling a probe's refusal leaves the
	// ceiling where it is, and plateauHeld how long the rate must have
	// held near the ceiling for a refusal there to leave it (see cut).
	probeKeep   = 1.05
	plateauHeld = 10 * time.Second
	// ceilingMargin places the learned ceiling just under the rate the
	// overshoot began at, so the flat top of the climb sits under the limit
	// and the slow start of the probe above it crosses the limit gently.
	ceilingMargin = 0.95
	// minCycleRequests is the fewest requests a confirmed climb back to the
	// ceiling spans, so a slow provider (a few requests/s) still sees about
	// one overshoot per this many requests, not one per Recovery.
	minCycleRequests = 200
	// unconfirmedRecovery and unconfirmedProbe are how many times faster
	// than Recovery the climb back to an unconfirmed ceiling and the probe
	// above it run. An unconfirmed ceiling rests on a single refusal, which
	// proves little: a burst the client itself made, a hiccup of the
	// provider. Kept for a Recovery, a ceiling far below the limit costs
	// most of a run (a 50/s limit mistaken for 8/s after one stray refusal
	// takes minutes to find again); probed within seconds, a ceiling that is
	// right is simply met again, which confirms it.
	unconfirmedRecovery = 16
	unconfirmedProbe    = 12
	// staleCeiling is how far over the unconfirmed ceiling a slow start's
	// exit set the probe must have gone, with no refusal, for the ceiling
	// to be dropped and slow start to resume (see climb).
	staleCeiling = 1.25
	// risenCeiling is how far over a confirmed ceiling the probe must
	// have gone, with no refusal, for the ceiling to be confirmed no
	// longer: the limit rose (another client behind the same key
	// stopped, a plan was upgraded), and the probe above it goes at the
	// unconfirmed pace (see climb). The probe's own pace is for a limit
	// that stays where it was: it takes a cycle to pass the ceiling by
	// 2 - Decrease, and one more to reach 1 + 8(1 - Decrease).
	// A fifth, not a tenth: a provider whose edge is blurred by arrival
	// jitter (no burst allowance, requests reaching it tens of
	// milliseconds late) lets a probe pass a ceiling a jitter cut set by
	// a tenth and refuses it a little further on; at the unconfirmed pace
	// the probe was then far over the edge when that refusal came back,
	// the ceiling went to 0.95 of it, and the climbs back drew the fifth
	// refusal of the minute (of 6,000 such providers that ban at five,
	// 48 newly banned and 8 no longer; at a fifth, 14 and 11).
	risenCeiling = 1.2
	// liftHeld is how long the refusal budget or the ban guard must have
	// bounded the climb under a confirmed ceiling for the climb back to
	// it, once they lift, to take a liftSpeed-th of a cycle (see lift).
	liftHeld  = 10 * time.Second
	liftSpeed = 6
	// holdAfterPause is how long the rate holds at the start of an
	// episode that began at the end of a pause (see held).
	holdAfterPause = time.Second
	// jitterSpan and jitterRequests are how long and how many successes
	// a steady episode must have lasted for a refusal at its end, under
	// the ceiling, to count as arrival jitter even while the burst
	// allowance is not known: an allowance the pause refilled is spent
	// within seconds at a rate well over the limit.
	jitterSpan     = 3 * time.Second
	jitterRequests = 30
	// fewTokens is how few requests an episode's floor may count for the
	// fourth refusal in a minute to set rate and ceiling a token under it
	// (see cut).
	fewTokens = 4
	// refillAllowance is how many requests slow start must have been
	// admitted before its first refusal for a run of single successes
	// after pauses to be read as a slow provider's allowance that hid its
	// limit (see surer): one that allows no burst refuses slow start
	// within a request or two of its limit (1/s: the second request, at
	// the initial rate).
	refillAllowance = 10
	// sureDrop is how far under the best sure rate of the minute (see
	// sureRate) an episode may deliver and still stand with it; further
	// under, the limit fell (see surer).
	sureDrop = 0.85
	// sureSent is how much of the rate it was sent at an episode must
	// have delivered for the best sure rate of the minute to stand for
	// its floor (see surer): arrival jitter refuses a request at a rate
	// the provider otherwise delivers in full.
	sureSent = 0.9
	// sureSpan is how long an episode must have lasted for its delivered
	// rate to be compared with the best sure rate of the minute: a
	// shorter one after a pause delivers the allowance the pause refilled.
	sureSpan = 1500 * time.Millisecond
	// refillFar is how far over what the pauses refill an episode of the
	// minute must have been admitted for a run of single successes to
	// read as a limit that fell rather than a slow one (see surer).
	refillFar = 4
	// inheritWindow is how long after its first request a controller,
	// fresh or restored from an earlier process's state (see
	// Controller.Restore), takes a refusal, before its first success, for
	// someone else's doing: the last requests of the process before it, or
	// of another client behind the same address, may have left the
	// provider's allowance spent (a supervisor restarts a crashed collector
	// at once; processes that share a provider hand it on). Such a refusal
	// pauses as it asks, but cuts neither the rate nor the ceiling: it says
	// nothing of the rate this controller sends at. Read as slow start's
	// end, it set the ceiling at 0.95 of the start rate (3.8/s against a
	// 20/s provider, reached again only after 15 s of probing); read as a
	// restored rate's overshoot, each restart lowered it a step for good.
	// A rate truly over the limit is cut at the next refusal. A fresh
	// controller's refusal that asks for no pause (a bare 429) still
	// cuts: nothing else would space the requests that follow it, which
	// would meet the same spent allowance, or a limit under the start
	// rate, at the full start rate.
	inheritWindow = time.Second
	// reentryAge is how old a state restored into a fresh controller
	// may be for its rate to be sent at once (see Controller.Restore): a
	// supervisor's restart, a registry's eviction, a deploy.
	reentryAge = time.Minute
)

// cutKind says why the rate is cut.
type cutKind int

const (
	cutOvershoot      cutKind = iota // the first refusal since a success
	cutRefusing                      // refusals continue with no success since the last cut
	cutLatency                       // the smoothed latency crossed the target
	cutLatencyGrowing                // the queue still grows after a latency cut
)

// cut decreases the rate once per overshoot. A signal for a request sent
// before the last cut (or, with no send time, within CoolOff of it) is an
// echo of the overshoot already handled, and cuts nothing. A new overshoot
// began at r0, the rate in force when its request was sent (the rate has
// climbed since, while the answer was on its way); the cut is from r0, and
// the new ceiling 0.95 x r0, so the rate holds under the edge. How far it
// cuts depends on what the episode since the last cut shows (see episode
// and twoPoint):
//
//   - leaving slow start: x0.6, the ceiling unconfirmed, so the climb back
//     is fast; an echo (another request in flight refused too) confirms it.
//   - refusals continue with no success since the last cut, or the queue
//     still grows after a latency cut: back off x0.5, ceiling unchanged.
//   - refused within a couple of requests of the last cut (or its pause),
//     or twice in a row that soon: the limit is far below: x0.5, the
//     ceiling unconfirmed.
//   - a steady episode the provider delivered in full, under the ceiling:
//     arrival jitter against a provider that allows no burst: x0.97, the
//     ceiling kept; unless it was refused in the hold after a pause (see
//     held) with the burst allowance not yet known: that is the allowance
//     spent, and the next rate goes spreadCut under it.
//   - a steady episode that delivered far less than r0: the limit shrank
//     or a burst allowance hid it: to what was delivered.
//   - otherwise (a climb or a probe that went one step too far): to what
//     the episode delivered, at most Decrease under r0; a probe refused
//     within 5% over the ceiling, or a rate refused at the ceiling after
//     holding there 10 s, keeps the ceiling.
//
// Two rules then bound the result (see the package documentation): a
// second short episode in a row after a pause drops the rate to what the
// provider admitted since the last refusal (refill); a fourth overshoot
// within the refusal window, at the rate the last cut set, to what it
// surely admitted (floor). A controller that sees a share of the traffic
// measures neither: at an overshoot of its own with three refused requests
// or more already within the window (echoes and the other processes'
// included, see State.Refusals), its ceiling goes spreadCut under the
// refused rate.
//
// A new ceiling is confirmed when the overshoot lands near the previous
// ceiling, or comes while probing above it within a cycle of the previous
// overshoot: the limit was met twice. Otherwise it rests on one refusal and
// the next cycle runs faster (see unconfirmedRecovery) until an echo or the
// next overshoot confirms it. With several overshoots within a minute the
// refusal budget stops the probe (see refusalCap). It reports whether it
// cut.
func (c *Controller) cut(now, sent time.Time, why cutKind) bool {
	if !c.lastCut.IsZero() {
		if !sent.IsZero() && !sent.After(c.lastCut) {
			return false
		}
		if sent.IsZero() && now.Sub(c.lastCut) < c.cfg.CoolOff {
			return false
		}
	}
	r0 := c.rateAt(sent)
	unconfirmed := !c.confirmed // before this cut (see echoCut)
	c.lastR0, c.quotaTop, c.reentry = 0, 0, 0
	if c.ceiling == 0 || (c.ceiling == c.quotaCeil || c.ceiling == c.quotaHeld) && r0 > c.ceiling {
		// In slow start, or climbing fast over a long refusal's estimate
		// (see applyQuota): not at a ceiling the provider had admitted
		// (a ban another client drew there says nothing of the rate).
		c.lastR0 = r0
	}
	beta, w, top := c.cfg.Decrease, r0*ceilingMargin, 0.0
	rate := r0 * beta
	confirmed := c.near(r0) || c.ceiling > 0 && r0 > c.ceiling && now.Sub(c.lastCut).Seconds() < c.cycle()
	steady := c.postCut >= steadyShare*r0 // the rate barely climbed since the last cut
	est, fitted := c.twoPoint(sent, c.episode(sent), c.ceiling > 0 && why == cutOvershoot)
	shared := c.weight > 1 // sees a share of the traffic: its episodes are samples, not the provider's whole answer
	if shared {
		est = 0
	}
	// Refused in the hold after a pause, after two successes or more: the
	// pause refilled the provider's burst allowance and the held rate spent
	// it, or (a provider that allows no burst) arrival jitter at the limit.
	drained := !shared && c.epPaused && c.epN >= 2 && sent.Sub(c.epStart) < holdAfterPause
	spread := c.allowance == 0 && (fitted == fitApart || fitted == fitFirst && drained)
	// A steady episode of jitterSpan or more: a burst allowance the pause
	// refilled would have been spent within it, at any rate much over the
	// limit.
	long := !shared && sent.Sub(c.epStart) >= jitterSpan && c.epN >= jitterRequests
	sure := c.floor(sent)
	jittered := false // read as jitter what could have been a burst allowance, or a limit that shrank
	switch {
	case c.ceiling == 0 && !c.cfg.DisableSlowStart:
		rate, top, confirmed = r0*min(beta, exitCut), r0, false
		c.startOK = c.okSinceCut
	case why == cutRefusing && c.epPaused && c.epN == 0 && c.ceiling > 0 && r0 <= c.ceiling:
		// The first request after a pause refused, at or under the
		// ceiling: a hiccup of the provider, a request of another client,
		// or a limit that fell far. Back off as for refusals that go on,
		// but climb back fast (the ceiling unconfirmed): if the limit
		// fell, the next refusal places it; if not, the ceiling is met
		// again within seconds, not after a whole Recovery (a 17/s
		// provider refused once so was held at 45% of it for 25 s).
		rate, w, confirmed = r0*min(beta, deepCut), c.ceiling, false
	case why == cutRefusing || why == cutLatencyGrowing:
		rate, w, confirmed = r0*min(beta, deepCut), c.ceiling, c.confirmed
		if c.shed && !c.is429 && r0*ceilingMargin < c.ceiling {
			// Shed at once by a host that answers the rest a queue's
			// wait later (see shedAhead): no success since the cut is
			// no sign of a limit far under r0, but r0 was refused. The
			// ceiling goes just under it. (Kept, the climb back to it
			// drew the next, each halving: 64 workers at a host that
			// serves 30/s and sheds past a queue of 50 were refused 68
			// times a minute.)
			w, confirmed = r0*ceilingMargin, false
		}
	case why != cutOvershoot:
	case shared && c.ceiling > 0 && r0 >= jitterShare*c.ceiling && (r0 <= c.ceiling || c.confirmed && r0 <= probeKeep*c.ceiling) && c.quietFor(now) >= plateauHeld:
		// At a controller that sees a share of the traffic, the first
		// refusal any process drew for plateauHeld, at the ceiling (or
		// just over a confirmed one): the edge met by arrival jitter
		// (processes taking turns hand over at the limit), not a limit
		// under the ceiling. A small cut, the ceiling kept, as one
		// process reads a refusal after a steady episode; the refusal
		// budget counts it all the same. (Cut a Decrease step with the
		// ceiling under it, eight processes taking turns at a 17/s
		// provider held 85% of it for the rest of the run.)
		rate, w, confirmed = r0*jitterCut, c.ceiling, c.confirmed
		long = true // a refusal right after its pause: the limit fell, as below
	case est == 0 && drained && c.allowance == 0:
		// Too few successes to measure: spread, as below.
		rate, w = r0*spreadCut, r0*ceilingMargin
	case est == 0:
		if (!shared && (c.shortCut || c.epOK <= shortEpisode || c.jittered) || c.longCut && c.epPaused && c.epOK <= c.weight) && c.cuts > 0 && r0 <= shrinkSlack*c.postCut {
			// Refused on the first request after the last cut (or its
			// pause), or twice in a row within a few requests, or on the
			// second after the pause of a cut that ended a long episode
			// (a provider with no allowance left to refill; a shared
			// controller, on its own second since its own jitter cut, see
			// Restore): the limit is far below the rate the last cut set.
			// (A limit halved after 10 s at it took a third refusal to
			// leave, a Decrease step first.)
			// Where between half of r0 and r0 the limit now lies is not
			// known: the ceiling is unconfirmed, so the climb back is fast
			// and the next refusal places it.
			rate, w, confirmed = r0*min(beta, deepCut), r0*(1+beta)/2, false
		}
	case fitted >= fitStep:
		// Two episodes measured the limit (see twoPoint): just under it.
		rate, w, confirmed = est*episodeMargin, est, confirmed || fitted == fitSure
	case steady && est >= steadyShare*r0 && r0 < jitterShare*c.ceiling && (!spread || long):
		// A refusal at a rate the provider delivered all through a long
		// episode, under the ceiling: arrival jitter against a provider
		// that allows no burst (two requests sent an interval apart arrive
		// closer), not a limit under this rate. A small cut, the ceiling
		// kept; frequent ones lower a temporary cap instead (the refusal
		// budget, see refusalCap).
		rate, w, confirmed = r0*jitterCut, c.ceiling, c.confirmed
		jittered = spread
	case steady && est < farShare*r0:
		// At a steady rate the provider delivered far less: the limit
		// shrank, or a burst allowance hid it. Drop to it.
		rate, w, confirmed = max(r0*min(beta, deepCut), est*episodeMargin), est, c.confirmed
	case spread && (c.epOK < spreadShort*c.weight || drained):
		// Two short episodes after pauses, too alike to tell the limit
		// from the burst allowance, or the first one: the limit lies well
		// under what they delivered, or just under it. A rate well under
		// it tells which at the next refusal (see twoPoint), or costs one
		// climb back.
		rate, w = est*spreadCut, est
	default:
		// The limit lies between what the episode delivered and r0.
		rate = max(est*episodeMargin, r0*beta)
		plateau := !c.nearSince.IsZero() && sent.Sub(c.nearSince) >= plateauHeld && r0 >= jitterShare*c.ceiling
		if confirmed && (r0 > c.ceiling || plateau) && r0 <= probeKeep*c.ceiling {
			// The probe above the ceiling was refused just over it, or
			// the rate was refused at the ceiling after holding there for
			// plateauHeld: the ceiling held through the climb and its
			// plateau (a ceiling over the limit is refused within
			// moments of reaching it), so the limit lies at or over it,
			// and the refusal is the edge met by arrival jitter or a
			// hiccup of the provider. The ceiling stays; one
			// ceilingMargin under r0 would sit a few per cent under a
			// limit the ceiling had found, for good. Frequent such
			// refusals lower the cap instead (see refusalCap).
			w = c.ceiling
		}
	}
	guess := false
	unsteady := c.unsteady(sent)
	if f := c.refill(sent); !shared && why == cutOvershoot && est == 0 && c.shortCut && fitted < fitStep && f > 0 && c.epN >= 2 && !unsteady {
		// A second short episode in a row, refused after a pause, with
		// more than one request admitted after it (so the provider has
		// an allowance): the provider admits about what its pause
		// refilled (see refill), not a cut under the rate.
		// A guess (a fast provider with a small allowance refills as
		// much): the probe tests it, once (see refillProbeMax). Not when
		// the episode before refutes a steady limit there (see unsteady):
		// two refusals of arrival jitter a request or two after their
		// pauses held a 66/s provider at 1.9/s.
		rate, w, confirmed = min(rate, f*spreadCut), min(w, f), false
		guess = !c.refillCeil // not once the probe of a guess was refused
	}
	refill := 0.0
	if c.shortCut && (c.startOK >= refillAllowance || c.brief && c.epN <= 1) {
		// The episode before was short too, and slow start was admitted
		// many requests before its first refusal: an allowance hid the
		// limit. (Or the episode before was brief, after a pause, and
		// this one admitted one request at most after its own: a run of
		// them, at rates each cut deep, is a slow limit far under the
		// rate; halving the rate from 15/s at each took a 0.5/s provider
		// with an allowance of 5 to its fifth refusal, and its ban.)
		refill = c.refill(sent)
	}
	ep := c.episode(sent)
	if sent.Sub(c.epStart) < sureSpan {
		ep = 0 // too short to tell a limit from an allowance the pause refilled
	}
	f, fell := c.surer(now, sure, refill, ep, r0, unsteady)
	ruled := !shared && why == cutOvershoot && c.epPaused && fitted != fitSure && f > 0 && f < rate &&
		(r0 <= shrinkSlack*c.postCut || c.refillCeil)
	c.echoHold = sureHold{}
	switch {
	case ruled && (c.refusals.count(now) > refusalProbe || c.counting(now)):
		// A fourth overshoot within the refusal window (or the fourth
		// refused request, echoes included), at the rate the last cut set
		// (the cuts have not yet reached the limit), with no sure measure
		// of it: a provider that bans at five is counting. The rate and
		// the ceiling drop to what the provider surely admits (see
		// sureHold), and the refusal cap keeps the climb under it.
		h := c.sureHold(&c.fits, sent, f, rate, w, r0, sure, ep, fell)
		rate, w, confirmed = h.rate, h.ceiling, false
		if c.refusals.count(now) <= refusalProbe {
			// The fourth refused request, echoes included, at the second
			// or third overshoot: the ban guard holds the climb at the
			// sure rate until they age out (see banSafe).
			c.span.floor = h.held
		}
	case ruled && c.violations.count(now)+1 == banGuard:
		// The third refused request: an echo of this one, in flight,
		// would be the fourth, and takes this hold (see holdForEcho).
		peek := c.fits // a band the fit names drops the log: not for a hold that may not be taken
		c.echoHold = c.sureHold(&peek, sent, f, rate, w, r0, sure, ep, fell)
	}
	if shared && why == cutOvershoot && c.violations.count(now) > refusalProbe {
		// A fourth refused request within the refusal window, counting
		// echoes and those of the other processes that call the provider
		// (see State.Refusals), at a controller that only samples the
		// provider's episodes: there is no floor to drop to. The ceiling
		// goes spreadCut under the refused rate, unconfirmed, and the
		// refusal cap keeps the climb under it until the refusals age
		// out: a provider that bans at five counts every refused request
		// of every process.
		// The rate starts under that cap, not at the ceiling: 21.3/s under a
		// limit of 20, held there for the minute, drew the fifth.
		// (Not moved back up by an echo, as a slow start's exit is.)
		w, top = min(w, r0*spreadCut), 0
		capShare, _ := refusalCap(c.violations.count(now) + 1)
		rate, confirmed = min(rate, r0*beta, w*capShare), false
	}
	if !shared && why == cutOvershoot {
		c.sure.note(now, sure, rate < r0*min(beta, deepCut)*shrinkSlack)
	}
	c.shortCut = est == 0 && why == cutOvershoot && c.cuts > 0
	c.jittered = jittered
	c.longCut = long && why == cutOvershoot
	c.brief = !shared && why == cutOvershoot && c.epPaused && sent.Sub(c.epStart) < sureSpan
	switch {
	case shared || why != cutOvershoot || !c.epPaused:
		c.briefFloor = 0
	case c.epOK >= fewTokens*c.weight || !c.brief:
		c.briefFloor = sure // a short episode that admitted fewer keeps the one before (see unsteady)
	}
	c.fitTop = 0
	if !shared && why == cutOvershoot && c.cuts > 0 {
		c.fitTop = r0 * fitAbove // fit once the answers in flight are in (see applyFit)
	}
	if w <= 0 {
		w = r0
	}
	if c.declCeil && c.bound(w) != c.ceiling {
		c.declCeil = false
	}
	c.ceiling, c.confirmed, c.exitTop = c.bound(w), confirmed, top
	c.heldSince = time.Time{} // a new climb (see lift)
	c.refillCeil = guess
	c.refusals.add(now)
	held := false // the ban guard holds the climb (see banSafe)
	if (why == cutOvershoot || why == cutRefusing) && c.guarded(now, 1) {
		rate = min(rate, c.banSafe(now))
		switch f := c.spanFloor(now, sent); {
		case f > 0:
			// The fourth refusal in the minute, none paused for: what the
			// provider admitted from the first to this one is surely
			// under its limit (see spanFloor), whatever the cuts left,
			// and the climb stays under it until the refusals age out
			// (see banSafe). (Left to climb back under the ceiling when
			// the cut went under it, 4.1/s with an allowance of 4, one
			// worker 60 ms away, went from 2.5/s to 4.24/s under a
			// ceiling of 4.79 and drew the fifth, in 1 run of 70.)
			rate, c.span.floor, held = min(rate, f), f, true
		case f == 0 && c.spanUnpaused(sent):
			// None paused for, and too few successes since the first to
			// measure anything: the provider admitted next to nothing.
			// The climb stays under this cut's rate until the refusals
			// age out (see banSafe); back towards the ceiling, it drew
			// the fifth from 4.1/s with an allowance of 4 in 1 run of 100.
			// When these are the run's first four refusals, slow start's
			// end and the descent after it, and this cut's rate is no
			// more than the rate slow start began at, the provider is
			// slower than that: the rate holds at refuseFloor. (Held at
			// the cut's rate, 2.6/s, a provider of 2/s with an allowance
			// of 3, 10 ms away, drew the fifth. Not later in the run, nor
			// over that rate: a fixed window that refuses every request
			// until its end shows no more, and 1/s held 24 a 2 s window
			// at 14% of it.)
			switch {
			case c.cuts >= banGuard+1:
			case rate <= min(c.cfg.Initial, defaultInitial):
				rate = min(rate, refuseFloor)
			case c.span.ok > 0:
				// Faster, but the provider let a request or two through
				// between the refusals: a limiter that admits a trickle,
				// not a spent window (which refuses every request until
				// it ends). The rate holds at half that trickle, or at
				// refuseFloor. (Held at the cut's rate, 4.6/s, a provider
				// of 4/s with an allowance of 6, 20 ms away, drew the
				// fifth 1.7 s later.)
				rate = min(rate, max(refuseFloor, c.trickle(sent)))
			}
			c.span.floor, held = rate, true
		}
	}
	if !shared && c.is429 && !c.noise.noisy && (why == cutOvershoot || why == cutRefusing) && c.counting(now) && c.span.floor == 0 && !ruled {
		// The fourth refused request of the minute, echoes included, and
		// no rule above set a hold: the next may be the fifth. The rate
		// holds at what the provider surely admits (see sureNow), or at
		// refuseFloor when nothing shows it, until they age out (see
		// banSafe); not under refusalFloor of a confirmed ceiling. (After
		// slow start's end drew three from a 7.8/s provider with an
		// allowance of 25, the fourth cut to 12.6/s, and the fifth
		// banned; a provider whose arrivals come up to 32 ms late
		// refused a confirmed ceiling of 55.8/s four times in 9 s, and
		// the cut to 52.9/s drew the fifth.) A bare 429 too: with no
		// pause between them, the refusals of slow start's descent come
		// one request after another. (Held only for a 429 that asked
		// for a pause, providers of 2-15/s with allowances of 1-8 that
		// refuse with a bare 429, 10-80 ms away, drew the fifth in 108
		// of 1,152 draws; with this hold, 88; with the hold at
		// refuseFloor above too, 28.)
		s := c.sureNow(now)
		if s <= 0 {
			s = min(rate, c.cfg.Initial, refuseFloor)
		}
		if confirmed {
			s = max(s, c.bound(w)*refusalFloor)
		}
		rate = min(rate, s)
		c.span.floor, held = rate, true
	}
	if held && !shared {
		peek := c.fits // a band that names the limit drops the log: applyFit's to take
		if lo := c.fitFloor(&peek, r0); lo*episodeMargin > rate {
			// The ban guard's hold that no fourth-overshoot rule set
			// (see sureHold, which fits too): what the provider
			// admitted between refusals a few requests apart measures
			// next to nothing, but every token bucket that answered
			// every request of the run as it did, slow start's
			// included, admits the bottom of the fit's band (see
			// fitFloor). The rate and the climb stay just under it:
			// arrival jitter may set it a shade over the limit (25.5/s
			// with an allowance of 20 fitted 25.55/s, and a climb to
			// it drew the fifth). (Held at half the refused rate, a
			// provider of 35.9/s with an allowance of 12 that refuses
			// with a bare 429, 18 ms from three ohlcv streams, got
			// 50-63% of it over 30 s; the band was 34-38/s.)
			rate = lo * episodeMargin
			c.span.floor, c.ceiling = rate, max(c.ceiling, c.bound(lo))
		}
	}
	c.rate = c.clamp(min(rate, c.rate, c.ceiling)) // a cut never raises the rate, nor leaves it above its ceiling
	c.postCut = c.rate
	c.fitClimb()
	c.lastCut, c.okSinceCut, c.nearSince, c.echoes, c.cutR0 = now, 0, time.Time{}, 0, 0
	if top > 0 || unconfirmed {
		c.cutR0 = r0 // slow start's end, or under an unconfirmed ceiling: its echoes measure how far over it was (see echoCut)
	}
	c.cuts++
	c.liftProbe = false
	c.startEpisode(now)
	c.hist.reset(now, c.rate)
	return true
}

// sureHold is what the fourth-overshoot rule holds at (see cut): a rate,
// a ceiling, and the rate the ban guard keeps the climb under.
type sureHold struct {
	rate, ceiling, held float64
}

// sureHold returns the fourth-overshoot rule's hold (see cut), fitting the
// answers logged in fits, for an overshoot of a request sent at sent: from
// the rate r0 it was sent at, the cut's rate and ceiling w, and the
// measures of what the provider surely admits: f (see surer), sure (see
// floor), ep (the episode's rate) and fell (the limit fell). The rate and the ceiling drop to what the provider
// surely admits (see floor and surer), and the refusal cap keeps the climb
// under it (a ceiling over the pauses' refills drew the fifth from 1/s with
// an allowance of 20 or 40; one at half what a falling limit's episode
// delivered, from 30/s with an allowance of 3). When the episode's floor
// counts fewer than fewTokens requests, rate and ceiling go a token under
// it: a provider's bucket may hold most of a token at a refusal, so an
// episode of T seconds may be admitted one more than its floor counts; or,
// for the refills of pauses that each admitted a single request (one a
// pause says the limit within a token over the pause, over or under),
// spreadCut under them. (0.5/s with an allowance of 2, held at the 0.53/s
// an episode of two successes showed, and 0.7/s with 4 at the 0.77/s its
// refills showed, drew the fifth and were banned. Applied to every
// provider, the margin cost limits that halve 5 points of goodput.)
func (c *Controller) sureHold(fits *fitLog, sent time.Time, f, rate, w, r0, sure, ep float64, fell bool) sureHold {
	rate, w = f, min(w, max(f, rate*spreadCut))
	switch t := max(c.sinceCut(sent), 1e-9); {
	case f*t < fewTokens && c.startOK < refillAllowance:
		// A slow provider: a token is much of what the episode
		// measured, so rate and ceiling go a token under it, or
		// spreadCut under it (see above). Not one whose slow start
		// was admitted many: a 200/s provider's brief episodes after
		// pauses (arrival jitter) took it to 5% of its limit.
		safe := max(f-c.weight/t, f*spreadCut)
		rate, w = safe, safe
	case sure <= 0:
		w = f
	case fell && ep > 0:
		w = max(f, min(w, ep*deepCut))
	case fell && c.brief:
		w = f // two brief episodes in a row: the limit fell far, and the floor is all there is
	case fell:
		w = max(f, min(w, r0*deepCut))
	}
	held := rate
	if lo := c.fitFloor(fits, r0); lo*episodeMargin > rate {
		// Every token bucket that answered every request of the run
		// as the provider did admits the bottom of the fit's band (see
		// fitLog), a surer measure than the floor when the provider
		// has an allowance: the floor counts the whole pause, through
		// which the allowance may have idled full (7.1/s with an
		// allowance of 3 was held at 4/s, at 55% of it over 30 s, the
		// band's bottom being 6/s). Not for a band whose buckets allow
		// no burst at its bottom: arrival jitter refuses those at any
		// rate (40/s with 7.5 ms of it drew the fifth).
		rate, w = lo*episodeMargin, max(w, lo)
		held = lo
	}
	if c.refillCeil {
		// The probe above a ceiling the refill rule guessed was
		// refused: the limit lies between what the provider surely
		// admits and the refused rate, and the next refusal may be
		// the fifth. The ceiling goes to the sure rate.
		w = held
	}
	return sureHold{rate: rate, ceiling: w, held: held}
}

// fitFloor returns the bottom of the band of rates the bucket fit finds
// for the answers logged in fits (see fitLog), looked for up to fitAbove
// over r0, the refused rate: every token bucket that answered every
// request of the run as the provider did admits it. Or 0 when there is no
// such band, the provider has refused nothing with 429, or the band's
// buckets allow no burst at its bottom: arrival jitter refuses those at
// any rate (40/s with 7.5 ms of it drew the fifth).
func (c *Controller) fitFloor(fits *fitLog, r0 float64) float64 {
	fits.jitter = c.arrivalJitter()
	if b, ok := fits.fit(r0 * fitAbove); ok && c.throttled && b.burst >= 2 {
		return b.lo
	}
	return 0
}

// holdForEcho takes the hold the last cut left for an echo (see cut) when
// a refused request in flight at it is the fourth within refusalWindow:
// the next may be the fifth a provider bans at. (Leaving slow start drew
// two refused requests, the next overshoot one and its echo, and the rate
// stayed over the limit until the fifth: 7.6-7.9/s with allowances of 4-6,
// 2-8 workers 41-55 ms away, banned within 5 s.)
func (c *Controller) holdForEcho(now time.Time) {
	h := c.echoHold
	if h.held <= 0 || c.weight > 1 || !c.counting(now) {
		return
	}
	c.echoHold = sureHold{}
	c.rate = c.clamp(min(c.rate, h.rate))
	if w := c.bound(h.ceiling); w < c.ceiling {
		c.ceiling, c.declCeil = w, false
	}
	c.confirmed, c.postCut, c.span.floor = false, min(c.postCut, c.rate), h.held
	c.fitClimb()
	c.hist.reset(now, c.rate)
}

// quietFor returns how long before now the last cut or refused request
// (another process's included, see State.Refusals) came; 0 when there was
// none (nothing says how long it has been quiet).
func (c *Controller) quietFor(now time.Time) time.Duration {
	t := c.lastCut
	if v := c.violations.latest(); v.After(t) {
		t = v
	}
	if t.IsZero() {
		return 0
	}
	return now.Sub(t)
}

// confirm marks the ceiling confirmed on an echo of the last cut: another
// request in flight was refused too, so the rate really was over the limit
// and the refusal that cut was no fluke. After slow start, the ceiling
// moves up to the rate the overshoot began at.
//
// A ceiling that a long refusal's delivered rate set (see applyQuota) is
// not confirmed so: the requests in flight when the provider started
// refusing for long are refused whatever the rate, so their refusals prove
// nothing about it. (Confirmed by the echoes of a 2-minute ban, a rate of
// 0.3/s, what 35 requests over the ban's cycle made, held for good.)
func (c *Controller) confirm() {
	if c.confirmed || c.ceiling == 0 || c.ceiling == c.quotaCeil {
		return
	}
	c.confirmed = true
	if c.exitTop > 0 {
		c.ceiling = max(c.ceiling, c.bound(c.exitTop*ceilingMargin))
		c.exitTop = 0
	}
	c.fitClimb()
}

// bound keeps a ceiling in [Min, declared Limit/Window].
func (c *Controller) bound(w float64) float64 {
	if c.declared > 0 {
		w = min(w, c.declared)
	}
	return max(w, c.cfg.Min)
}

// near reports whether an overshoot (or a measured rate) at r lands near
// the current ceiling, where a right ceiling puts the next overshoot: down
// to one ordinary cut below it, up to twice that above it (the probe passes
// ceiling × (2 - Decrease) one cycle after the ceiling, and an overshoot
// just then is still the same limit).
func (c *Controller) near(r float64) bool {
	d := 1 - c.cfg.Decrease
	return c.ceiling > 0 && r >= c.ceiling*(1-d) && r <= c.ceiling*(1+2*d)
}

// climb grows the rate by dt seconds of successful traffic: slow start or
// additive increase while no ceiling is known, the ceiling curve after. With
// several overshoots in the last minute (the refusal budget, see
// refusalCap) the climb stops at a cap at or under the ceiling until they
// age out; it never lowers the rate.
func (c *Controller) climb(now time.Time, dt float64) {
	if dt <= 0 {
		return
	}
	prev := c.rate
	if c.held(now) && !c.unheld || !c.used() {
		return
	}
	switch {
	case c.reentry > c.rate:
		// Back to a rate restored at start, at slow start's pace (see
		// Restore).
		c.rate = min(c.rate*math.Exp2(dt/c.cfg.SlowStart.Seconds()), c.reentry)
		if c.rate >= c.reentry {
			c.reentry = 0 // back: the rate is the learned one again
		}
	case c.ceiling == 0 && !c.cfg.DisableSlowStart:
		// At most x1.5 per response: at a few requests/s one answer would
		// otherwise credit a whole doubling, and the first refusal would
		// come far above the limit.
		next := c.rate * min(math.Exp2(dt/c.cfg.SlowStart.Seconds()), slowStartStep)
		if a := c.exitAccel(); next > c.rate+a*dt {
			next = c.rate + a*dt
		}
		c.rate = next
	case c.ceiling == 0:
		c.rate += c.cfg.Increase * dt
	default:
		kp := c.kProbe()
		if c.liftProbe && c.confirmed && c.quietFor(now) >= refusalWindow {
			// A hold lifted (see lift), and a whole refusal window has
			// passed with no refusal: the hold spent the plateau's time
			// at the ceiling, so the probe above it goes liftSpeed times
			// faster, as the climb back did. A provider that bans at five
			// has none of its refusals left in the window. (At its own
			// pace over a ceiling of 3.1/s, a limit that rose sixfold
			// was at 0.11 of it 150 s after the rise; a 10/s one rising
			// to 40/s got 37% of it over 2 minutes, 68% now.)
			kp *= liftSpeed * liftSpeed * liftSpeed
		}
		c.rate = curve(c.rate, c.ceiling, c.kUp, kp, dt)
		if !c.confirmed && c.exitTop > 0 && c.rate > staleCeiling*c.ceiling && c.quotaTop == 0 && !c.declCeil && c.weight <= 1 {
			// The probe passed the ceiling slow start's one refusal set,
			// by far, with no refusal: that refusal was not the limit (a
			// stray one, another client's burst, a hiccup). Slow start
			// again, from here.
			c.ceiling, c.kUp, c.exitTop = 0, 0, 0
			break
		}
		if c.confirmed && c.rate > risenCeiling*c.ceiling && c.quotaTop == 0 && !c.declCeil && c.weight <= 1 && !c.refillCeil {
			// The probe passed a confirmed ceiling by a fifth, with no
			// refusal: the limit rose. The ceiling is unconfirmed, so
			// the probe above it goes at the unconfirmed pace and finds
			// the new limit within seconds (at its own pace, a limit
			// that rose fourfold was reached minutes later). Not past
			// a declared or announced quota, nor at a controller that
			// sees a share of the traffic.
			c.confirmed = false
		}
		if q := c.quotaTop; q > 0 && c.rate > q && !c.confirmed {
			// The fast climb above a long refusal's estimate met the
			// margin under where that refusal came (see applyQuota).
			c.rate, c.ceiling, c.confirmed, c.quotaTop = max(prev, c.bound(q)), c.bound(q), true, 0
			c.quotaHeld = c.ceiling
			c.fitClimb()
		}
		n := c.refusals.count(now)
		if c.weight > 1 {
			n = max(n, c.violations.count(now)) // the others' overshoots are not this one's to count: their refusals are
		}
		held := false
		if share, probe := refusalCap(n); !probe && (!c.refillCeil || c.violations.count(now) > refillProbeMax) {
			c.rate, held = max(prev, min(c.rate, c.ceiling*share)), true
		}
		if c.guarded(now, 0) {
			c.rate, held = max(prev, min(c.rate, c.banSafe(now))), true
		}
		c.lift(now, held)
	}
	c.rate = c.clamp(c.rate)
	if c.ceiling > 0 && c.rate >= jitterShare*c.ceiling && c.nearSince.IsZero() {
		c.nearSince = now
	}
}

// exitAccel returns how fast, in requests/s per second, slow start may
// raise the rate so that a burst allowance of exitAllowance hiding the
// limit is spent with at most exitEchoes requests refused in flight: +Inf
// while the latency is unknown. The requests refused at
// slow start's end are those sent in the round trip before its first
// refusal came back, over what the provider admits then: (r - L) x RTT,
// where r - L grew at a per second while the allowance B was being spent
// (a t^2 / 2 = B), so RTT x sqrt(2 B a). Doubling every SlowStart, 8
// workers took a 47/s provider with an allowance of 24, 34 ms away, to
// 198/s before the allowance ran out, and the seven requests in flight
// were all refused: a ban from a provider that bans at five. Never under
// exitAccelMin: 240 ms away, the pace for the round trip alone is 1.4/s
// per second, and a 50/s provider would take the whole of a 30 s run to
// reach.
func (c *Controller) exitAccel() float64 {
	l := c.latency
	if l <= 0 {
		return math.Inf(1)
	}
	return max(exitEchoes*exitEchoes/(2*exitAllowance*l*l), exitAccelMin)
}

// sureNow returns the best rate the provider surely admits that the
// refusal window shows: since the span's first refusal (which left its
// allowance empty), at most L·T + 1 requests were admitted in T seconds,
// whatever pauses came between; the best floor of the window's episodes
// (see sureRate); 0 when none shows one.
func (c *Controller) sureNow(now time.Time) float64 {
	s := max(c.sure.at(now), c.floor(now))
	if sp := &c.span; !sp.from.IsZero() && sp.ok > c.weight {
		last := sp.from
		for _, t := range sp.last {
			if t.After(last) {
				last = t
			}
		}
		if t := last.Sub(sp.from).Seconds() + 2*c.arrivalJitter().Seconds(); t > 0 {
			s = max(s, (sp.ok-c.weight)/t)
		}
	}
	return s
}

// trickle returns trickleShare of the rate at which the provider admitted
// requests from the span's first refusal to a refusal of a request sent at
// sent, none paused for (see spanFloor). Its allowance spent at the first
// refusal, a provider of L/s admits at most L·T + 1 requests in the T
// seconds after it (the first from a token nearly whole), so n/T is at
// most L + 1/T, and half of it at most L when L·T >= 1: a limit that
// admits a request a span or more.
func (c *Controller) trickle(sent time.Time) float64 {
	t := sent.Sub(c.span.from).Seconds() + 2*c.arrivalJitter().Seconds()
	if t <= 0 {
		return 0
	}
	return c.span.ok / t * trickleShare
}

// trickleShare is the share of a trickle the ban guard holds at (see
// trickle).
const trickleShare = 0.5

// refuseFloor is the rate the ban guard holds at when nothing shows what
// the provider surely admits (see cut).
const refuseFloor = 1.0

// echoCut lowers the rate after an echo of slow start's end: a request
// sent before the cut that ended it, refused after it. With k such echoes,
// the rate the cut's refused request was sent at, r, was over the
// provider's limit by about k / RTT (the requests sent over one round trip
// beyond what the provider admits), so the rate goes a Decrease step under
// r - k / RTT. A burst allowance that hid the limit from slow start leaves
// a ceiling far over it, and the echoes say so. (A 7.8/s provider with an
// allowance of 25, 39 ms away, left slow start at 52/s with two echoes;
// the rate the cut set, 31.6/s, drew the fourth and fifth refused requests
// a pause later, and a ban.) An estimate from a few requests: the ceiling
// stays where the cut set it (a single echo of a provider that allows no
// burst, arrivals bunched, would have put it far under the limit), and the
// climb back to it takes a cycle. Also after a cut under an unconfirmed
// ceiling (a 9.3/s provider with an allowance of 21 drew a fourth refused
// request, and its echo the fifth, from a rate an echo had shown 2.3 times
// over), but not after one under a confirmed ceiling: near it, echoes are
// arrivals bunched by jitter, not how far over the rate was (a 50/s
// provider with 100 ms of latency jitter lost 4 points). Not at a
// controller that sees a share of the traffic, whose requests in flight
// are not all the provider's.
func (c *Controller) echoCut(now time.Time) {
	c.echoes++
	if c.cutR0 <= 0 || !c.is429 || c.weight > 1 || c.latency <= 0 || c.ceiling <= 0 || c.noise.noisy {
		return
	}
	r, k := c.cutR0, float64(c.echoes)
	if k > r*c.latency {
		// More echoes than requests a round trip at r holds: sent
		// bunched, not paced at r, they say nothing of how far over.
		return
	}
	est := max(r-k/c.latency, r*echoFloor)
	if v := est * c.cfg.Decrease; v < c.rate {
		c.rate = c.clamp(v)
		c.postCut = min(c.postCut, c.rate)
		c.fitClimb()
		c.hist.reset(now, c.rate)
	}
}

// echoFloor is the least share of the refused rate echoCut goes to.
const echoFloor = 0.1

// exitEchoes and exitAllowance are what slow start's pace is fitted to,
// and exitAccelMin the least pace (see exitAccel).
const (
	exitEchoes    = 2.0
	exitAllowance = 25.0
	exitAccelMin  = 5.0
)

// lift follows the bounds the refusal budget and the ban guard set on the
// climb (held: one bounds it at now). Once they lift after bounding it for
// liftHeld or more, within an ordinary cut under a confirmed ceiling, the
// climb back to the ceiling takes a liftSpeed-th of a cycle, not the cycle
// the last cut fitted: the cycle spends most of its time near the ceiling,
// and the hold already spent it there. (A climb from 0.95 of the ceiling
// after a minute's hold took another 36 s before the probe above it could
// begin, and a limit that had risen was found minutes late.) An
// unconfirmed ceiling's climb is fast already. So is the probe above the
// ceiling, once a refusal window has passed with none (see climb).
func (c *Controller) lift(now time.Time, held bool) {
	switch {
	case held && c.heldSince.IsZero():
		c.heldSince = now
	case !held && !c.heldSince.IsZero():
		if now.Sub(c.heldSince) >= liftHeld && c.confirmed && c.rate >= min(c.cfg.Decrease, refusalFloor)*c.ceiling {
			if c.rate < c.ceiling {
				rec := c.cycle() / liftSpeed
				c.kUp = (c.ceiling - c.rate) / (rec * rec * rec)
			}
			c.liftProbe = true
		}
		c.heldSince = time.Time{}
	}
}

// held reports whether the rate holds at now: early in an episode that began
// at the end of a pause, once a ceiling is known. The pause refilled the
// provider's burst allowance, if it has one; at a steady rate the episode
// then measures how long the allowance lasts at that rate (see twoPoint),
// which a climb through it would blur. A controller that sees a share of
// the traffic measures no episodes (see SetShare), and does not hold.
func (c *Controller) held(now time.Time) bool {
	return c.epPaused && c.ceiling > 0 && c.weight <= 1 && now.Sub(c.epStart) < holdAfterPause
}

// used reports whether the caller uses the rate it has: whether, over
// about the last second (see sendMeter), it sent at least 1/usedShare of
// the requests the rate in force allowed (for a controller that sees a
// share of the traffic, its share of them; see SetShare). A caller that
// sends less than it may (a worker or two at a long latency, a collector
// busy writing between bursts of fetches) proves nothing about the rate
// above what it sends, and climbing on its successes left the rate
// unbounded: one worker at 10/s for 20 s raised it to 1088/s, and 32
// workers then drew 30 refusals at once from a 50/s provider. Until
// usedMinSends requests were answered, it says yes: slow start's first
// requests.
func (c *Controller) used() bool {
	u, ok := c.sends.use()
	return !ok || u*c.weight >= 1/usedShare
}

// firstCreditMax bounds the credit of a restored controller's first
// success (see Controller.Restore): the longest a restored provider holds
// its first request.
const firstCreditMax = 2 * time.Second

// The demand measure (see sendMeter).
const (
	// usedShare is how far above the rate the caller sends at the
	// controller may climb: room for a demand that grows, as a congestion
	// window may grow to twice what is in flight.
	usedShare = 2.0
	// usedWindow and usedIntervals set the meter's memory: a second, or
	// usedIntervals intervals of the rate when that is longer.
	usedWindow    = time.Second
	usedIntervals = 4
	// usedMinSends is how many requests the meter needs to say anything.
	usedMinSends = 4
)

// sendMeter measures what share of the rate the caller uses: the requests
// it sent against the slots the rate in force between them gave, each
// request and each slot weighted down as it ages (by e^(-age/window)).
// Slots are counted at the lower of the rates in force when the request
// before was sent and when this one was: the one the pacer spaced it at.
// Slow start, which climbs faster than its requests, is then not mistaken
// for a caller that sends less than it may, nor is a run of cuts (a
// fixed window spent with no Retry-After halves the rate at each refused
// request: counted at the rate before each cut, half the slots looked
// unused, and the climb stayed off for a minute after the window reopened,
// the rate at its least). A pause's wait is not the caller's: it gives no slots. A
// burst of requests after a quiet spell (a collector that fetches ahead,
// then writes) uses a few of the many slots the spell gave. Not safe for
// concurrent use; the Controller's mutex guards it.
type sendMeter struct {
	last         time.Time // the latest send noted
	lastRate     float64   // the rate in force then
	sends, slots float64   // aged sums
	n            int       // sends noted, all told
}

// add notes a request sent at sent (zero: unknown, not noted) with rate in
// force, the provider paused until pauseEnd (if after the last send).
func (m *sendMeter) add(sent time.Time, rate float64, pauseEnd time.Time) {
	if sent.IsZero() || !(rate > 0) {
		return
	}
	m.n++
	if m.last.IsZero() {
		m.last, m.lastRate, m.sends, m.slots = sent, rate, 1, 1
		return
	}
	if !sent.After(m.last) {
		m.sends++ // sent with the latest (answers come out of order): no time passed
		return
	}
	from := m.last
	if pauseEnd.After(from) {
		from = pauseEnd
		if from.After(sent) {
			from = sent
		}
	}
	window := max(usedWindow.Seconds(), usedIntervals/m.lastRate)
	k := math.Exp(-sent.Sub(m.last).Seconds() / window)
	m.sends = m.sends*k + 1
	// The slots of [from, sent), each aged as it lies back from sent: a
	// quiet spell of a minute weighs a window's worth, not a minute's
	// (the caller then sending at the full rate had no climb for 4-11 s).
	m.slots = m.slots*k + min(m.lastRate, rate)*window*(1-math.Exp(-sent.Sub(from).Seconds()/window))
	m.last, m.lastRate = sent, rate
}

// use returns the share of the slots the caller used, and whether the
// meter has seen enough to say.
func (m *sendMeter) use() (float64, bool) {
	if m.n < usedMinSends {
		return 0, false
	}
	if m.slots <= 0 {
		return 1, true
	}
	return m.sends / m.slots, true
}

// curve advances rate r by dt seconds along the cubic through the ceiling
// w (t = 0 at w): w + kUp·t³ below it, concave, fast far from w and flat
// near it; w + kProbe·t³ above it, convex, probing slowly and then faster.
func curve(r, w, kUp, kProbe, dt float64) float64 {
	if kUp <= 0 {
		kUp = kProbe
	}
	var t float64
	if r < w {
		t = -math.Cbrt((w - r) / kUp)
	} else {
		t = math.Cbrt((r - w) / kProbe)
	}
	t += dt
	if t < 0 {
		return w + kUp*t*t*t
	}
	return w + kProbe*t*t*t
}

// cycle returns the time, in seconds, of a confirmed climb back to the
// ceiling: Recovery, or the time of minCycleRequests at the ceiling if
// longer.
func (c *Controller) cycle() float64 {
	return max(c.cfg.Recovery.Seconds(), minCycleRequests/c.ceiling)
}

// recovery returns the time, in seconds, the climb back to the ceiling
// takes: a cycle, or a fraction of Recovery while the ceiling is
// unconfirmed.
func (c *Controller) recovery() float64 {
	if !c.confirmed {
		return c.cfg.Recovery.Seconds() / unconfirmedRecovery
	}
	return c.cycle()
}

// kProbe returns the coefficient of the probe above the ceiling: the mirror
// image of an ordinary cut's climb, reaching ceiling × (2 - Decrease) one
// cycle after passing the ceiling, or Recovery/unconfirmedProbe after it
// while the ceiling is unconfirmed.
func (c *Controller) kProbe() float64 {
	rec := max(c.cycle(), probeCost*c.costly.Seconds())
	if !c.confirmed {
		rec = c.cfg.Recovery.Seconds() / unconfirmedProbe
	}
	if c.refillCeil {
		rec /= refillProbeSpeed // a guess, tested fast (see refillProbeMax)
	}
	return c.ceiling * (1 - c.cfg.Decrease) / (rec * rec * rec)
}

// probeCost is how many times the pause a refusal costs (see
// Controller.costly) the probe above a confirmed ceiling takes to pass
// ceiling × (2 - Decrease): a provider that answers each refusal with 60 s
// of Retry-After is probed over ten minutes, not 45 s (probed as often as
// others, a 201/s one was refused every 90 s, a third of it).
const probeCost = 10

// The probe above a ceiling the refill rule guessed (see cut). Two short
// episodes after pauses that each admitted about what a pause refilled
// are a slow provider with an allowance of several requests, or a fast
// one with an allowance of two or three: 7/s with 2 admits 3-4 requests
// after each one-second pause, as 2.4/s with 5 does. Held at the guess by
// the refusal budget, the fast ones ran at 30-55% of their limit for the
// minute. While the minute's refused requests leave room for one more
// before the fifth, which common ban policies punish (refillProbeMax),
// the climb probes above the guess, refillProbeSpeed times faster than
// above an unconfirmed ceiling: a slow provider refuses the probe within
// seconds of passing its limit, a refusal after which the rate holds at
// what the provider surely admits (the fourth-overshoot rule); a fast one
// is found.
const (
	refillProbeMax   = 3
	refillProbeSpeed = 2
)

// fitClimb fits the climb from the current rate to the ceiling to take one
// recovery, however deep the cut was.
func (c *Controller) fitClimb() {
	c.kUp = 0
	if c.ceiling > 0 && c.rate < c.ceiling {
		rec := c.recovery()
		c.kUp = (c.ceiling - c.rate) / (rec * rec * rec)
	}
}

// banGuard is how many refusals within refusalWindow, each drawn by the
// rate (a cut, not an echo of one), make the next refusal the fifth that
// common ban policies punish: from the fourth until they age out, the
// ban guard holds the rate under the ceiling by twice the arrival jitter
// the latencies show (see banSafe). The cut at the fourth went to 0.9 of
// the refused rate, within the jitter of a provider that allows no burst,
// and arrival jitter drew the fifth.
const banGuard = refusalProbe + 1

// banFloor is the least share of the ceiling the ban guard holds the rate at.
const banFloor = 0.5

// tailOver is how many times the 95th percentile of the last latencies'
// spread the longest hold of the minute must be for the ban guard to read
// it as a tail of its own (see banSafeCeiling).
const tailOver = 1.5

// latencySamples is how many latencies the arrival jitter is read from at
// least (see latencyRing.high).
const latencySamples = 8

// guarded reports whether the ban guard holds the rate (see banGuard),
// with pending refusals not yet logged: more than banGuard refusals that
// cut within refusalWindow (at a controller that sees a share of the
// traffic, or the refused requests of every process). Not once five
// requests or more were refused within it with no ban (the provider does
// not ban at five: a window's echoes, another process's), nor for 503s
// found to be noise.
func (c *Controller) guarded(now time.Time, pending int) bool {
	if c.noise.noisy {
		return false // its cuts were noise, not the rate's
	}
	if c.violations.count(now)+pending > banGuard+1 {
		return false // five refused in the minute, and no ban: it does not ban at five
	}
	n := c.strikes.count(now)
	if c.weight > 1 || c.span.floor > 0 {
		// The refused requests of every process count; and those of this
		// one, echoes included, once they set the hold (see cut).
		n = max(n, c.violations.count(now))
	}
	return n+pending > banGuard
}

// counting reports whether the refused request not yet logged is the
// fourth within refusalWindow, echoes included: a provider that bans at
// five counts every refused request, so the next may be its fifth. (From
// the fifth with no ban, it does not ban at five; see guarded.)
func (c *Controller) counting(now time.Time) bool {
	return c.violations.count(now)+1 == banGuard+1
}

// banSafe returns the rate at which two requests sent one interval apart
// reach a provider that allows no burst, at the ceiling, one interval or
// more apart, when the first was held up on its way by twice the arrival
// jitter the latencies show, or by the longest hold of the last minute
// (see latencyTail), and the second was not.
func (c *Controller) banSafe(now time.Time) float64 {
	if f := c.span.floor; f > 0 {
		return min(f, c.banSafeCeiling(now))
	}
	return c.banSafeCeiling(now)
}

// banSafeCeiling is banSafe from the ceiling and the arrival jitter alone.
func (c *Controller) banSafeCeiling(now time.Time) float64 {
	if c.ceiling <= 0 {
		return math.Inf(1)
	}
	if c.startOK >= refillAllowance {
		// Slow start was admitted many requests before its first
		// refusal: an allowance, which absorbs the jitter (a provider
		// that allows no burst refuses slow start within a request or
		// two of its limit).
		return c.ceiling
	}
	if c.recent.n < latencySamples {
		// Too few latencies of its own to tell the jitter (a process
		// that takes turns with others adopts their rate): spreadCut
		// under the ceiling. (With no margin, four processes at 8/s with
		// 30 ms of arrival jitter were banned in 3 runs of 24, by a
		// process that had taken up the rate at 0.9 of the ceiling.)
		return c.ceiling * spreadCut
	}
	// An allowance absorbs arrivals bunched up by as much as it holds
	// beyond one request.
	absorbed := max(0, c.allowance-1) / c.ceiling
	p95 := c.arrivalJitter().Seconds()
	margin := max(0, 2*p95-absorbed)
	if margin >= 1/c.ceiling {
		// More jitter than a provider that allows no burst tolerates at
		// the ceiling: running near it, the caller would have been
		// refused at every other request. The provider absorbs it (an
		// allowance, a window), and jitter is not what refuses.
		return c.ceiling
	}
	if hold := c.tailJitter(now).Seconds(); hold > tailOver*p95 && hold < 1/c.ceiling {
		// The next refusal may be the fifth: twice the minute's longest
		// hold on the way, which the 95th percentile does not see, must
		// not draw it. (Held at twice the 95th percentile, a 15/s limit
		// that allows no burst, 3% of requests held up an exponential
		// 3 ms on the way, drew the fifth in 3 runs of 40 over five
		// minutes, and with 5% held 6 ms, in 11; at the longest hold
		// once, in 0 and 2.) A hold of an interval or more is a one-off
		// no rate over half the ceiling spaces out; one under tailOver
		// times the 95th percentile is no tail, and its margin stands.
		margin = max(margin, min(2*hold-absorbed, 1/c.ceiling))
	}
	return max(1/(1/c.ceiling+margin), c.ceiling*banFloor)
}
