package forage

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Quota is a provider's own account of its quota, read from response
// headers by [ParseQuota]. Counts are in the provider's quota units
// (requests, or request weight for Binance), as float64 because some
// providers send "598.0". Only the fields whose Has field is true were
// present; the others are zero. Quota is a plain value, safe to copy and
// share.
type Quota struct {
	// Limit is the quota per Window.
	Limit float64
	// Remaining is the quota left in the current window.
	Remaining float64
	// Used is the quota already used in the current window (GitHub's
	// X-RateLimit-Used, Binance's X-MBX-USED-WEIGHT-*).
	Used float64
	// Reset is the time from the response until the window resets (the
	// quota refills), in [0, 72h] (see [ParseQuota]).
	Reset time.Duration
	// Window is the length of the quota window (the IETF "w" parameter, or
	// the interval in a Binance header name such as 1m).
	Window time.Duration

	// HasLimit, HasRemaining, HasUsed, HasReset and HasWindow say which of
	// the fields above the headers gave: a zero Remaining the provider
	// sent (the quota is spent) is not one it left out.
	HasLimit, HasRemaining, HasUsed, HasReset, HasWindow bool
}

// known reports whether the headers gave any field.
func (q *Quota) known() bool {
	return q.HasLimit || q.HasRemaining || q.HasUsed || q.HasReset || q.HasWindow
}

// Left returns what is left of the quota: Remaining when the headers gave
// it, else Limit − Used (at least 0) when they gave both, and false when
// they gave neither (usage without a limit says nothing to pace by).
func (q Quota) Left() (float64, bool) {
	switch {
	case q.HasRemaining:
		return q.Remaining, true
	case q.HasUsed && q.HasLimit:
		return max(q.Limit-q.Used, 0), true
	}
	return 0, false
}

// epochSeconds and epochMillis are the thresholds above which a reset
// value is an absolute Unix time rather than delta seconds: 1e9 seconds is
// 2001, and no quota window is 31 years long.
const (
	epochSeconds = 1e9
	epochMillis  = 1e12
	// minWindow and maxWindow bound a believable quota window; shorter and
	// longer values are ignored as garbage. (A window of 1e-10 s was known
	// yet 0, which reads as no window at all.)
	minWindow = time.Millisecond
	maxWindow = 366 * 24 * time.Hour
)

// parseParams reads a structured RateLimit value: key=value pairs separated
// by commas or semicolons, with the current (q, r, t, w) or older (limit,
// remaining, reset) keys. Bare items (policy names) are skipped. For a
// policy (policy true) only the quota and the window count: a policy
// states the rules, not the current state.
func (r *Quota) parseParams(v string, now time.Time, policy bool) {
	for v != "" {
		var item string
		if i := strings.IndexAny(v, ",;"); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, ""
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.Trim(strings.TrimSpace(val), `"`)
		switch {
		case strings.EqualFold(key, "q"), strings.EqualFold(key, "limit") && !policy:
			r.setCount(&r.HasLimit, &r.Limit, val)
		case strings.EqualFold(key, "w"):
			r.setWindow(val)
		case policy:
		case strings.EqualFold(key, "remaining"), strings.EqualFold(key, "r"):
			r.setCount(&r.HasRemaining, &r.Remaining, val)
		case strings.EqualFold(key, "reset"), strings.EqualFold(key, "t"):
			r.setReset(val, now)
		}
	}
}

// firstPolicy returns the name and the parameters of the first policy of a
// structured RateLimit value ("default";r=50;t=30, "day";r=900;t=3600:
// "default" and its own parameters only, so a field the first policy does
// not give is never taken from another), or "" and the whole value in the
// older draft's form ("limit=100, remaining=50, reset=5", whose commas
// separate parameters, not policies).
func firstPolicy(v string) (name, params string) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, `"`) {
		return "", v
	}
	first, _, _ := strings.Cut(v, ",")
	name, params, _ = strings.Cut(first[1:], `"`)
	return name, params
}

