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

// zooAPI is a fake third-party API that answers with a body too: answer
// gives each request's status, headers and body from the time it arrives,
// 30 ms before its answer; every send is recorded, with its status.
type zooAPI struct {
	mu     sync.Mutex
	sends  []time.Time
	codes  []int
	answer func(now time.Time) (int, http.Header, string)
}

func (p *zooAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	code, h, body := p.answer(now)
	p.mu.Lock()
	p.sends, p.codes = append(p.sends, now), append(p.codes, code)
	p.mu.Unlock()
	time.Sleep(30 * time.Millisecond) // the round trip
	if h == nil {
		h = http.Header{}
	}
	h.Set("Date", now.UTC().Format(http.TimeFormat))
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

// count returns the sends in [from, to) and, of them, those answered code.
func (p *zooAPI) count(from, to time.Time, code int) (sends, coded int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, s := range p.sends {
		if !s.Before(from) && s.Before(to) {
			sends++
			if p.codes[i] == code {
				coded++
			}
		}
	}
	return sends, coded
}

// zooLoop is a host that sends GETs to url through c, one after another
// on each of workers, for d, each bounded by d's end, reading every body.
// A request the budget refused is asked again 100 ms later. It returns
// how many answers and refusals of each class forage.FromHTTP read.
func zooLoop(c *http.Client, url string, d time.Duration, workers int) map[forage.Class]int {
	seen := map[forage.Class]int{}
	var mu sync.Mutex
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				ctx, cancel := context.WithDeadline(context.Background(), end)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := c.Do(req)
				out := forage.FromHTTP(resp, err)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
				mu.Lock()
				seen[out.Class()]++
				mu.Unlock()
				if err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return seen
}

// GitHub's secondary rate limit is often a 403 whose body says so, with
// no retry-after, and x-ratelimit-* headers with plenty left (they are the
// primary limit's); GitHub asks for a minute at least before the next
// request. Through a bare Transport the 403 was a permanent failure:
// nothing paused, and the host's loop sent 240 requests into the minute
// (4/s, the rate it had). The Transport reads the first KiB of a 403 that
// names no limit in its headers.
func TestGitHubSecondaryLimitInTheBodyPausesAMinute(t *testing.T) {
	t.Parallel()
	for _, headers := range []bool{true, false} {
		t.Run("headers="+strconv.FormatBool(headers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				gh := &zooAPI{answer: func(now time.Time) (int, http.Header, string) {
					h := http.Header{}
					if headers {
						h.Set("X-Ratelimit-Limit", "5000")
						h.Set("X-Ratelimit-Remaining", "4000")
						h.Set("X-Ratelimit-Reset", strconv.FormatInt(t0.Add(time.Hour).Unix(), 10))
					}
					if now.Sub(t0) < time.Minute {
						return http.StatusForbidden, h, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}`
					}
					return http.StatusOK, h, "[]"
				}}
				reg, err := budget.NewRegistry(budget.RegistryConfig{})
				if err != nil {
					t.Fatal(err)
				}
				c := &http.Client{Transport: budget.NewTransport(reg, gh)}
				seen := zooLoop(c, "https://api.github.com/repos/o/r/issues", 90*time.Second, 2)
				sends, refused := gh.count(t0, t0.Add(time.Minute), http.StatusForbidden)
				if sends > 2 || seen[forage.Success] == 0 || seen[forage.Permanent] != 0 {
					t.Errorf("a secondary limit in a 403's body: %d sends in the minute GitHub asked for (%d refused); the host read %v; want at most 2 sends, then successes, no permanent failure",
						sends, refused, seen)
				}
			})
		})
	}
}

// A permission refused (a 403 whose body names no rate limit) is still a
// permanent failure, and the caller reads the whole body the Transport
// looked into.
func TestA403ThatNamesNoRateLimitStaysPermanent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		body := `{"message":"Resource not accessible by integration"}` + strings.Repeat(" ", 3000) + "end"
		gh := &zooAPI{answer: func(time.Time) (int, http.Header, string) { return http.StatusForbidden, nil, body }}
		reg, _ := budget.NewRegistry(budget.RegistryConfig{})
		c := &http.Client{Transport: budget.NewTransport(reg, gh)}
		resp, err := c.Get("https://api.github.com/repos/o/r/hooks")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != body {
			t.Errorf("the 403's body read back as %d bytes (%v); want the %d sent", len(got), err, len(body))
		}
		if n, _ := gh.count(time.Time{}, time.Now().Add(time.Hour), http.StatusForbidden); n != 1 {
			t.Errorf("a permission refused was sent %d times; want 1", n)
		}
	})
}

// Shopify's REST Admin API is a leaky bucket (40, leaking 2/s) that says
// how full it is on every answer, X-Shopify-Shop-Api-Call-Limit: 32/40,
// and refuses with 429 and Retry-After: 2.0 when full. The header was not
// read, and the bucket was found by refusals: 12 in 5 minutes.
func TestShopifyCallLimitPacesItsBucket(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var mu sync.Mutex
		level, last := 0.0, t0
		shop := &zooAPI{answer: func(now time.Time) (int, http.Header, string) {
			mu.Lock()
			defer mu.Unlock()
			level, last = max(0, level-now.Sub(last).Seconds()*2), now
			if level+1 > 40 {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"2.0"}, "X-Shopify-Shop-Api-Call-Limit": {"40/40"}},
					`{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}`
			}
			level++
			return http.StatusOK, http.Header{"X-Shopify-Shop-Api-Call-Limit": {strconv.Itoa(int(level)) + "/40"}}, "{}"
		}}
		reg, _ := budget.NewRegistry(budget.RegistryConfig{})
		c := &http.Client{Transport: budget.NewTransport(reg, shop)}
		zooLoop(c, "https://shop.myshopify.com/admin/api/2024-01/products.json", 5*time.Minute, 4)
		sends, refused := shop.count(t0, time.Now(), http.StatusTooManyRequests)
		if refused > 0 || sends < 580 {
			t.Errorf("Shopify's bucket of 40 at 2/s over 5 minutes: %d sends, %d refused; want none refused, and 580 sends or more (2/s)", sends, refused)
		}
	})
}

// A request the budget refused to send (the provider paused by its
// Retry-After past the request's deadline) is a refusal for the host that
// reads the Transport's answer with forage.FromHTTP, outside any
// Provider.Do: it was read as a permanent failure (an error of unknown
// kind), and a host that drops such URLs dropped 95 in 2 minutes.
func TestABudgetRefusalReadsAsARefusal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		api := &zooAPI{answer: func(time.Time) (int, http.Header, string) {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"120"}}, ""
		}}
		reg, _ := budget.NewRegistry(budget.RegistryConfig{})
		c := &http.Client{Transport: budget.NewTransport(reg, api)}
		if resp, err := c.Get("https://api.example.com/a"); err == nil {
			resp.Body.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/b", nil)
		resp, err := c.Do(req)
		if r, ok := budget.ReasonOf(err); !ok || r != forage.ReasonThrottled {
			t.Fatalf("a request inside a pause of 120 s, with 10 s to go: %v, %v; want a stop, throttled", resp, err)
		}
		if class := forage.FromHTTP(resp, err).Class(); class != forage.Throttled {
			t.Errorf("forage.FromHTTP of the budget's refusal: class %v; want throttled", class)
		}
	})
	for _, c := range []struct {
		e    budget.Error
		want forage.Class
	}{
		{budget.Error{Reason: forage.ReasonQuota}, forage.Throttled},
		{budget.Error{Reason: forage.ReasonBanned, Status: http.StatusTeapot}, forage.Throttled},
		{budget.Error{Reason: forage.ReasonPaused}, forage.Throttled},
		{budget.Error{Reason: forage.ReasonCircuitOpen, Err: errors.New("budget: circuit open")}, forage.Overloaded},
		{budget.Error{Reason: forage.ReasonRequestCap}, forage.Canceled},
		{budget.Error{Reason: forage.ReasonCanceled, Err: context.Canceled}, forage.Canceled},
		{budget.Error{Reason: forage.ReasonDeadline, Err: context.DeadlineExceeded}, forage.Transient},
		{budget.Error{Reason: forage.ReasonPermanent, Status: http.StatusNotFound}, forage.Permanent},
		{budget.Error{Reason: forage.ReasonUnavailable, Status: http.StatusServiceUnavailable}, forage.Overloaded},
		{budget.Error{Reason: forage.ReasonPermanent}, forage.Permanent},
	} {
		if got := (forage.Outcome{Err: &c.e}).Class(); got != c.want {
			t.Errorf("a stop %s (status %d, err %v) outside Do: class %v; want %v", c.e.Reason, c.e.Status, c.e.Err, got, c.want)
		}
	}
}
