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