// bindingPolicy returns the name and the parameters of the policy of a
// structured RateLimit value that binds: of those that give both what is
// left and when it resets, the one with the least left per second until
// its reset (of spent ones, the one that resets last), else the first. A
// provider lists its policies in any order ("minute";r=50;t=30,
// "day";r=2;t=3600): paced by the first, the day's two were spent in a
// moment and the rest of the hour was refusals. In the older draft's form
// (see firstPolicy) it returns "" and the whole value.
func bindingPolicy(v string, now time.Time) (name, params string) {
	name, params = firstPolicy(v)
	if name == "" && !strings.HasPrefix(strings.TrimSpace(v), `"`) {
		return name, params
	}
	best, bestName, bestParams := -1.0, name, params
	var bestReset time.Duration
	for v != "" {
		var member string
		member, v, _ = strings.Cut(v, ",")
		own, rest := firstPolicy(member)
		if own == "" {
			continue
		}
		var q Quota
		q.parseParams(rest, now, false)
		if !q.HasRemaining || !q.HasReset {
			continue
		}
		rate := q.Remaining / max(q.Reset.Seconds(), 1e-3)
		if best < 0 || rate < best || rate == best && q.Reset > bestReset {
			best, bestReset, bestName, bestParams = rate, q.Reset, own, rest
		}
	}
	return bestName, bestParams
}

// parsePolicy reads the policy of a RateLimit-Policy value that the state
// (see firstPolicy) named, or its first policy when the state named none:
// an optional bare quota ("100;w=60", the older draft) and its parameters.
// A policy of another name is not the state's: it gives nothing. (The
// "burst" policy's window was paired with the "day" policy's state.)
func (r *Quota) parsePolicy(v, name string) {
	for i := 0; v != ""; i++ {
		var member string
		member, v, _ = strings.Cut(v, ",")
		member = strings.TrimSpace(member)
		if name == "" && i > 0 {
			return
		}
		own, rest := firstPolicy(member)
		if name != "" && own != name {
			continue
		}
		if own != "" {
			member = strings.TrimPrefix(rest, ";")
			r.parseParams(member, time.Time{}, true)
			return
		}
		quota, params, _ := strings.Cut(member, ";")
		r.setCount(&r.HasLimit, &r.Limit, strings.TrimSpace(quota))
		r.parseParams(params, time.Time{}, true)
		return
	}
}

// parseSeparate reads one family of separate headers, such as
// X-RateLimit-Limit. A limit may list policies after it (the IETF draft's
// "100, 100;w=60, 1000;w=3600"): the first number is the limit, and the
// window is that of the first policy with the same quota.
func (r *Quota) parseSeparate(h http.Header, keys *separateKeys, now time.Time) {
	v := extremeLine(h.Values(keys.limit), false)
	if v == "" && keys.limitAlt != "" {
		v = extremeLine(h.Values(keys.limitAlt), false)
	}
	if v != "" {
		limit := firstNumber(v)
		r.setCount(&r.HasLimit, &r.Limit, limit)
		for v != "" && !r.HasWindow {
			var member string
			member, v, _ = strings.Cut(v, ",")
			quota, params, _ := strings.Cut(member, ";")
			if strings.TrimSpace(quota) == limit {
				r.parseParams(params, time.Time{}, true)
			}
		}
	}
	// A header a gateway and the origin both set comes as two lines, which
	// may disagree: the more cautious is read (the least left, the most
	// used, the latest reset), as the longest Retry-After is. The first
	// line alone missed a quota the other said was spent.
	remaining := h.Values(keys.remaining)
	least := extremeIndex(remaining, false)
	if least >= 0 {
		r.setCount(&r.HasRemaining, &r.Remaining, firstNumber(remaining[least]))
	}
	r.setCount(&r.HasUsed, &r.Used, firstNumber(extremeLine(h.Values(keys.used), true)))
	// Reset-After (always delta seconds) before Reset: a delta does not
	// depend on the two clocks agreeing.
	// When each line of the reset pairs with one of Remaining (as many of
	// each), the reset read is that of the line with the least left: the
	// quota spent is back at its own reset, not at the latest of them all
	// (a gateway's second read with the origin's hour).
	// (A paired line that gives no reset leaves it to all the lines.)
	resetAfter := h.Values(keys.resetAfter)
	if paired(remaining, resetAfter, least) && !r.HasReset {
		if secs, ok := parseNumber(firstNumber(resetAfter[least])); ok {
			r.Reset, r.HasReset = secondsDuration(secs, maxRetryAfter), true
		}
	}
	if secs, ok := parseNumber(firstNumber(extremeLine(resetAfter, true))); ok && !r.HasReset {
		r.Reset, r.HasReset = secondsDuration(secs, maxRetryAfter), true
	}
	if r.HasReset {
		return
	}
	resets := h.Values(keys.reset)
	if paired(remaining, resets, least) {
		if r.setReset(resets[least], now); r.HasReset {
			return
		}
	}
	for _, line := range resets {
		var q Quota
		if q.setReset(line, now); q.HasReset && (!r.HasReset || q.Reset > r.Reset) {
			r.Reset, r.HasReset = q.Reset, true
		}
	}
}

