package budget_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/budget"
)

// floorWindowAPI is an in-memory provider with Reddit's headers: a fixed
// window of limit requests, X-Ratelimit-Used, X-Ratelimit-Remaining as a
// float and X-Ratelimit-Reset in whole seconds to the window's end,
// rounded down (int(reset - now)), no limit header. A request past the
// limit is a 429 with the same headers: "0.0" left and, in the window's
// last second, a Reset of 0. afterPause counts the requests it refused a
// second or more after it had said the window was spent: not those in
// flight when it ran out, but those sent when a pause for its Reset ended
// before the window did.
type floorWindowAPI struct {
	mu         sync.Mutex
	start      time.Time
	limit      int
	per        time.Duration
	idx        int64
	used       int
	spentAt    time.Time // when it first said the window was spent; zero = not yet
	served     int
	afterPause int
	lateIn     map[int64]bool // the windows of those refusals
}

func (s *floorWindowAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	now := time.Now()
	if i := int64(now.Sub(s.start) / s.per); i != s.idx {
		s.idx, s.used, s.spentAt = i, 0, time.Time{}
	}
	end := s.start.Add(time.Duration(s.idx+1) * s.per)
	code := http.StatusTooManyRequests
	if s.used < s.limit {
		s.used++
		s.served++
		code = http.StatusOK
	} else if now.Sub(s.spentAt) >= time.Second {
		s.afterPause++
		s.lateIn[s.idx] = true
	}
	if s.used >= s.limit && s.spentAt.IsZero() {
		s.spentAt = now
	}
	h := http.Header{
		"X-Ratelimit-Used":      {strconv.Itoa(s.used)},
		"X-Ratelimit-Remaining": {strconv.FormatFloat(float64(s.limit-s.used), 'f', 1, 64)},
		"X-Ratelimit-Reset":     {strconv.Itoa(int(end.Sub(now) / time.Second))}, // rounded down
	}
	s.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// TestPropertyAWindowWhoseResetIsRoundedDownIsNotAskedAgain: a provider
// that rounds its Reset down says "0.0 left, reset 18" with 18.9 s to go,
// then "0.0 left, reset 0" in the window's last second. Paused until the
// rounded reset, forage sent into that last second, read each refusal as
// one for rate (no pause: its Reset is 0), cut the rate, and sent the next
// requests into it too: up to five a window in real time, where a
// provider that bans at five refusals a minute counts them all, and a
// quarter of the windows' quota lost to the cuts (233 of 300 served over
// three windows of 21.73 s). A refusal in the second after such a pause
// now waits for the window's end, cuts nothing, and every later spent
// window's pause lasts a second more: such refusals in one window of a
// run at most (the requests in flight when the first came back), every
// window spent.
func TestPropertyAWindowWhoseResetIsRoundedDownIsNotAskedAgain(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			per := time.Duration(rapid.IntRange(8000, 40000).Draw(rt, "window ms")) * time.Millisecond
			api := &floorWindowAPI{start: time.Now(), limit: rapid.IntRange(20, 150).Draw(rt, "limit"), per: per, lateIn: map[int64]bool{}}
			workers := rapid.IntRange(1, 8).Draw(rt, "workers")
			windows := 3
			reg, err := budget.NewRegistry(budget.RegistryConfig{})
			if err != nil {
				rt.Fatal(err)
			}
			client := &http.Client{Transport: budget.NewTransport(reg, api)}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(windows)*per)
			defer cancel()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for ctx.Err() == nil {
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://oauth.reddit.com/r/golang/new", nil)
						resp, err := client.Do(req)
						if err != nil {
							time.Sleep(100 * time.Millisecond)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}
				})
			}
			wg.Wait()
			api.mu.Lock()
			defer api.mu.Unlock()
			if len(api.lateIn) > 1 || api.afterPause > workers || api.served < windows*api.limit-workers {
				rt.Fatalf("%d windows of %d in %v, %d workers: %d served, %d refused in a spent window's last second, in %d windows; want %d (less the %d in flight at the end), and those refusals in one window at most, no more than the workers",
					windows, api.limit, per, workers, api.served, api.afterPause, len(api.lateIn), windows*api.limit, workers)
			}
		})
	})
}
