package aimd

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/forage-go/forage/internal/cfgerr"
)

// ErrInvalidConfig is wrapped by every error [New] returns, so
// errors.Is(err, aimd.ErrInvalidConfig) tells a bad Config from other errors.
var ErrInvalidConfig = errors.New("aimd: invalid config")

// invalid builds this package's configuration errors.
var invalid = cfgerr.For("aimd", ErrInvalidConfig)

// Defaults applied by [New] to zero Config fields.
const (
	defaultInitial   = 4.0                    // requests/s before the first response
	defaultMin       = 0.05                   // requests/s: one request every 20s
	defaultMax       = 10000.0                // requests/s
	defaultIncrease  = 1.0                    // requests/s gained per second of success
	defaultDecrease  = 0.9                    // multiplier applied on pressure
	defaultRecovery  = 45 * time.Second       // climb from a decrease back to the ceiling
	defaultSlowStart = 250 * time.Millisecond // doubling time before the first pressure
	defaultCoolOff   = time.Second            // refusals within it decrease once
	minRate          = 1e-6                   // requests/s; below, one request per 11 days, is absurd
	maxRate          = 1e9                    // requests/s; anything above is absurd
)

// Config configures a [Controller]. The zero Config is valid and means all
// defaults. Rates are in requests per second (or in the provider's weight
// units per second, if the caller paces weights).
type Config struct {
	// Initial is the conservative rate used before the first response, when
	// nothing is known about the provider. Must be in [Min, Max] when set.
	// Defaults to 4/s (or Min or Max, if 4/s lies outside them): a quarter
	// of a second before the second request, and with the default SlowStart
	// 50/s is reached in about a second of success and 200/s in 1.5s.
	Initial float64

	// Min is the lowest rate the controller ever sets, however long the
	// provider refuses: the rate at which it keeps probing. Must be in
	// [1e-6, 1e9] when set. Defaults to 0.05/s (one request every 20s), or
	// Max if that is lower.
	Min float64

	// Max is the highest rate the controller ever sets. Must be in
	// [1e-6, 1e9] when set, and >= Min. Defaults to 10000/s.
	Max float64

	// Increase is the additive climb, in requests/s gained per second of
	// successful traffic (time, not responses, so the climb does not depend
	// on how many requests are in flight). It drives the climb before the
	// first pressure when DisableSlowStart is set; once a ceiling is learned
	// the climb follows the ceiling curve (see Recovery). Must be in
	// [0, 1e9]. Defaults to 1/s per second.
	Increase float64

	// Decrease is the factor the rate is multiplied by on an ordinary
	// overshoot (a refusal after successes, or smoothed latency crossing
	// LatencyTarget), once per overshoot. Must be in (0, 1). Defaults to 0.9:
	// the climb back to the learned ceiling is flat near it, so the rate
	// spends most of its time just under the ceiling and a gentle cut loses
	// little. Some cuts are deeper: min(Decrease, 0.6) leaving slow start,
	// and min(Decrease, 0.5) when refusals continue with no success since
	// the last cut (the back-off) or come within a request or two of it (the
	// limit shrank).
	Decrease float64

	// Recovery is how long, in seconds of successful traffic, the climb from
	// a decrease back to the learned ceiling takes, however deep the cut; at
	// least the time of 200 requests at the ceiling, so a slow provider sees
	// few refusals per request too. The climb is a cubic through the
	// ceiling: concave below it (fast far below, flat near it), convex above
	// it, so a grown limit is found: ceiling x (2 - Decrease) one Recovery
	// after passing it, where the ceiling, passed by 20% with no refusal,
	// is no longer confirmed and the probe goes at the unconfirmed pace.
	// Expect about one overshoot per Recovery; longer means fewer refusals
	// and slower discovery of a grown limit. A ceiling resting on a single
	// refusal (unconfirmed: see the package documentation) is climbed back
	// to in Recovery/16 and probed above it in Recovery/12. Defaults to
	// 45s.
	Recovery time.Duration

	// SlowStart is the doubling time of the rate, in seconds of successful
	// traffic, before the first pressure, so a run climbs from Initial to
	// the provider's limit in a second or two rather than a minute. Only
	// time the caller used counts (see Increase), so a caller with one
	// request in flight and a long round trip climbs no faster than its
	// answers come back. Far away, the doubling also slows to a pace fitted
	// to the round trip (RTT): the rate grows by at most
	// max(0.08/RTT², 5) requests/s per second, so that a burst allowance of
	// up to 25 hiding the limit runs out with about two requests refused in
	// flight, not all of them (a provider that bans at five refused requests
	// a minute counts every one): 50/s is still reached in about a second
	// 10 ms away, in 2 s at 60 ms, in 8 s at 125 ms. Defaults to 250ms; see
	// DisableSlowStart to climb additively instead.
	SlowStart time.Duration

	// DisableSlowStart makes the climb before the first pressure additive
	// (Increase per second), like a plain AIMD. Defaults to false.
	DisableSlowStart bool

	// CoolOff is the fallback for telling one overshoot from the next when a
	// Signal has neither Sent nor Latency: pressure within CoolOff of the
	// last decrease does not decrease again. Defaults to 1s.
	CoolOff time.Duration

	// LatencyTarget turns on the latency signal, which catches providers
	// that slow down instead of refusing: when the smoothed latency of
	// responses exceeds it, the rate stops growing and decreases once, and
	// again only if requests sent after that cut keep waiting longer (the
	// queue still grows); it climbs again once the smoothed latency is back
	// halfway to the lowest seen. Set it well above the provider's normal
	// latency (3-5x): a target under it holds the rate down for good. Zero
	// means off. Defaults to off.
	LatencyTarget time.Duration
}