// extremeLine returns the line of lines whose first number is the largest
// (or the smallest), the first line if none has a number, "" if there is
// none.
func extremeLine(lines []string, largest bool) string {
	if i := extremeIndex(lines, largest); i >= 0 {
		return lines[i]
	}
	return ""
}

// extremeIndex returns the index of the line extremeLine returns, -1 if
// there is none.
func extremeIndex(lines []string, largest bool) int {
	if len(lines) <= 1 {
		return len(lines) - 1
	}
	best, bestN, found := 0, 0.0, false
	for i, l := range lines {
		n, ok := parseNumber(firstNumber(l))
		if ok && (!found || largest && n > bestN || !largest && n < bestN) {
			best, bestN, found = i, n, true
		}
	}
	return best
}

// paired reports whether the resets pair line for line with the
// remaining lines, several of each, the least left at index least.
func paired(remaining, resets []string, least int) bool {
	return len(remaining) > 1 && len(resets) == len(remaining) && least >= 0
}

// separateKeys names one family of separate rate-limit headers, in
// canonical form so that looking them up allocates nothing.
type separateKeys struct{ limit, limitAlt, remaining, used, reset, resetAfter string }

// separateFamilies are the families of separate headers, by precedence.
var separateFamilies = [...]separateKeys{
	{"Ratelimit-Limit", "", "Ratelimit-Remaining", "Ratelimit-Used", "Ratelimit-Reset", "Ratelimit-Reset-After"},
	{"X-Ratelimit-Limit", "", "X-Ratelimit-Remaining", "X-Ratelimit-Used", "X-Ratelimit-Reset", "X-Ratelimit-Reset-After"},
	// Twitter's spelling; Zendesk's limit is X-Rate-Limit itself.
	{"X-Rate-Limit-Limit", "X-Rate-Limit", "X-Rate-Limit-Remaining", "X-Rate-Limit-Used", "X-Rate-Limit-Reset", "X-Rate-Limit-Reset-After"},
	// Bybit: the limit, what is left, and the reset as a Unix time in ms.
	{"X-Bapi-Limit", "", "X-Bapi-Limit-Status", "", "X-Bapi-Limit-Reset-Timestamp", ""},
}

// parseHubSpot reads HubSpot's headers: the quota of its rolling interval
// (X-HubSpot-RateLimit-Max per -Interval-Milliseconds, -Remaining left),
// or, without it, the quota per second (-Secondly, -Secondly-Remaining).
// Each is read whole or not at all: a Remaining is never paired with the
// other quota's limit.
func (r *Quota) parseHubSpot(h http.Header) {
	if limit := h.Get("X-Hubspot-Ratelimit-Max"); limit != "" {
		r.setCount(&r.HasLimit, &r.Limit, firstNumber(limit))
		r.setCount(&r.HasRemaining, &r.Remaining, firstNumber(h.Get("X-Hubspot-Ratelimit-Remaining")))
		if ms, ok := parseNumber(firstNumber(h.Get("X-Hubspot-Ratelimit-Interval-Milliseconds"))); ok {
			r.setWindowSeconds(ms / 1000)
		}
		return
	}
	if sec := h.Get("X-Hubspot-Ratelimit-Secondly"); sec != "" {
		r.setCount(&r.HasLimit, &r.Limit, firstNumber(sec))
		r.setCount(&r.HasRemaining, &r.Remaining, firstNumber(h.Get("X-Hubspot-Ratelimit-Secondly-Remaining")))
		if r.HasLimit {
			r.Window, r.HasWindow = time.Second, true
		}
	}
}

