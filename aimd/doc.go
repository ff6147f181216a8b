// Package aimd discovers a provider's sustainable request rate from the
// responses it gets: a rate-based AIMD fill-rate controller for a pacer such
// as [github.com/forage-go/forage/gcra], fed one [Signal] per response.
//
// # In short
//
// Most hosts never use this package directly: the budget package
// ([github.com/forage-go/forage/budget]) runs one Controller per provider,
// feeds it every answer and paces at its rate. Use it directly to drive a
// pacer of your own: call [Controller.ObserveAt] with each response's
// [Signal] and pace at [Controller.Snapshot]'s Rate, sending nothing
// before its PausedUntil.
//
// The zero [Config] is the right one for a provider whose limit you do not
// know: it starts at 4/s, finds the limit in a second or two, holds just
// under it, and keeps under five refused requests a minute, so that a
// provider that bans on refusals is not triggered (but see "Known limits"
// below). A limit you know is better told than found: budget paces a known
// limit (its Config.Limits) from the first request. Here, [Config.Initial]
// starts the climb higher, [Config.Min] and [Config.Max] bound the rate,
// and [Config.LatencyTarget] reads a provider that slows down instead of
// refusing. The learned state survives a restart: save [Controller.State],
// give it to [Controller.Restore].
//
// The rest of this page says how each kind of answer moves the rate, and
// why: read it when a provider behaves in a way you want to understand.
//
// # The idea
//
// A [Controller] starts at a conservative [Config.Initial] rate, because
// before the first response nothing is known. Successes raise the rate; a
// refusal (429, 418, 503) or a sustained rise in latency cuts it. Three
// rules make it safe:
//
//   - One-way ratchet: only a [forage.Success] raises the rate. A fast 429 is not a
//     healthy provider, a Retry-After pause only ever moves forward, and a
//     [forage.Permanent] error (a broken request) never moves the rate at all.
//   - One cut per overshoot, not per refusal: the requests already in flight
//     when the first 429 arrives all come back refused, and cutting for each
//     collapses the rate (AWS SDK's adaptive mode falls to a few percent of
//     the limit this way). A refusal for a request sent before the last cut
//     ([Signal.Sent], or now - [Signal.Latency]) is an echo and does not
//     cut again (the echoes of slow start's end only say how far over it
//     went, see below); with neither, [Config.CoolOff] is the fallback. So is a refusal for a
//     request sent while a pause was in force (a pacer that had booked it
//     before the pause): the provider said it would refuse it.
//   - Retry-After and a spent quota ([Signal.Quota] with nothing left) pause the
//     provider: see [Snapshot].PausedUntil.
//
// The climb is time-based (per second of successful traffic, not per
// response), so it does not depend on how many requests are in flight, and
// idle time earns nothing. Nor does a rate the caller does not use: while
// over about the last second it sent less than half the requests the rate
// allowed (one worker at a long latency, a collector busy writing between
// bursts of fetches), the rate holds, a few times over what it sends
// rather than at the Max, and a caller that then sends faster meets the
// limit as slow start does. Nor is idle time a measure of the limit: what
// the provider delivered up to a refusal is counted from the end of the
// last quiet spell (three seconds, four intervals and three latencies or more
// with nothing sent nor answered: a process frozen by a suspend, a
// collector between its turns), as from a pause's end, the allowance
// refilled, so a caller's own silence never reads as a provider that
// admits little, nor its bursts as a provider that admits much.
// Plain AIMD climbs linearly and halves, so its rate
// saw-tooths between half the limit and the limit and averages about 75% of
// it. A user's run is often 30 seconds, so this controller climbs to the
// limit's neighbourhood in a second or two, places it within a few per
// cent at the next refusal (measured over loopback: 90% of the limit
// sustained 1-3 s into a run, 4-6 s when each refusal stops the provider
// for a whole second of Retry-After), and then spends as few refusals as
// it can, since a refusal with a Retry-After stops the whole provider for
// that long. A refusal before the first success, which asks for a pause,
// teaches it nothing (see the first bullet):
//
//   - Slow start: from 4/s, the rate doubles every [Config.SlowStart]
//     (250ms) of success, at most x1.5 per response, so 50/s is reached in
//     about a second and 200/s in 1.5s, a few milliseconds away. Far away
//     it is paced for the round trip: at most max(0.08/RTT², 5) requests/s
//     per second, so that an allowance of up to 25 that hides the limit
//     runs out with about two requests refused in flight (doubling every
//     250 ms, eight workers took a 47/s provider with an allowance of 24,
//     34 ms away, to 198/s before it ran out, and all seven requests then
//     in flight were refused: a ban from a provider that bans at five);
//     50/s takes 2 s at 60 ms, 8 s at 125 ms. The first refusal cuts to 0.6
//     of the rate its request was sent at, and sets the ceiling just under
//     that rate (x0.95), unconfirmed: the climb back to it takes
//     Recovery/16. Its echoes (k requests in flight refused after it, 429s)
//     say the rate was about k/RTT over the limit: the rate goes a
//     Decrease step under that, the ceiling where the cut set it.
//     Not a refusal before any success, within a second of the first
//     request, that asks for a pause: the provider's allowance may have
//     been spent by the process before this one or another client behind
//     the same address; it pauses as asked, and slow start goes on (read
//     as its end, it held a 20/s provider at 4/s for 15 s). And once the
//     probe has passed such an unconfirmed ceiling by a quarter with no
//     refusal, the one refusal it rested on was not the limit (a stray
//     one, another client's burst): slow start resumes from there (a
//     stray 429 at 6/s held a 100/s provider at 31% of a 30 s run).
//   - A ceiling with a margin: each overshoot sets the ceiling at 0.95 of
//     the rate the refused request was sent at (the rate in force then, not
//     the higher one reached while the answer was on its way), so the rate
//     holds under the edge where refusals begin. The climb back is a cubic
//     (as in TCP CUBIC) fitted to take [Config.Recovery], flat near the
//     ceiling; above it the same cubic probes slowly and then faster, so a
//     grown limit is found: a confirmed ceiling the probe passed by 20%
//     with no refusal is unconfirmed (the limit rose: another client behind
//     the same key stopped, a plan was upgraded), and the probe above it
//     goes at the unconfirmed pace (10/s rising to 40/s a minute into a
//     run: 90% of it 73 s after the rise, not 180 s). After a hold that
//     lifted (the refusal budget, the ban guard) and a minute with no
//     refusal, the probe goes six times faster: the hold spent the
//     plateau's time at the ceiling. (A limit that rose just as the
//     minute's refusals filled, over a ceiling of 3/s whose cycle is
//     over a minute, was at a tenth of it 150 s later; 10/s rising to
//     40/s a minute into a run got 37% of it over 2 minutes, 68% now.)
//     A probe refused within 5% over a confirmed
//     ceiling, or a refusal at the ceiling after the rate held there 10 s
//     (a ceiling over the limit is refused within moments), leaves the
//     ceiling where it is: the limit lies at or over it, and the refusal
//     is arrival jitter's tail or the provider's hiccup.
//   - The episode estimate: between two cuts the controller counts the
//     successes of requests sent since the last cut (or the end of its
//     pause). Over a long episode that is the rate the provider delivered,
//     which bounds the limit from below, where the refused rate bounds it
//     from above. A refusal at a steady rate the provider delivered all
//     through the episode, under the ceiling, is arrival jitter against a
//     provider that allows no burst: a 3% cut, the ceiling kept. So is one
//     after a steady episode of 3 s or more whose burst allowance is not
//     known yet (an allowance the pause refilled is spent sooner at a rate
//     well over the limit); if the next refusal comes within a few requests
//     of its pause (fewer than five successes), the limit fell far below
//     (it halved), and the cut is deep at once; so it is after any cut
//     that ended an episode of 3 s and 30 successes or more, and paused,
//     when the next refusal comes on the second request after the pause
//     (a 20/s limit halving to 10/s after 10 s at it took a third
//     refusal, a Decrease step first). At a steady rate that delivered far
//     less, the limit shrank or a burst allowance hid it: the rate drops
//     to what was delivered at once. Otherwise a refusal within a few
//     requests of the last cut cuts by Decrease; two in a row mean the
//     limit is far below, and halve it.
//   - The burst allowance behind a pause: a provider that pauses the
//     client (Retry-After) refills its burst allowance B meanwhile, so an
//     episode that starts at a pause's end delivers B + L·T before its
//     refusal and, alone, overstates the limit L by (B-1)/T: it looks like
//     a provider that served every request sent. So the rate holds for a
//     second after each pause (no climb), and an episode refused within
//     that hold is a measurement at one rate. Two such episodes of
//     different lengths give L and B (the two-point estimate); after the
//     first, or when two are too alike to tell them apart, the next rate
//     goes 15% under what they delivered, so the next episode is long
//     enough to. A provider whose pause refills its allowance only as far
//     as its rate over the pause (40 per second with a burst of 40) is
//     read from refusal to refusal instead: it delivers exactly its limit
//     between them, and two episodes that agree with that settle it,
//     unless an episode of the minute surely delivered more (a 15/s
//     provider that allows no burst, refused by arrival jitter a second
//     after each pause, was read as 5.9/s with a burst of 7), or slow
//     start was refused before it had been admitted the allowance such a
//     bucket would hold (from full, a bucket admits its whole allowance
//     before it refuses anything; a 17/s provider refused by arrival
//     jitter of 8 ms was held at 8/s with an allowance of 9, its slow
//     start refused on the seventh request). Once
//     B is known, every later episode after a pause is read with it. (A
//     burst of 10 at 50/s: three refusals to settle, not five to eight; 20
//     at 80/s or 40 at 40/s: three, not a refusal every 1.5 s all run
//     long; none of them triggers a ban after 5 refusals a minute.)
//   - The bucket fit: most providers limit with a token bucket (rate L,
//     allowance B, full when idle). The controller keeps the send time and
//     answer of the first 1024 requests, and after each refusal since slow
//     start, once the first request sent after it is answered (so every
//     request that was still in flight is too), asks which buckets would
//     have answered them all as the provider did. Whatever B, a bucket of
//     rate L holds B plus a deficit at each request that one pass over the
//     log finds, so each L is checked in one pass, on a grid 2% apart from
//     about a tenth of the refused rate to 10% over it. The rates that fit form a band:
//     a band under the refused rate bounds the ceiling by its top (and the
//     rate 15% under it); a band under 20% wide names the limit (ceiling in
//     its middle, confirmed; rate just under its bottom; the allowance
//     known). It only ever lowers what the cut set, and it counts requests
//     in flight, which the episode and two-point estimates cannot: at 60ms
//     of latency a burst provider settles at 88-94% within 30 s where they
//     reached 74-82%. A provider that allows no burst and refuses from
//     arrival jitter fits at any rate over the one sent at; such a band
//     names nothing. Any two refusals fit some bucket: a large allowance
//     (over a second of its rate) at a low rate, fitted from two, also
//     explains a climb that was admitted far over that rate, as a provider
//     that allows no burst at the climb's top explains it when refused by
//     as much arrival jitter as the latencies show (their 95th percentile
//     over the lowest, up to 5 ms). When both do, the fit waits for a third
//     refusal. (A 200/s provider refused at 113/s, a second after slow
//     start's 213/s, fitted 25/s with an allowance of 140 and was held
//     there: 12.7% of its limit over a minute.)
//   - A slow provider: its allowance hides its limit from the climb, which
//     meets the first refusal at many times the limit, and each pause of a
//     second then refills only a request or two of it, so every episode
//     after a pause is short. After two short episodes in a row, the
//     second with two successes or more, the rate drops to what the
//     provider admitted from the last refusal to this one (the limit, when
//     the pause was too short to fill its allowance; under it otherwise).
//     When each pause admits a single request and slow start was admitted
//     ten or more (1/s with an allowance of 10, 20 or 40), the fourth
//     refusal in a minute drops the rate, and the ceiling, to one request
//     per pause, unless an episode in the minute showed the provider
//     admitting far more (then the limit fell, and the rate halves).
//   - The refusal budget: providers that ban count violations per minute,
//     not per cent. With two overshoots in the last minute the probe above
//     the ceiling stops; each further one lowers a temporary cap under the
//     ceiling by 5%, lifted as they age out (then the climb back to a
//     confirmed ceiling takes a sixth of a Recovery: the hold spent the
//     time the climb's flat top would have spent near it). A fourth
//     within the minute (or the fourth refused request, echoes included:
//     a provider that bans at five counts every one), at the rate the last
//     cut set and with no sure measure of the limit, drops the rate and
//     the ceiling to what the provider surely admitted (n-1 requests in
//     the T seconds from a refusal to the next, less a token
//     over T: a bucket may hold most of a token at a refusal; or, when each
//     pause admitted a single request after slow start met a small
//     allowance, 15% under what the pauses refilled), so a provider that
//     bans at five is not triggered. An episode of more than 1.5 s that delivered what
//     it was sent at, and about the best such rate an episode of the minute
//     showed, was refused by arrival jitter: that best rate stands (sparse
//     jitter refusals of a provider that allows no burst, seen at 93-98% of
//     a 17/s limit over loopback seconds apart, dropped the rate to 55-60%
//     of the limit for the rest of the minute). One that delivered less
//     shows the limit fell: its own rate, and the ceiling at most half what
//     it delivered (a pause refilled an allowance it spent on top of the
//     limit); a briefer one tells nothing: its own rate, and the ceiling at
//     most half the refused rate, or at its rate after two brief ones in a
//     row. Unless the episode before it (the last that admitted four or
//     more after its pause, or lasted longer) showed a floor no limit that
//     held steady since could have given this one (n admitted after a
//     refusal, pause P and T since, bound a limit whose allowance holds a
//     pause's refill within (n-1)/(P+T) and (n+2)/(P+T)): the refusal was
//     arrival jitter, its place in the episode a matter of chance, or the
//     limit fell within the last second; half the best floor of the
//     minute then, or this one's if more (under a limit that halved). Nor
//     does the guess of what the pauses refill stand then. (Held at that
//     floor, a 200/s provider that allows no burst, refused by arrival
//     jitter over loopback four times within a minute, was held at 1/s for
//     40 s; simulated, 121 of 10,000 such providers were held under a
//     twentieth of their limit, 1 of 30,000 now, and 6 of 10,000 under a
//     fifth when two short episodes in a row admitted about as many by
//     chance.) (1/s with a burst of 5, 10, 20 or 40, 2/s with 40, 3/s with
//     3 and 8/s with 4 were banned within 20 s; they are not, at a few
//     milliseconds of latency; nor are limits with an allowance of 3 that
//     halve or fall to a tenth after holding for seconds.) A controller that sees a share of the traffic (see
//     [Controller.SetShare]) counts every refused request that asked for a
//     pause of 2 s or less (a longer one is a spent window, not the rate's),
//     echoes and the other processes' included ([State.Refusals] carries
//     them): with several, it stops probing and caps itself as above, and
//     at an overshoot of its own with three or more already counted its
//     ceiling goes 15% under the refused rate and its rate under the cap,
//     since it has no episode of its own to measure the limit with. The
//     first refusal any process drew for 10 s, at the ceiling (98% of it
//     or more, or up to 5% over a confirmed one), is arrival jitter there
//     too (processes taking turns hand over at the limit): a 3% cut, the
//     ceiling kept, and a deep one if its own next request after the
//     pause is refused too, before it takes up the shared rate again.
//   - The ban guard: from the fourth refusal within the minute that cut
//     the rate (an echo does not count; it does once a fourth refused
//     request set the hold above, which the guard then keeps the climb
//     under: leaving slow start far over a limit an allowance hid draws
//     three or four refused requests, and each overshoot after it one
//     more), until they age out, the rate
//     keeps twice the arrival jitter the latencies show under the
//     ceiling's interval, or twice the longest hold of the minute when
//     that is more (at least half the ceiling), when slow start met
//     a provider with little or no allowance (fewer than ten admitted
//     before its first refusal; an allowance absorbs the jitter). The next
//     refusal may be the fifth a provider bans at: at 8/s with 25-30 ms of
//     arrival jitter, a cut to 0.9 of the refused rate sat within the
//     jitter of the limit and drew it, and the ban, in 4-6 runs of 24;
//     at twice the 95th percentile of the last latencies, the one request
//     in a thousand that a busy machine holds 20 ms on its way drew it in
//     3 of 40 five-minute runs at 15/s (11 of 40 with longer holds). Not
//     once five requests were refused within the minute with no ban (the
//     provider does not ban at five), nor for 503s found to be noise. A
//     controller with too few latencies of its own to read the jitter from
//     (a process taking turns with others, which adopts their rate) keeps
//     15% under the ceiling instead; a rate adopted from another process
//     is held by the guard too. When no pause came between the minute's
//     first such refusal and the fourth (a provider that refuses without
//     Retry-After), the rate also stays under what the provider admitted
//     between them: n successes in T seconds from one refusal to another
//     are at most L·T + 1 for any burst allowance, so (n - 1)/T is at or
//     under the limit. Without it, each cut after a slow start that an
//     allowance hid still left the rate over the limit, and refusals came
//     one request after another: one worker 60 ms from a 4.1/s provider
//     with an allowance of 4 was banned within 3 s, every time. It stays
//     under that also when the cut went under it (left to climb back under
//     the ceiling, the same provider went from 2.5/s to 4.24/s and drew the
//     fifth in 1 run of 70). With fewer than two admitted between them,
//     the climb stays under the cut's rate, and at 1/s when these are the
//     run's first four refusals and the cut's rate is no more than slow
//     start began at: such a provider is slower than that (2/s with an
//     allowance of 3 was held at 2.6/s and drew the fifth); over that
//     rate, when one request was admitted between them (a limiter that
//     lets a trickle through, not a spent window), at half that trickle,
//     and at least 1/s (held at the cut's rate, 4.6/s, a provider of 4/s
//     with an allowance of 6 drew the fifth). Not later, nor over that
//     rate with none admitted: a fixed window that refuses every request
//     until its end shows no more, and 1/s held 24 a 2 s window at 14% of
//     it. The span
//     ends a latency before the refusal's answer (a host that queues what
//     it cannot serve sheds at once, and answers the requests queued
//     before it seconds later), and latencies spread over several
//     intervals at the ceiling are that queue's wait, not arrival jitter
//     (read so, a host's 30/s read as 7.8/s). Whichever of these holds
//     the rate, the bucket fit (below) may show more: every token bucket
//     that answered every request of the run as the provider did, slow
//     start's included, admits the bottom of its band, and the hold goes
//     just under that bottom when it lies over the hold. (Held at half
//     the refused rate, providers of 15-60/s with allowances of 16-25
//     that refuse with a bare 429, 10-60 ms away, got 49-61% of their
//     limit over a minute; now 79-97%, and as many of 3,000 random ones
//     that ban at five are banned: 41.)
//   - Noise is not pressure: a 503 is read as load shedding only from a
//     provider that has not shown it names its limit with 429, and only
//     while cuts stop them; in slow start, only once a second one comes
//     within 10 successes of the one before (a shedder at the top of the
//     climb refuses the next requests too; the first of 5% random 503s,
//     read as the climb's end, held a 17/s provider at a third of it). A
//     503 for a request sent after the cut for the previous one, with
//     three successes or more since it but fewer than 30, at no more than
//     halfway back to the rate it cut from, shows the cut failed; when
//     three of the last eight failed so, and the 503 share is under 25%,
//     they do not depend on the rate: the cuts are undone (at the next
//     success) and from then on a 503 counts as pressure only while the
//     recent 503 share rises well above the floor measured then. (A
//     shedder whose allowance hid its limit refuses all but a request or
//     two while the cuts go down to it: read as noise, a 7/s one was sent
//     10/s with a third refused, for good.) Cuts for 503s that went on
//     down to an eighth of the rate the caller sent at when the first
//     came, none of them followed by 30 successes without a 503, with 30
//     successes or more among them and the share under 25%, are noise
//     too: a shedder's 503s stop under its limit, a gateway's come at any
//     rate (a 241/s provider failing 15% of requests was cut to 1/s, the
//     trials unsettled: the next 503 came within three successes of each
//     cut, or after the climb back). Not a descent the climb interrupted:
//     a 503 sent after the climb took the rate more than halfway back to
//     where the last cut began, with three successes or more since it, is
//     the limit met again, and the descent starts over there (the limit
//     met again after slow start overshot an allowance eightfold came at
//     an eighth of the overshoot: read as noise, a 10/s shedder was sent
//     17/s with 42% refused, for good). Nothing but 503s for a quarter
//     of a second, three or more with no success, is an outage: they no
//     longer cut at each answer (the rate goes down by 30% a second, to
//     1/s) until a success, and the breaker judges them. Other 5xx never
//     move the rate, and count in what an episode delivered: the limit
//     admitted them.
//   - Confirmation: a ceiling is confirmed when the limit is met twice (an
//     echo: another request in flight refused too; or a later overshoot
//     near it). Until then the climb runs Recovery/16 and the probe
//     Recovery/12, so a ceiling resting on one stray refusal is left within
//     seconds.
//   - After a long refusal (a spent fixed window, a ban) the rate and
//     ceiling drop to what the provider actually delivered over the cycle.
//     For a window that is its rate; for a ban it is far too low (a few
//     seconds of traffic over a two-minute ban: a fraction of a request a
//     second), and nothing in one cycle tells them apart. So it is a
//     guess, unconfirmed, probed above at once, and the refusals of the
//     requests in flight when the refusal began do not confirm it (they
//     are refused whatever the rate). A window spent again confirms it; a
//     provider 30 ms away banned for two minutes is served at its limit
//     again within a minute of the ban's end. The fast climb above the
//     guess stops 15% under the rate the long refusal came at, when the
//     rate had climbed there (slow start, or a climb above an earlier
//     guess), and the ceiling is confirmed there; the probe above a
//     confirmed ceiling then takes ten times the last long pause of a
//     429, until a refusal asks for a short one or none (a
//     provider that answers every refusal at its rate with 60 s of
//     Retry-After is probed over ten minutes): climbing fast above each
//     cycle's guess, such a provider was refused at every cycle's top and
//     called 20 s in every 80 (8-10% of it; now 55-70% over ten minutes,
//     at 88-98% of its limit by the end).
//
// A [Signal.Quota] parsed from rate-limit headers paces directly. A windowed quota
// (Limit per Window) caps the rate at Limit/Window, or at Remaining/Reset
// when more is left than the average spends by the reset (a window entered
// late, a day's quota in its last hour), and sets it to Remaining/Reset on
// each success, which spends a fixed window evenly with no refusal at all; without a Window the same is done while the successes
// seen within Reset do not disprove a window of Limit. The headers are one
// source among several, and may be one endpoint's or a lie: a declared
// Limit/Window holds until another replaces it (raising or lowering it) or
// three successes in a row declare nothing, and is not exported as a
// learned ceiling; a refusal for rate while the quota set the rate starts
// discovery over from Config.Initial, after which what is left only bounds
// the climb, for the Controller's life (a provider saying 99,999 of 100,000
// left while refusing over 10/s: 3 refusals in 30 s, not one in two
// requests). It does so whatever pause the refusal asks for while a tenth
// of the quota or more was left, and with less left too, unless the
// refusal asks for a longer pause than a rate's 2 s (a Retry-After, or the
// Reset of a quota it says is spent): that is the window spent, by another
// client or by requests in flight, and it pauses until the reset (600 a
// minute announced over an unnamed 11/s, met in each window's last
// seconds: 3 refusals in 3 minutes, not 16-18 in each). A response the
// limit let through (a success, a 502 or a 404 behind it) that says the
// quota is spent pauses until Reset only when it can be a window: a token
// bucket at its rate says "0 left" after every request, with a Reset
// rounded up to a second, and is held at its rate instead. A refusal that
// says so pauses until Reset, but for the "Limit 1, 0 left, Reset 1" that
// a bucket allowing no burst says of every request, once answers came
// faster than that: it is cut as a bare refusal is. Once a spent window
// paused the provider, a refusal that says nothing is left and the reset
// under a second away is that window's last second, its Reset rounded
// down: it pauses a second and cuts nothing; met in the second after such
// a pause, every later spent window's pause lasts a second more. A
// refusal that says its quota is spent and names neither a reset nor a
// Retry-After (a rolling day's usage at its limit) pauses a second, twice
// as long at each such refusal in a row, at most an hour. The
// optional latency signal ([Config.LatencyTarget]) catches providers that
// slow down instead of refusing: smoothed latency above the target holds the
// rate and cuts it once, and again only while the queue keeps growing.
//
// [Controller.State] and [Controller.Restore] carry what was learned (rate,
// ceiling, confirmation, the pause in force) across restarts.
//
// # How each response moves the controller
//
//	Class       examples          rate                            ceiling
//	Success     2xx, 3xx          climbs: slow start, then the    -
//	                              cubic; a windowed Quota sets
//	                              it to Remaining/Reset
//	Throttled   429, 418          cut once per overshoot (see     0.95 x the rate the
//	                              the episode estimate): x0.97    overshoot began at
//	                              for jitter, to the delivered    (kept for jitter;
//	                              rate, x0.9, x0.6 leaving slow   the delivered rate
//	                              start, x0.5 while refusals      when the limit
//	                              continue; never up; not for     shrank)
//	                              an echo
//	Overloaded  503               as Throttled, unless noise      as Throttled
//	                              (holds) or an outage (x0.7 a
//	                              second, to 1/s)
//	Transient   other 5xx, 408,   holds                           -
//	            timeout, reset
//	Permanent   other 4xx         never moves                     never moves
//	Canceled    caller gave up    never moves                     never moves
//	(latency)   Success or        holds; cut once per episode,    set, as for a
//	            Transient slower  again while the queue still     refusal
//	            than the target   grows
//
// Pause, for every Class: a Retry-After pauses until now + RetryAfter
// (but on a Success, whose Retry-After is about that request: a 202 with a
// job to poll, a 303 to come back to), and a Quota with nothing left until
// now + Reset; a pause never moves back.
// The rate always stays in [Config.Min, Config.Max] (and under a declared
// Limit/Window). [Controller.Snapshot] reports rate, ceiling, pause,
// decreases and phase for metrics.
//
// # Numbers
//
// The tests include an explicit-time simulation (sim_test.go): a client
// sending back-to-back at the controller's rate, with a 30ms response
// latency, against a server model per policy, for 300 simulated seconds.
// With the default Config the controller reaches 91-97% of the true limit
// with at most 0.1% of requests refused against GCRA at 50/s (burst 1 and
// 10, 429 with or without Retry-After, 503, 100ms of latency jitter, a limit
// halving mid-run, a 5-refusals-per-minute ban at burst 1), 95% at 500/s;
// 96% against a silent slow-down (LatencyTarget 150ms); and 100% against a
// 3000/min fixed window with headers (none refused). A plain AIMD (+1/s per
// second, x0.5 per overshoot) reaches 66-77% against the same GCRA servers.
// The budget package runs the same policies end to end against
// providertest, in five-minute and in 30-second rows.
//
// Known limits: slow start paced for the round trip is slow far away
// (50/s at 125 ms takes 8 s; 100/s with an allowance of 10 at 500 ms and
// 64 workers gets 55% of a 30 s run, 83% before), the price of an
// allowance of up to 25 running out with two requests refused in flight,
// not eight. A larger allowance, or a provider whose arrivals bunch (a
// burst of 1 at 200/s, 50 ms away), can still draw five at slow start's
// end: tell forage the limit, or set DisableSlowStart with a larger
// Increase. Learning a burst allowance takes two or three refusals; each
// refused request counts with a provider that bans at five, so with a
// request or more in flight at each a ban can come before the limit is
// found. (Capping the rate once refusals and their echoes near five a
// minute was tried: it cost a quarter of the goodput of providers that do
// not ban, at 50ms. A cap that kept the next refusal's echoes under what
// the minute left, from what the provider surely admitted, saved a few
// more of eight workers at an allowance far away, but the sure measure,
// pauses included, lags the rate by seconds, and a fast provider far away
// was held at a third of its limit for the minute.) The fourth refused
// request, echoes included, holds the rate at what the provider surely
// admitted (see the refusal budget above; for a refusal that asked for a
// pause, when no rule set a hold: not under 0.75 of a confirmed ceiling,
// refuseFloor when nothing shows what it admits). Of the 97 random
// providers that ban at five in 360 of 4-60/s with allowances of 1-25 and
// 1-8 workers 1-60 ms away, 2 are banned within 30 s (10 before slow
// start was paced for the round trip; 8 workers each: 10 of 240, 48
// before); of 97 such providers of 2-12/s (in 360), a quarter refusing
// without Retry-After, 2-3 (6 before the hold at half a trickle, 16
// before that; 8 workers each: 17 of 240, 50 before): slow starts that an
// allowance of 20 hid ten times over, refused with a bare 429 request after
// request with none admitted among them, which bounds the limit from
// neither side. (All 360 banning at five: 4-5 banned, 11-12 before the
// trickle hold, which costs those that do not ban 0.9 points on average:
// held at half a trickle for the rest of the minute.) A fixed window that slow start spends, refused with
// a bare 429, refuses every request until it resets, and the cuts do not
// space them out enough: 20 a second and 200 every 10 s, banning at
// five, are banned within 2 s (a pause after refusals in a row with no
// success saved the second-long windows but cost buckets with an
// allowance refused so 10 points; tell forage the window). The ban
// guard's hold under what the provider admitted since the minute's first
// refusal costs slow providers that refuse without Retry-After and do not
// ban the rest of that minute: 2.4/s allowing no burst, 2 workers, from
// 91% to 54% over 30 s; 2 points on average over 90 random ones.) The
// rules that keep slow providers with an allowance from a ban read some
// providers that allow no burst as one: two short episodes after pauses,
// the second refused by arrival jitter at the limit after two successes,
// are what a slow provider whose pause refilled two requests answers too
// (its allowance is what slow start was admitted), and the rate drops to
// it. So do providers of 6-10/s with an allowance of 2, whose one-second
// pauses refill two requests: the answers until then fit (7.5/s, 2) and
// (1.7/s, 5) alike (the bucket fit's band is 1.7-10.7/s). That rate is a
// guess, and while the minute's refused requests leave room for one more
// before the fifth, the climb probes above it, once; a slow provider
// refuses the probe within seconds, and the rate then holds at what it
// surely admitted. The probe takes seconds, so such providers get 55-70%
// of their limit over 30 s (30-36% when the rate held at the guess for
// the minute; 9.9/s allowing no burst, two workers 16 ms away with 1.6 ms
// of arrival jitter, 37%, was 16.5%), and those whose refusals already
// number four are held at the guess. A provider that allows no burst,
// each request held up on its way by 13-15% of its interval, a millisecond
// away, can have its fourth refusal of the minute come two or three
// requests after a pause: too short an episode to tell arrival jitter
// from a limit that fell, so the rate drops to what that episode surely
// admitted, pause included, for the rest of the minute, unless the episode
// before it refutes a limit that held steady there (11/s was held at
// 1.3/s, 10.3/s at 2.1/s; 7 of 18,200 such simulated providers under 60%
// of the limit, none of 10,400 at 10-12%). Trusting the minute's best
// floor instead got providers whose limit fell under an allowance of 3 or
// 10 banned. Holding the
// refused requests to four in the minute where five would ban costs
// providers that do not ban too. From the fourth refused request, echoes
// included, with Retry-After or not, the rate holds at what the provider
// surely admitted (the fourth-overshoot rule's measure, or the bottom of
// the bucket fit's band) until they age out; when the fourth is an echo of the third, in
// flight when it was cut for, the echo takes the hold the cut left for it.
// Of 1,080 random providers drawn as the sweep draws them
// (budget/sweep_test.go, three kinds), 77 were banned within 30 s before
// that rule, 27 with it, and 10 since slow start is paced for the round
// trip (10 within 2 minutes), at a mean goodput of 85.0% over 30 s and
// 91.4% over 2 minutes (80.3% and 87.6% before the pace). With the pace, a
// provider of 50/s with an allowance of 10 and eight workers 20 ms away
// draws two refused requests leaving slow start, not four, and is no
// longer held at 20/s for the minute (86% over 5 minutes, 97.5% now).
// (Holding
// at the floor of the whole span from the first refusal, pauses included,
// cost 7 points of mean goodput and took a tenth percentile from 78% to
// 44%.)
// Providers that refuse with a bare 429 and ban at five are the hardest:
// with no pause between refusals, slow start's descent spends them one
// request after another. On a grid of 2-6/s, 10-40 ms away, allowances of
// 1-4 are no longer banned (122 of 2,268 were); allowances of 5-8 still are
// in 349 of 2,268 (790 before): the descent climbs back fast towards the
// ceiling slow start left far over the limit, and the fourth comes over
// 4/s, where a fixed window that refuses every request until its end
// looks the same. Lowering that ceiling at each refusal with no success
// since the last cut halved them and cost a 44/s window 83% -> 6% of it
// over 30 s.
// Against a fixed window with
// neither Retry-After nor headers, slow start meets no refusal until the
// window is spent: ~2-5% refused. Under 1/s, with an allowance of 2 to 12,
// a provider that bans after 5 refusals a minute may still be triggered:
// of 192 simulated providers of 0.3-3/s with allowances of 1-12, 2-10 ms
// away, 15 are in two minutes, all under 1/s (76 were, before the fourth
// refusal's margin and the pauses' refills): a token over a pause of a
// second or two is most of such a limit, so no episode measures it surely
// before the fifth refusal; tell forage the limit. Random 503s from a
// provider that never answers 429 may still end slow start early: two
// within ten successes at its start do, and the cuts and their undoing
// take seconds (a 241/s provider with 10% of them: 32% of it over 30 s in
// one simulated run of six; 60-80% in the others, and at 15%).
package aimd