// resolve validates c and fills its defaults.
func (c Config) resolve() (Config, error) {
	for _, f := range []struct {
		name string
		v    float64
	}{{"Initial", c.Initial}, {"Min", c.Min}, {"Max", c.Max}} {
		if f.v != 0 && !(f.v >= minRate && f.v <= maxRate) {
			return c, invalid.Must("Config."+f.name, "be 0 (the default) or in [1e-06, 1e+09]", f.v)
		}
	}
	if !(c.Increase >= 0 && c.Increase <= maxRate) {
		return c, invalid.Must("Config.Increase", "be in [0, 1e+09]", c.Increase)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Recovery", c.Recovery}, {"SlowStart", c.SlowStart}, {"CoolOff", c.CoolOff}, {"LatencyTarget", c.LatencyTarget}} {
		if f.v < 0 {
			return c, invalid.Must("Config."+f.name, "be >= 0", f.v)
		}
	}
	if c.Decrease != 0 && !(c.Decrease > 0 && c.Decrease < 1) {
		return c, invalid.Must("Config.Decrease", "be in (0, 1)", c.Decrease)
	}
	c.Max = orDefault(c.Max, defaultMax)
	if c.Min == 0 {
		c.Min = min(defaultMin, c.Max)
	}
	if c.Max < c.Min {
		return c, invalid.Must("Config.Max", fmt.Sprintf("be >= Min (%g)", c.Min), c.Max)
	}
	if c.Initial == 0 {
		c.Initial = min(max(defaultInitial, c.Min), c.Max)
	}
	if c.Initial < c.Min || c.Initial > c.Max {
		return c, invalid.Must("Config.Initial", fmt.Sprintf("be in [Min, Max] = [%g, %g]", c.Min, c.Max), c.Initial)
	}
	c.Increase = orDefault(c.Increase, defaultIncrease)
	c.Decrease = orDefault(c.Decrease, defaultDecrease)
	c.Recovery = orDefault(c.Recovery, defaultRecovery)
	c.SlowStart = orDefault(c.SlowStart, defaultSlowStart)
	c.CoolOff = orDefault(c.CoolOff, defaultCoolOff)
	return c, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T float64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Controller discovers a provider's sustainable request rate from the
// responses it sees ([Controller.ObserveAt]) and tells the pacer the rate to
// send at and the pause in force ([Controller.Snapshot]: Rate and
// PausedUntil). It is safe for concurrent use: one mutex guards the state,
// taken once per response and once per snapshot.
//
// The zero Controller is not usable (its methods panic): make one with [New].
type Controller struct {
	cfg Config

	mu          sync.Mutex
	started     bool          // a response has been observed
	inherited   bool          // no success yet since New or Restore: the allowance may be another's leftover (see inheritWindow)
	restored    bool          // Restore gave it an earlier process's state before its first response
	reentry     float64       // the rate restored at start, climbed back to from Initial (see Restore); 0 = none
	inheritFrom time.Time     // when the first request since New or Restore was sent; zero before its answer
	rate        float64       // requests/s
	ceiling     float64       // learned ceiling W, requests/s; 0 = none yet
	confirmed   bool          // the ceiling was met twice, or declared: the slow cycle
	postCut     float64       // the rate the last cut set
	kUp         float64       // climb coefficient below the ceiling, requests/s per s^3
	declared    float64       // Limit/Window from a Quota; 0 = none
	lateEnd     time.Time     // the end of the window whose cap what was left raised over Limit/Window (see declare)
	declCeil    bool          // the ceiling is the declared quota's, not one learned from refusals
	undeclared  int           // successes with no Quota since the last declaration (see declare)
	loneAt      time.Time     // when the last 503 slow start let pass was sent (see refused); zero = none
	loneOK      int           // successes since it
	hinted      bool          // the rate is what a Quota said was left over its reset (see success)
	hintPlenty  bool          // the last such Quota said a tenth of its limit or more was left
	quotaLied   bool          // refused for rate while a Quota set the rate: it only bounds the climb
	windowEnd   time.Time     // the end of the last pause a spent window's Reset set (see lateWindow); zero = none
	resetFloor  bool          // the provider rounds its Reset down: a spent window's pause lasts a second more
	unknownEnds int           // refusals in a row of a quota spent with no word on when it resets (see retryAfter)
	pausedUntil time.Time     // no request before it
	heldUntil   time.Time     // the pause as set by responses that were not echoes
	lastCut     time.Time     // last decrease; zero = none yet
	cuts        uint64        // decreases so far
	okSinceCut  int           // successes since the last decrease
	lastCredit  time.Time     // last success credited to the climb
	firstCredit time.Time     // the first success earns the time since then, up to two intervals (see Restore); zero = nothing
	unheld      bool          // the success that earned firstCredit climbs through a pause's hold
	sends       sendMeter     // the share of the rate the caller uses (see used)
	seen        time.Time     // when the latest answer was observed (see quiet)
	latency     float64       // smoothed latency, seconds; 0 = no sample
	latencyBase time.Duration // latency of the first request sent after the last latency cut
	latencyMin  float64       // lowest Success latency seen, seconds
	latencyHot  bool          // in a latency episode: above target, not yet back halfway
	recent      latencyRing   // the latencies of the last successes, for the arrival jitter
	tail        latencyTail   // the highest latency of the last minute, for the ban guard
	quota       quotaMeter
	hist        rateHistory   // recent rates, to date a refused request's rate
	exitTop     float64       // the rate slow start overshot at, until an echo confirms it
	startOK     int           // successes before slow start's first refusal
	quotaCeil   float64       // the ceiling a long refusal's delivered rate set (see applyQuota); echoes of that refusal do not confirm it
	quotaTop    float64       // where the fast climb above quotaCeil stops, confirmed (see applyQuota); 0 = none
	quotaHeld   float64       // the ceiling quotaTop set, once the climb met it
	costly      time.Duration // the pause the last long refusal asked for (see applyQuota); 0 after a short one
	lastR0      float64       // the rate the last cut's refused request was sent at, when it climbed there (see cut); 0 = not
	epStart     time.Time     // start of the episode: the last cut, or the end of its pause
	epOK        float64       // successes of requests sent since epStart (weighted, see SetShare)
	epN         int           // the same successes, each counted once
	epFail      float64       // failures (Transient) of requests sent since epStart: the limit admitted them too (weighted)
	epPaused    bool          // the episode began at the end of a pause
	allowance   float64       // the provider's burst allowance, as the two-point estimate or the bucket fit found it; 0 = not known
	weight      float64       // what one success counts for: 1/share (see SetShare)
	prevEp      episodeRecord // the episode before this one, for the two-point estimate
	shortCut    bool          // the last cut came too soon after the one before to measure an episode
	jittered    bool          // the last cut read a long episode's refusal as jitter, though a burst allowance or a shrunk limit could explain it
	longCut     bool          // the last cut ended an episode of jitterSpan and jitterRequests or more, or a quiet plateau of a shared controller
	brief       bool          // the last cut's episode, after a pause, lasted under sureSpan
	briefFloor  float64       // the floor of the last episode after a pause that measured one (see unsteady); 0 = none
	refillCeil  bool          // the last cut set the ceiling to what pauses refilled: a guess the probe may test
	refusals    refusalLog    // recent overshoots, for the refusal budget
	sure        sureRate      // the best rate an episode in the refusal window surely delivered (see floor)
	violations  refusalLog    // recent refused requests, echoes and other processes' too (see State.Refusals)
	strikes     refusalLog    // recent refusals that cut: each a refusal the rate drew, not an echo (see banGuard)
	span        strikeSpan    // the successes since the first of them (see spanFloor)
	echoHold    sureHold      // the hold an echo of the last cut's refusal takes if it is the fourth refused request (see holdForEcho)
	echoes      int           // refused requests in flight at the last cut, refused after it (see echoCut)
	cutR0       float64       // the rate the last cut's refused request was sent at, at slow start's end or under an unconfirmed ceiling; else 0 (see echoCut)
	is429       bool          // the refusal being handled is a 429: the provider's limit, which a ban counts
	shed        bool          // the refusal being handled came back before a success could have (see shedAhead)
	fits        fitLog        // the first answers of the run, for the bucket fit
	fitTop      float64       // the top of the fit the last cut awaits; 0 = none
	nearSince   time.Time     // since when the rate has been near the ceiling (jitterShare), since the last cut
	liftProbe   bool          // the hold lifted after liftHeld: the probe above the ceiling goes liftSpeed times faster (see lift)
	heldSince   time.Time     // since when the refusal budget or the ban guard has bounded the climb; zero = not now (see lift)
	quotaMode   quotaMode     // what the provider's quota headers have shown it to be
	quotaWatch  quotaWatch    // the watch that tells a window from a bucket
	throttled   bool          // the provider has refused with 429 or 418: it names its limit
	noise       noiseMeter    // the share of 503s that is not about our rate
}

// New returns a Controller at cfg.Initial, or an error wrapping
// [ErrInvalidConfig] when a field is out of range. It starts no goroutines.
func New(cfg Config) (*Controller, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, rate: cfg.Initial, weight: 1, inherited: true}, nil
}

// rateAt returns the rate in force when a request sent at sent went out:
// at most the current rate (the rate only climbs between cuts, and a
// request sent before the last cut is an echo, never judged by its rate).
func (c *Controller) rateAt(sent time.Time) float64 {
	if sent.IsZero() {
		return c.rate
	}
	return min(c.hist.lookup(sent, c.rate), c.rate)
}

// clamp bounds r to [Min, Max] and to a declared ceiling.
func (c *Controller) clamp(r float64) float64 {
	hi := c.cfg.Max
	if c.declared > 0 {
		hi = max(min(hi, c.declared), c.cfg.Min)
	}
	if math.IsNaN(r) {
		return c.cfg.Min
	}
	return min(max(r, c.cfg.Min), hi)
}
