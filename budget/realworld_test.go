package budget_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// scriptedAPI is a fake third-party API: answer gives each request's status
// and headers from the time it arrives; every send is recorded.
type scriptedAPI struct {
	mu     sync.Mutex
	sends  []time.Time
	answer func(req *http.Request, now time.Time) (int, http.Header)
}

func (p *scriptedAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	p.mu.Lock()
	p.sends = append(p.sends, now)
	p.mu.Unlock()
	code, h := p.answer(req, now)
	if h == nil {
		h = http.Header{}
	}
	h.Set("Date", now.UTC().Format(http.TimeFormat))
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

func (p *scriptedAPI) count() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.sends) }

// scriptedClient is a host with default settings but cfg: a Transport over a Registry.
func scriptedClient(t *testing.T, base http.RoundTripper, cfg budget.Config) *http.Client {
	t.Helper()
	reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: budget.NewTransport(reg, base)}
}

func scriptedGet(t *testing.T, c *http.Client, url string) (int, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// githubPrimary answers as api.github.com with its primary quota spent
// until reset (status 403 or 429, x-ratelimit-remaining 0, reset in epoch
// seconds), and 200 from the reset on.
func githubPrimary(status int, reset time.Time) func(*http.Request, time.Time) (int, http.Header) {
	return func(_ *http.Request, now time.Time) (int, http.Header) {
		h := http.Header{}
		h.Set("X-Ratelimit-Limit", "5000")
		h.Set("X-Ratelimit-Resource", "core")
		h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		if now.Before(reset) {
			h.Set("X-Ratelimit-Remaining", "0")
			h.Set("X-Ratelimit-Used", "5000")
			return status, h
		}
		h.Set("X-Ratelimit-Remaining", "4999")
		h.Set("X-Ratelimit-Used", "1")
		h.Set("X-Ratelimit-Reset", strconv.FormatInt(now.Add(time.Hour).Unix(), 10))
		return http.StatusOK, h
	}
}

// 1. GitHub primary limit: 429 waits out the 20 s reset and gets 200; the
// same answer as 403 ends the call at once with the 403.
func TestGitHubPrimaryLimit403IsThrottling(t *testing.T) {
	for _, status := range []int{429, 403} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				reset := t0.Add(20 * time.Second).Truncate(time.Second).Add(time.Second)
				gh := &scriptedAPI{answer: githubPrimary(status, reset)}
				c := scriptedClient(t, gh, budget.Config{})
				code, err := scriptedGet(t, c, "https://api.github.com/repos/o/r/issues")
				if err != nil {
					t.Fatal(err)
				}
				if code != http.StatusOK {
					t.Errorf("GitHub primary limit as %d (remaining 0, reset in 20s): host got %d after %d send(s); want the reset waited out and 200, as for 429", status, code, gh.count())
				}
			})
		})
	}
}

// 1b. Through Provider.Do the same 403 stops as ReasonPermanent with no
// Until, though the controller paused the provider until the reset.
func TestGitHubPrimary403StopsAsSourcePressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reset := time.Now().Add(30 * time.Minute)
		gh := &scriptedAPI{answer: githubPrimary(http.StatusForbidden, reset)}
		reg, _ := budget.NewRegistry(budget.RegistryConfig{})
		p, _ := reg.Get("api.github.com")
		err := p.Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.github.com/user", nil)
			resp, err := gh.RoundTrip(req)
			if err == nil {
				defer resp.Body.Close()
			}
			return forage.FromHTTP(resp, err)
		})
		var e *budget.Error
		if !errors.As(err, &e) {
			t.Fatalf("err = %v", err)
		}
		if !e.Reason.SourcePressure() || e.Until.Before(reset.Add(-time.Second)) {
			t.Errorf("GitHub primary limit as 403: stop %q, Until %v; want source pressure until the reset %v", e.Reason, e.Until, reset)
		}
	})
}

// 2. GitHub secondary limit: 403 with retry-after: 30.
func TestGitHubSecondaryLimit403RetryAfterIsThrottling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		gh := &scriptedAPI{answer: func(_ *http.Request, now time.Time) (int, http.Header) {
			if now.Sub(t0) < 30*time.Second {
				return http.StatusForbidden, http.Header{"Retry-After": {"30"}, "X-Ratelimit-Remaining": {"4000"}, "X-Ratelimit-Limit": {"5000"}}
			}
			return http.StatusOK, nil
		}}
		c := scriptedClient(t, gh, budget.Config{})
		code, err := scriptedGet(t, c, "https://api.github.com/search/code?q=x")
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusOK {
			t.Errorf("403 with Retry-After: 30: host got %d after %d send(s); want 30s waited and 200", code, gh.count())
		}
	})
}

// 3. Shopify REST Admin: 429 with "Retry-After: 2.0".
func TestShopifyFractionalRetryAfterIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		shop := &scriptedAPI{answer: func(_ *http.Request, now time.Time) (int, http.Header) {
			if now.Sub(t0) < 2*time.Second {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"2.0"}, "X-Shopify-Shop-Api-Call-Limit": {"40/40"}}
			}
			return http.StatusOK, http.Header{"X-Shopify-Shop-Api-Call-Limit": {"39/40"}}
		}}
		c := scriptedClient(t, shop, budget.Config{})
		if _, err := scriptedGet(t, c, "https://shop.myshopify.com/admin/api/2024-01/products.json"); err != nil {
			t.Fatal(err)
		}
		shop.mu.Lock()
		defer shop.mu.Unlock()
		if len(shop.sends) > 1 && shop.sends[1].Sub(shop.sends[0]) < 2*time.Second {
			t.Errorf("429 with Retry-After: 2.0: sent again %v later (%d sends, %d refused); want no send before 2s",
				shop.sends[1].Sub(shop.sends[0]), len(shop.sends), len(shop.sends)-1)
		}
	})
}