// parseSalesforce reads Salesforce's Sforce-Limit-Info, whose api-usage
// item is the organisation's calls used and allowed over a rolling day
// ("api-usage=25/5000"; items such as per-app-api-usage are not the
// org's quota). It gives no reset and no window: the day rolls.
func (r *Quota) parseSalesforce(h http.Header) {
	v := h.Get("Sforce-Limit-Info")
	for v != "" {
		var item string
		item, v, _ = strings.Cut(v, ",")
		key, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(key), "api-usage") {
			continue
		}
		used, limit, ok := strings.Cut(strings.TrimSpace(val), "/")
		if !ok {
			return
		}
		u, okU := parseNumber(strings.TrimSpace(used))
		l, okL := parseNumber(strings.TrimSpace(limit))
		if okU && okL {
			r.Used, r.HasUsed, r.Limit, r.HasLimit = u, true, l, true
		}
		return
	}
}

// shopifyLeak is the time a Shopify REST Admin API bucket takes to leak
// whole: its size over its leak rate, 40 at 2/s, 80 at 4/s.
const shopifyLeak = 20 * time.Second

// parseShopify reads Shopify's X-Shopify-Shop-Api-Call-Limit, "32/40": the
// calls in the app's leaky bucket for the shop, and its size. The bucket
// leaks its size every shopifyLeak, so Limit per Window is its leak rate,
// the rate that never fills it. (Unread, a leaky bucket of 40 at 2/s was
// found by 429s: 12 in 5 minutes.)
func (r *Quota) parseShopify(h http.Header) {
	used, limit, ok := strings.Cut(h.Get("X-Shopify-Shop-Api-Call-Limit"), "/")
	if !ok {
		return
	}
	u, okU := parseNumber(strings.TrimSpace(used))
	l, okL := parseNumber(strings.TrimSpace(limit))
	if okU && okL && l > 0 {
		r.Used, r.HasUsed, r.Limit, r.HasLimit = u, true, l, true
		r.Window, r.HasWindow = shopifyLeak, true
	}
}

// binancePrefix is the canonical form of Binance's used-weight headers.
const binancePrefix = "X-Mbx-Used-Weight"

// parseBinance reads X-MBX-USED-WEIGHT-<n><unit> headers, keeping the
// shortest interval (and the larger count for equal intervals), so the
// result does not depend on map order.
func (r *Quota) parseBinance(h http.Header) {
	if r.HasUsed {
		return
	}
	var used float64
	window := time.Duration(-1) // none found yet; 0 means the bare header
	for key, vals := range h {
		if len(key) < len(binancePrefix) || !strings.EqualFold(key[:len(binancePrefix)], binancePrefix) || len(vals) == 0 {
			continue
		}
		w, ok := binanceWindow(key[len(binancePrefix):])
		n, okN := parseNumber(strings.TrimSpace(vals[0]))
		if !ok || !okN {
			continue
		}
		better := window < 0 || // the first one
			(w > 0 && (window == 0 || w < window)) || // a known, shorter interval
			(w == window && n > used)
		if better {
			used, window = n, w
		}
	}
	if window < 0 {
		return
	}
	r.Used, r.HasUsed = used, true
	if window > 0 && !r.HasWindow {
		r.Window, r.HasWindow = window, true
	}
}

