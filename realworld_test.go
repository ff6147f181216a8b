package forage_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/forage-go/forage"
)

// GitHub documents its rate limits as "403 Forbidden or 429 Too Many
// Requests": primary with x-ratelimit-remaining: 0 and x-ratelimit-reset
// (epoch seconds), secondary with retry-after. A 403 that carries either is
// throttling, not a broken request.
func TestGitHub403RateLimitIsThrottled(t *testing.T) {
	now := time.Now()
	for name, h := range map[string]http.Header{
		"primary": {
			"X-Ratelimit-Limit":     {"5000"},
			"X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Used":      {"5000"},
			"X-Ratelimit-Reset":     {strconv.FormatInt(now.Add(20*time.Minute).Unix(), 10)},
			"X-Ratelimit-Resource":  {"core"},
		},
		"secondary": {"Retry-After": {"60"}, "X-Ratelimit-Remaining": {"4000"}},
	} {
		o := forage.FromHTTP(&http.Response{StatusCode: http.StatusForbidden, Header: h}, nil)
		if c := o.Class(); c != forage.Throttled {
			t.Errorf("GitHub %s rate limit as 403: class %v, want throttled (the same answer as 429 is throttled)", name, c)
		}
	}
}

// Shopify's REST Admin API: 429 with "Retry-After: 2.0".
func TestShopifyRetryAfterFloat(t *testing.T) {
	o := forage.FromHTTP(&http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"2.0"}}}, nil)
	if o.RetryAfter < 2*time.Second {
		t.Errorf("Retry-After: 2.0 read as %v; want 2s (rounded up if fractional)", o.RetryAfter)
	}
}

// Google APIs' 403 rateLimitExceeded / userRateLimitExceeded: the reason
// is in the body; a host that reads it and marks the error Throttled is
// overruled by the status.
func TestMarkedThrottlingOnA4xxIsHonoured(t *testing.T) {
	o := forage.Outcome{Status: http.StatusForbidden, Err: forage.Mark(errors.New("userRateLimitExceeded"), forage.Throttled)}
	if c := o.Class(); c != forage.Throttled {
		t.Errorf("a 403 the host marked Throttled classifies as %v; want throttled", c)
	}
}

// Azure Cosmos DB names its pause in milliseconds (x-ms-retry-after-ms),
// as others do with retry-after-ms: it was ignored, and the request sent
// again after the backoff's first step.
func TestRetryAfterInMilliseconds(t *testing.T) {
	for _, c := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"X-Ms-Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {" 250 "}}, 250 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After-Ms": {"99999999999999999999999"}}, forage.MaxRetryAfter},
		{http.Header{"Retry-After-Ms": {"-5"}}, 0},
		{http.Header{"Retry-After-Ms": {"1.5"}}, 0},
	} {
		o := forage.FromHTTP(&http.Response{StatusCode: 429, Header: c.h}, nil)
		if o.RetryAfter != c.want {
			t.Errorf("%v: RetryAfter %v, want %v", c.h, o.RetryAfter, c.want)
		}
	}
}

// Bybit's rate-limit headers: the limit, what is left (X-Bapi-Limit-Status)
// and the reset as a Unix time in milliseconds.
func TestBybitQuotaHeaders(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := http.Header{
		"X-Bapi-Limit":                 {"120"},
		"X-Bapi-Limit-Status":          {"0"},
		"X-Bapi-Limit-Reset-Timestamp": {strconv.FormatInt(now.Add(1500*time.Millisecond).UnixMilli(), 10)},
	}
	q, ok := forage.ParseQuota(h, now)
	if left, known := q.Left(); !ok || q.Limit != 120 || !known || left != 0 || q.Reset != 1500*time.Millisecond {
		t.Fatalf("Bybit headers read as %+v, %v; want limit 120, 0 left, reset 1.5s", q, ok)
	}
}

// HubSpot's rate-limit headers: the quota of its rolling interval (Max per
// Interval-Milliseconds, Remaining left), or, from older APIs, the quota
// per second. They were not read, and a quota HubSpot announces on every
// answer was found by refusals.
func TestHubSpotQuotaHeaders(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		h           http.Header
		limit, left float64
		window      time.Duration
	}{
		{"interval", http.Header{
			"X-Hubspot-Ratelimit-Max":                   {"190"},
			"X-Hubspot-Ratelimit-Remaining":             {"187"},
			"X-Hubspot-Ratelimit-Interval-Milliseconds": {"10000"},
			"X-Hubspot-Ratelimit-Daily":                 {"1000000"},
			"X-Hubspot-Ratelimit-Daily-Remaining":       {"999000"},
			"X-Hubspot-Ratelimit-Secondly":              {"19"},
			"X-Hubspot-Ratelimit-Secondly-Remaining":    {"0"},
		}, 190, 187, 10 * time.Second},
		{"secondly", http.Header{
			"X-Hubspot-Ratelimit-Secondly":           {"10"},
			"X-Hubspot-Ratelimit-Secondly-Remaining": {"9"},
			"X-Hubspot-Ratelimit-Daily":              {"250000"},
		}, 10, 9, time.Second},
	} {
		q, ok := forage.ParseQuota(c.h, now)
		left, known := q.Left()
		if !ok || q.Limit != c.limit || !known || left != c.left || q.Window != c.window || q.HasReset {
			t.Errorf("HubSpot %s headers read as %+v, %v; want limit %v, %v left, window %v, no reset", c.name, q, ok, c.limit, c.left, c.window)
		}
	}
	// Garbage is ignored, as in every family: no window, and a Remaining
	// never paired with the other quota's limit.
	q, _ := forage.ParseQuota(http.Header{
		"X-Hubspot-Ratelimit-Max":                   {"100"},
		"X-Hubspot-Ratelimit-Interval-Milliseconds": {"soon"},
		"X-Hubspot-Ratelimit-Secondly-Remaining":    {"3"},
	}, now)
	if q.Limit != 100 || q.HasRemaining || q.HasWindow {
		t.Errorf("HubSpot headers with a garbage interval and another quota's Remaining read as %+v; want limit 100 only", q)
	}
}

