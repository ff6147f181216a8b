package forage_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/forage-go/forage"
)

// FuzzParseRetryAfter: for any value and any now, ParseRetryAfter never
// panics, returns a duration in [0, MaxRetryAfter], and 0 when not ok.
func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{
		"", " ", "0", "120", " 120 ", "007", "-1", "+5", "1.5", "1e3", "0x10",
		"259200", "259201", "18446744073709551616", "99999999999999999999999999999999",
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Sun, 06 Nov 1994 25:00:00 GMT",
		"2024-01-01T00:00:00Z", "soon", "١٢٠", "\x00", "120\r\n",
	} {
		f.Add(v, now.Unix(), int64(0))
	}
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", int64(-1<<62), int64(999_999_999))
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", int64(1<<62), int64(1))
	f.Fuzz(func(t *testing.T, value string, unix, nanos int64) {
		at := time.Unix(unix, nanos)
		d, ok := forage.ParseRetryAfter(value, at)
		if d < 0 || d > forage.MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q, %v) = %v outside [0, %v]", value, at, d, forage.MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q, %v) = %v, false; want 0 when not ok", value, at, d)
		}
	})
}

// FuzzParseQuota: for any header values, ParseQuota never panics,
// reports only non-negative finite counts, a reset in [0, MaxRetryAfter] and
// a window in [0, 1 year], zero fields it does not know, and ok exactly when
// it knows a field.
func FuzzParseQuota(f *testing.F) {
	f.Add("limit=100, remaining=50, reset=5", "100;w=60", "100", "7", "1700000000", "12")
	f.Add(`"default";r=50;t=30`, `"default";q=100;w=60`, "100, 100;w=60", "598.0", "1700000000000", "1200")
	f.Add("r=;t=-1;w=1e9", "w=99999999999", "-1", "nan", "inf", "0x10")
	f.Add("", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, structured, policy, limit, remaining, reset, weight string) {
		h := http.Header{}
		h.Set("RateLimit", structured)
		h.Set("RateLimit-Policy", policy)
		h.Set("X-RateLimit-Limit", limit)
		h.Set("X-RateLimit-Remaining", remaining)
		h.Set("X-RateLimit-Reset", reset)
		h.Set("X-MBX-USED-WEIGHT-1M", weight)
		h.Set("X-Mbx-Used-Weight-"+remaining, weight)
		checkQuota(t, h)
	})
}

// FuzzParseQuotaVendors is FuzzParseQuota for the vendors' own families:
// HubSpot's, Salesforce's Sforce-Limit-Info, Zendesk's X-Rate-Limit,
// Shopify's X-Shopify-Shop-Api-Call-Limit, and resets given as dates.
func FuzzParseQuotaVendors(f *testing.F) {
	f.Add("190", "187", "10000", "api-usage=10018/100000", "2026-12-02T12:02Z")
	f.Add("10", "", "1e400", "api-usage=5/", "Wed, 02 Dec 2026 12:02:00 GMT")
	f.Add("-1", "nan", "0.0001", "api-usage=/, api-usage=1/2", "2026-13-45T99:99Z")
	f.Add("", "", "", "per-app-api-usage=1/2(appName=x)", "9999-12-31T23:59:59.999999999Z")
	f.Fuzz(func(t *testing.T, limit, remaining, interval, sforce, reset string) {
		h := http.Header{}
		h.Set("X-HubSpot-RateLimit-Max", limit)
		h.Set("X-HubSpot-RateLimit-Remaining", remaining)
		h.Set("X-HubSpot-RateLimit-Interval-Milliseconds", interval)
		h.Set("X-HubSpot-RateLimit-Secondly", remaining)
		h.Set("Sforce-Limit-Info", sforce)
		checkQuota(t, h)
		h = http.Header{}
		h.Set("X-Rate-Limit", limit)
		h.Set("X-Rate-Limit-Remaining", remaining)
		h.Set("X-Rate-Limit-Reset", reset)
		checkQuota(t, h)
		h = http.Header{}
		h.Set("Sforce-Limit-Info", sforce)
		h.Set("RateLimit-Reset", reset)
		checkQuota(t, h)
		h = http.Header{}
		h.Set("X-Shopify-Shop-Api-Call-Limit", remaining+"/"+limit)
		checkQuota(t, h)
	})
}

func checkQuota(t *testing.T, h http.Header) {
	t.Helper()
	r, ok := forage.ParseQuota(h, rlNow)
	if ok != anyKnown(r) {
		t.Fatalf("ParseQuota(%v): ok = %v with %+v", h, ok, r)
	}
	counts := []struct {
		name string
		has  bool
		v    float64
	}{{"Limit", r.HasLimit, r.Limit}, {"Remaining", r.HasRemaining, r.Remaining}, {"Used", r.HasUsed, r.Used}}
	for _, c := range counts {
		if c.v < 0 || c.v != c.v || c.v > 1e308 || (!c.has && c.v != 0) {
			t.Fatalf("ParseQuota(%v) = %+v: bad count %v for field %s", h, r, c.v, c.name)
		}
	}
	if r.Reset < 0 || r.Reset > forage.MaxRetryAfter || (!r.HasReset && r.Reset != 0) {
		t.Fatalf("ParseQuota(%v) = %+v: bad Reset", h, r)
	}
	if r.Window < 0 || r.Window > 366*24*time.Hour || (!r.HasWindow && r.Window != 0) || (r.HasWindow && r.Window < time.Millisecond) {
		t.Fatalf("ParseQuota(%v) = %+v: bad Window", h, r)
	}
}