// binanceWindow parses the suffix of a used-weight header name: "" for the
// bare header (window 0), or "-<n><unit>" such as "-1m".
func binanceWindow(s string) (time.Duration, bool) {
	if s == "" {
		return 0, true
	}
	if len(s) < 3 || s[0] != '-' || len(s) > 9 {
		return 0, false
	}
	n, ok := parseDigits(s[1 : len(s)-1])
	if !ok || n == 0 {
		return 0, false
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 's', 'S':
		unit = time.Second
	case 'm', 'M':
		unit = time.Minute
	case 'h', 'H':
		unit = time.Hour
	case 'd', 'D':
		unit = 24 * time.Hour
	default:
		return 0, false
	}
	if n > uint64(maxWindow/unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// setCount sets a count field from a number, unless it is already known or
// val is not a non-negative decimal number.
func (r *Quota) setCount(has *bool, dst *float64, val string) {
	if *has {
		return
	}
	if n, ok := parseNumber(val); ok {
		*dst, *has = n, true
	}
}

// setReset sets Reset from delta seconds or a Unix time (the first member
// of a list value), or a date (see ParseQuota), unless it is already known
// or val is none of those.
func (r *Quota) setReset(val string, now time.Time) {
	if r.HasReset {
		return
	}
	secs, ok := parseNumber(firstNumber(val))
	if !ok {
		t, isDate := parseResetDate(strings.TrimSpace(val))
		if !isDate {
			return
		}
		r.Reset, r.HasReset = untilCapped(t, now), true
		return
	}
	// A Unix time within a year of now is one whatever the thresholds: a
	// clock set before 2001 (a test's synthetic clock starts in 2000) read
	// its provider's epoch Reset as 30 years of delta seconds.
	unix := float64(now.Unix()) + float64(now.Nanosecond())/1e9
	near := func(x float64) bool { return x > maxWindow.Seconds() && math.Abs(x-unix) <= maxWindow.Seconds() }
	switch {
	case secs > epochMillis || near(secs/1000):
		secs = secs/1000 - unix
	case secs > epochSeconds || near(secs):
		secs -= unix
	}
	r.Reset, r.HasReset = secondsDuration(secs, maxRetryAfter), true
}

// setWindow sets Window from seconds, unless it is already known, val is
// not a number, or the window is longer than a year.
func (r *Quota) setWindow(val string) {
	if r.HasWindow {
		return
	}
	if secs, ok := parseNumber(val); ok {
		r.setWindowSeconds(secs)
	}
}

// resetDateLayouts are the dates a Reset may be given as, besides HTTP's
// own (see parseResetDate): RFC 3339, and Jira's to the minute.
var resetDateLayouts = [...]string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"}

// parseResetDate parses a Reset given as a date rather than a number:
// RFC 3339 (Atlassian's "2024-01-01T12:34Z", to the minute, too) or an
// HTTP date (RFC 1123). Only a value that starts with a digit or a letter
// and holds a date separator is tried, so a garbage number costs nothing.
func parseResetDate(val string) (time.Time, bool) {
	if len(val) < len("2006-01-02T15:04Z") || !strings.ContainsAny(val, "-,") {
		return time.Time{}, false
	}
	for _, layout := range resetDateLayouts {
		if t, err := time.Parse(layout, val); err == nil {
			return t, true
		}
	}
	if t, err := http.ParseTime(val); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// setWindowSeconds sets Window to secs, unless it is already known or secs
// is not a believable window (see minWindow).
func (r *Quota) setWindowSeconds(secs float64) {
	if r.HasWindow || secs < minWindow.Seconds() || secs > maxWindow.Seconds() {
		return
	}
	r.Window, r.HasWindow = secondsDuration(secs, maxWindow), true
}

// firstNumber returns the first member of a list value ("100, 100;w=60" →
// "100"), trimmed.
func firstNumber(v string) string {
	if i := strings.IndexAny(v, ",;"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// parseNumber parses a non-negative decimal number: digits with at most one
// dot and at least one digit. Signs, exponents, hex, "inf" and "nan" are
// rejected, which strconv.ParseFloat alone would accept.
func parseNumber(s string) (float64, bool) {
	if s == "" || len(s) > 64 {
		return 0, false
	}
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return 0, false
		}
	}
	if digits == 0 || dots > 1 {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !isFinite(f) {
		return 0, false
	}
	return f, true
}

// secondsDuration converts seconds to a duration clamped into [0, limit].
func secondsDuration(secs float64, limit time.Duration) time.Duration {
	if !(secs > 0) {
		return 0
	}
	if secs >= limit.Seconds() {
		return limit
	}
	return min(time.Duration(math.Round(secs*float64(time.Second))), limit)
}

// isFinite reports whether f is neither NaN nor infinite.
func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
