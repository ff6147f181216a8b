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

	"github.com/forage-go/forage/budget"
)

// salesforceAPI is an in-memory provider with Salesforce's rolling day of
// calls, used of limit so far: every answer carries Sforce-Limit-Info
// "api-usage=used/limit", and a call over the limit is a 403. The answer
// travels back after latency.
type salesforceAPI struct {
	mu          sync.Mutex
	used, limit int
	latency     time.Duration
	served      int
	refused     int
}

func (s *salesforceAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	code := http.StatusForbidden
	if s.used < s.limit {
		s.used, s.served, code = s.used+1, s.served+1, http.StatusOK
	} else {
		s.refused++
	}
	h := http.Header{"Sforce-Limit-Info": {"api-usage=" + strconv.Itoa(s.used) + "/" + strconv.Itoa(s.limit)}}
	s.mu.Unlock()
	select {
	case <-time.After(s.latency):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("[]")), Request: req}, nil
}

// TestASpentDayOfSalesforceCallsIsNotHammered: Salesforce says how many of
// the organisation's calls of the rolling day are used on every answer, and
// answers 403 past them. Its header unread, the 403 was a permanent failure
// of each call: nothing cut the rate, and 4 or 8 workers were refused 613
// times in 30 s once the day's last 50 calls were spent. Read, each 403 is
// the quota's refusal, and the rate falls away from it.
func TestASpentDayOfSalesforceCallsIsNotHammered(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{4, 8} {
		synctest.Test(t, func(t *testing.T) {
			api := &salesforceAPI{used: 4950, limit: 5000, latency: 150 * time.Millisecond}
			reg, err := budget.NewRegistry(budget.RegistryConfig{})
			if err != nil {
				t.Fatal(err)
			}
			client := &http.Client{Transport: budget.NewTransport(reg, api)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for ctx.Err() == nil {
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.my.salesforce.com/services/data/v61.0/query", nil)
						resp, err := client.Do(req)
						if err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							continue
						}
						wait := 100 * time.Millisecond
						var be *budget.Error
						if errors.As(err, &be) && be.Until.After(time.Now()) {
							wait = time.Until(be.Until)
						}
						select {
						case <-ctx.Done():
						case <-time.After(wait):
						}
					}
				})
			}
			wg.Wait()
			api.mu.Lock()
			defer api.mu.Unlock()
			if api.served != 50 || api.refused > 15 {
				t.Errorf("%d workers, 50 calls left of the day: %d served, %d refused in 30 s; want 50, at most 15", workers, api.served, api.refused)
			}
		})
	}
}

// TestASpentDayIsAskedLessAndLess: past the day's last calls, Salesforce
// answers every call 403 with its usage at the limit and no word on when
// calls come back. Each refusal cut the rate, down to its least, and the
// provider was asked every 20 s for the rest of the day (1,080 refusals in
// 6 hours, 4,300 a day), every stop "throttled" with no time to come back.
// Each such refusal in a row now pauses the provider twice as long as the
// one before, from a second to an hour: a few dozen refusals a day, and
// the stop names when to come back.
func TestASpentDayIsAskedLessAndLess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		api := &salesforceAPI{used: 4990, limit: 5000, latency: 150 * time.Millisecond}
		reg, err := budget.NewRegistry(budget.RegistryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: budget.NewTransport(reg, api)}
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		untilNamed := 0
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.my.salesforce.com/services/data/v61.0/query", nil)
					resp, err := client.Do(req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						continue
					}
					wait := time.Minute
					var be *budget.Error
					if errors.As(err, &be) && be.Until.After(time.Now()) {
						wait = time.Until(be.Until)
						mu.Lock()
						untilNamed++
						mu.Unlock()
					}
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
				}
			})
		}
		wg.Wait()
		api.mu.Lock()
		defer api.mu.Unlock()
		if api.served != 10 || api.refused > 40 || untilNamed == 0 {
			t.Errorf("4 workers, 10 calls left of the day, 6 hours: %d served, %d refused, %d stops naming when to come back; want 10, at most 40, some", api.served, api.refused, untilNamed)
		}
	})
}