// 4. Bybit ("403, access too frequent": an IP ban of 10+ minutes) and
// Binance (403: its firewall's limit). Told so with Config.Ban, the host's
// provider sends one request and waits the ban out (BanPause, doubling);
// a ban is never retried. Before, only a 418 was a ban, and a 403 read as
// throttling (Config.Classify, the one hook there was) was sent 5 requests
// in 6 s.
func TestABanTheHostNamesIsABan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		bybit := &scriptedAPI{answer: func(_ *http.Request, now time.Time) (int, http.Header) {
			if now.Sub(t0) < 10*time.Minute {
				return http.StatusForbidden, nil
			}
			return http.StatusOK, nil
		}}
		cfg := budget.Config{Ban: func(o forage.Outcome) bool { return o.Status == http.StatusForbidden }}
		c := scriptedClient(t, bybit, cfg)
		_, err := scriptedGet(t, c, "https://api.bybit.com/v5/market/kline?symbol=BTCUSDT")
		if err != nil {
			t.Fatal(err) // the Transport returns the 403 itself: the call stopped at it
		}
		scriptedGet(t, c, "https://api.bybit.com/v5/market/kline?symbol=ETHUSDT")
		bybit.mu.Lock()
		if len(bybit.sends) > 1 && bybit.sends[1].Sub(bybit.sends[0]) < time.Minute {
			t.Errorf("an IP ban (403) was sent again %v after it; want a ban pause (BanPause, 1 minute) first", bybit.sends[1].Sub(bybit.sends[0]))
		}
		bybit.mu.Unlock()
		reg, _ := budget.NewRegistry(budget.RegistryConfig{Defaults: cfg})
		p, _ := reg.Get("api.bybit.com")
		err = p.Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.bybit.com/v5/market/time", nil)
			resp, err := bybit.RoundTrip(req)
			if err == nil {
				defer resp.Body.Close()
			}
			return forage.FromHTTP(resp, err)
		})
		var e *budget.Error
		if !errors.As(err, &e) || e.Reason != forage.ReasonBanned || time.Until(e.Until) < 30*time.Second {
			t.Errorf("Do against the ban: %v; want banned, with a pause", err)
		}
	})
}

// 5. One resource's spent quota (GitHub search, 30/min) paused every
// request to the host, core calls with 4000 left included (so do a Slack
// method's Retry-After and a Discord route bucket's reset): a host keys
// such a provider by resource (Transport.Key), each with its own budget.
func TestOneResourcesSpentQuotaDoesNotPauseTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		gh := &scriptedAPI{answer: func(req *http.Request, now time.Time) (int, http.Header) {
			h := http.Header{}
			if strings.HasPrefix(req.URL.Path, "/search/") {
				h.Set("X-Ratelimit-Resource", "search")
				h.Set("X-Ratelimit-Limit", "30")
				h.Set("X-Ratelimit-Remaining", "0")
				h.Set("X-Ratelimit-Reset", strconv.FormatInt(t0.Add(45*time.Second).Unix(), 10))
				return http.StatusOK, h
			}
			h.Set("X-Ratelimit-Resource", "core")
			h.Set("X-Ratelimit-Limit", "5000")
			h.Set("X-Ratelimit-Remaining", "4000")
			h.Set("X-Ratelimit-Reset", strconv.FormatInt(t0.Add(50*time.Minute).Unix(), 10))
			return http.StatusOK, h
		}}
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		tr := budget.NewTransport(reg, gh)
		tr.Key = func(req *http.Request) string {
			if strings.HasPrefix(req.URL.Path, "/search/") {
				return budget.HostKey(req) + "-search"
			}
			return budget.HostKey(req)
		}
		c := &http.Client{Transport: tr}
		if _, err := scriptedGet(t, c, "https://api.github.com/search/issues?q=x"); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		scriptedGet(t, c, "https://api.github.com/repos/o/r/issues")
		if w := time.Since(t1); w > 5*time.Second {
			t.Errorf("a core call (4000 left) waited %v for the search quota's reset", w)
		}
	})
}

// An AWS API answers its throttling with 400 and x-amzn-ErrorType:
// ThrottlingException. Through the Transport, a host's Classify reads the
// header from the Outcome (it saw only the status, the Retry-After and the
// quota before: the 400 stopped every call as permanent).
func TestAClassifierReadsTheProvidersOwnHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		aws := &scriptedAPI{answer: func(_ *http.Request, now time.Time) (int, http.Header) {
			if now.Sub(t0) < 2*time.Second {
				return http.StatusBadRequest, http.Header{"X-Amzn-Errortype": {"ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"}}
			}
			return http.StatusOK, nil
		}}
		c := scriptedClient(t, aws, budget.Config{Classify: func(o forage.Outcome) forage.Class {
			if strings.HasPrefix(o.Header.Get("X-Amzn-ErrorType"), "ThrottlingException") {
				return forage.Throttled
			}
			return o.Class()
		}})
		code, err := scriptedGet(t, c, "https://monitoring.us-east-1.amazonaws.com/?Action=ListMetrics")
		if err != nil || code != http.StatusOK {
			t.Fatalf("got %d, %v after %d sends; want the throttling waited out and 200", code, err, aws.count())
		}
	})
}