// Salesforce's Sforce-Limit-Info: the organisation's calls used and allowed
// over a rolling day, on every answer; over it, a 403. Unread, the 403 was
// a permanent failure, and the calls went on at the learned rate: 613
// refused in 30 s against a quota already spent.
func TestSalesforceQuotaHeader(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	q, ok := forage.ParseQuota(http.Header{"Sforce-Limit-Info": {"api-usage=10018/100000, per-app-api-usage=17/250(appName=sample)"}}, now)
	if left, known := q.Left(); !ok || q.Used != 10018 || q.Limit != 100000 || !known || left != 89982 || q.HasReset || q.HasWindow {
		t.Errorf("Sforce-Limit-Info read as %+v, %v; want 10018 used of 100000, no reset, no window", q, ok)
	}
	o := forage.FromHTTP(&http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Sforce-Limit-Info": {"api-usage=100000/100000"}}}, nil)
	if c := o.Class(); c != forage.Throttled {
		t.Errorf("a 403 with the day's calls spent: class %v, want throttled", c)
	}
	for _, v := range []string{"per-app-api-usage=17/250(appName=sample)", "api-usage=many/100000", "api-usage=5"} {
		if q, ok := forage.ParseQuota(http.Header{"Sforce-Limit-Info": {v}}, now); ok {
			t.Errorf("Sforce-Limit-Info %q read as %+v; want nothing (no org api-usage count)", v, q)
		}
	}
}

// Zendesk names its limit X-Rate-Limit, beside X-Rate-Limit-Remaining;
// Atlassian gives X-RateLimit-Reset as a date to the minute, and others as
// an HTTP date. Each was dropped.
func TestZendeskLimitAndDateResets(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
	q, _ := forage.ParseQuota(http.Header{"X-Rate-Limit": {"700"}, "X-Rate-Limit-Remaining": {"699"}}, now)
	if left, known := q.Left(); q.Limit != 700 || !known || left != 699 {
		t.Errorf("Zendesk's X-Rate-Limit read as %+v; want limit 700, 699 left", q)
	}
	for _, c := range []struct {
		reset string
		want  time.Duration
	}{
		{"2026-12-02T12:02Z", 90 * time.Second},
		{"2026-12-02T12:02:00Z", 90 * time.Second},
		{"2026-12-02T13:02:00+01:00", 90 * time.Second},
		{"Wed, 02 Dec 2026 12:02:00 GMT", 90 * time.Second},
		{"2026-12-02T11:00Z", 0}, // past: 0
		{"2026-13-02T12:02Z", -1},
		{"soon-ish, maybe", -1},
	} {
		q, _ := forage.ParseQuota(http.Header{"X-Ratelimit-Limit": {"350"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {c.reset}}, now)
		switch {
		case c.want < 0 && q.HasReset:
			t.Errorf("reset %q read as %v; want none", c.reset, q.Reset)
		case c.want >= 0 && (!q.HasReset || q.Reset != c.want):
			t.Errorf("reset %q read as %v (known %v); want %v", c.reset, q.Reset, q.HasReset, c.want)
		}
	}
}

// Shopify's REST Admin API says how full its leaky bucket is on every
// answer, X-Shopify-Shop-Api-Call-Limit: 32/40 (the calls in the bucket,
// its size); the bucket leaks whole in 20 s (40 at 2/s, 80 at 4/s). It was
// not read. Read, it allocates nothing, as every family.
func TestShopifyCallLimitHeader(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	h := http.Header{"X-Shopify-Shop-Api-Call-Limit": {"32/40"}}
	q, ok := forage.ParseQuota(h, now)
	if left, known := q.Left(); !ok || q.Used != 32 || q.Limit != 40 || q.Window != 20*time.Second || !known || left != 8 || q.HasReset {
		t.Errorf("X-Shopify-Shop-Api-Call-Limit: 32/40 read as %+v, %v; want 32 used of 40, a window of 20 s, no reset", q, ok)
	}
	if n := testing.AllocsPerRun(100, func() { forage.ParseQuota(h, now) }); n != 0 {
		t.Errorf("ParseQuota of Shopify's header allocates %v times; want 0", n)
	}
	for _, v := range []string{"32", "32/", "/40", "32/0", "many/40", "-1/40", "32/40/80"} {
		if q, ok := forage.ParseQuota(http.Header{"X-Shopify-Shop-Api-Call-Limit": {v}}, now); ok {
			t.Errorf("X-Shopify-Shop-Api-Call-Limit %q read as %+v; want nothing", v, q)
		}
	}
}
