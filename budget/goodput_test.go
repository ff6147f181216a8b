package budget_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/internal/goodput"
	"github.com/forage-go/forage/providertest"
)

// The goodput simulation: workers call Provider.Do with the default Config
// (nothing told of the limit) against providertest for goodputRun of
// simulated time per provider policy, under testing/synctest. Targets in
// every row: goodput >= 90% of what the true limit allowed, at most 1% of
// requests refused, never banned.

// goodputRun is the simulated length of each row.
const goodputRun = 5 * time.Minute

// goodputSetup is one column of the variant table: the true limit, the
// provider's latency and the number of workers.
type goodputSetup struct {
	name    string
	rate    float64       // the true limit, requests/s
	latency time.Duration // response latency; jitter adds up to half of it
	workers int
	// miss names the policies not held to the targets, and why; their
	// rows are still reported.
	miss map[string]string
}

// mainSetup is the acceptance setup: a Binance-like 50/s, 40-60ms, 8 workers.
var mainSetup = goodputSetup{name: "50/s, 40ms+20ms, 8 workers", rate: 50, latency: 40 * time.Millisecond, workers: 8}

type goodputRow struct {
	policy   string
	goodput  float64 // successful requests / what the true limit allowed
	refused  float64 // refused requests / requests sent
	bans     int
	learned  float64 // the provider's rate at the end
	requests int
}

// ok reports whether the row meets the targets.
func (r goodputRow) ok() bool { return r.goodput >= 0.90 && r.refused <= 0.01 && r.bans == 0 }

func (r goodputRow) String() string {
	return fmt.Sprintf("%-32s %8.1f%% %8.2f%% %5d %9.1f %9d", r.policy, 100*r.goodput, 100*r.refused, r.bans, r.learned, r.requests)
}

// runGoodput drives one provider with the default Config, or with the pacer
// newPacer returns if it is not nil, from s.workers workers against pol for
// goodputRun of simulated time.
func runGoodput(t *testing.T, pol goodput.Scenario, s goodputSetup, newPacer func() budget.Pacer) goodputRow {
	t.Helper()
	var row goodputRow
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(pol.Config)
		if err != nil {
			t.Fatal(err)
		}
		rt := srv.Client().Transport
		var cfg budget.Config
		if newPacer != nil {
			cfg.Pacer = newPacer() // made in the bubble: its timers are fake
		}
		p, err := budget.NewLocal("sim", cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), goodputRun)
		defer cancel()
		attempt := simAttempt(rt, nil)
		drive(ctx, p, s.workers, attempt)
		st := srv.Stats()
		allowed := pol.Allowed(goodputRun)
		row = goodputRow{
			policy:   pol.Name,
			goodput:  float64(st.OK) / allowed,
			refused:  float64(st.Throttled+st.Unavailable+st.Banned) / float64(max(st.Requests, 1)),
			bans:     int(st.Bans),
			learned:  p.Snapshot().Rate,
			requests: int(st.Requests),
		}
	})
	return row
}

// simAttempt returns an attempt that asks the simulated exchange behind rt
// for one candle, reads the body, and calls ok (if not nil) for each 200.
func simAttempt(rt http.RoundTripper, ok func()) func(context.Context) forage.Outcome {
	return func(ctx context.Context) forage.Outcome {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://sim/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=1", nil)
		resp, err := rt.RoundTrip(req)
		out := forage.FromHTTP(resp, err)
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && ok != nil {
				ok()
			}
		}
		return out
	}
}

// drive calls p.Do from workers goroutines until ctx ends, waiting out
// source pressure the way a scheduler does: until the stop's Until.
func drive(ctx context.Context, p budget.Provider, workers int, attempt func(context.Context) forage.Outcome) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := p.Do(ctx, nil, attempt)
				if r, _ := budget.ReasonOf(err); r == forage.ReasonCanceled {
					return // the run is over
				}
				var stop *budget.Error
				if errors.As(err, &stop) && stop.Until.After(time.Now()) {
					select {
					case <-time.After(time.Until(stop.Until)):
					case <-ctx.Done():
					}
				}
			}
		})
	}
	wg.Wait()
}

// goodputTable runs every policy of setup s and reports the table; it fails
// the test for each row that misses the targets.
func goodputTable(t *testing.T, s goodputSetup, newPacer func() budget.Pacer) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-32s %9s %9s %5s %9s %9s\n", s.name, "goodput", "refused", "bans", "learned", "requests")
	var miss []goodputRow
	for _, pol := range goodput.Scenarios(s.rate, s.latency, goodputRun) {
		r := runGoodput(t, pol, s, newPacer)
		fmt.Fprint(&b, r)
		switch why, exempt := s.miss[pol.Name]; {
		case exempt:
			fmt.Fprintf(&b, "  (not held to the targets: %s)", why)
		case !r.ok():
			miss = append(miss, r)
		}
		fmt.Fprintln(&b)
	}
	t.Log(b.String())
	for _, r := range miss {
		t.Errorf("%s, %s: goodput %.1f%%, refused %.2f%%, bans %d; want >= 90%%, <= 1%%, 0",
			s.name, r.policy, 100*r.goodput, 100*r.refused, r.bans)
	}
}

// TestGoodput is the acceptance simulation: per provider policy, the share
// of the true limit a Provider with the default Config turns into successful
// requests, and the share of its requests the provider refused, over five
// simulated minutes. Run it with -v (or make goodput) to see the table.
func TestGoodput(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		t.Skip("a measurement, ten times slower under the race detector: make goodput runs it")
	}
	goodputTable(t, mainSetup, nil)
}

// TestGoodputVariants runs the same policies with other latencies, worker
// counts and true limits, all with the default Config.
func TestGoodputVariants(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		t.Skip("a measurement, ten times slower under the race detector: make goodput runs it")
	}
	if testing.Short() {
		t.Skip("the variant table runs 48 simulated 5-minute rows")
	}
	for _, s := range goodputVariants {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			goodputTable(t, s, nil)
		})
	}
}

// goodputVariants are the setups of TestGoodputVariants.
var goodputVariants = []goodputSetup{
	{name: "50/s, 20ms+10ms, 8 workers", rate: 50, latency: 20 * time.Millisecond, workers: 8},
	{name: "50/s, 100ms+50ms, 8 workers", rate: 50, latency: 100 * time.Millisecond, workers: 8,
		miss: map[string]string{"limit halves mid-run": farClimb}},
	{name: "50/s, 40ms+20ms, 32 workers", rate: 50, latency: 40 * time.Millisecond, workers: 32},
	{name: "10/s, 40ms+20ms, 1 worker", rate: 10, latency: 40 * time.Millisecond, workers: 1,
		miss: map[string]string{"503": shortSteady}},
	{name: "10/s, 40ms+20ms, 8 workers", rate: 10, latency: 40 * time.Millisecond, workers: 8},
	{name: "200/s, 40ms+20ms, 32 workers", rate: 200, latency: 40 * time.Millisecond, workers: 32,
		miss: map[string]string{
			"ban after 5 violations": inFlightBan,
			"limit halves mid-run":   "borderline, 90.0-90.2% with a conforming pacer: the halving costs two cuts, two 1s pauses and a Recovery",
		}},
}

// shortSteady is why the 503 row at 10/s with one worker is not held to the
// targets: now and then (3 runs of 40) slow start's exit is followed by two
// 503s within a second, the second ending five answers at a steady rate.
// The episode estimate leaves one success out (the token an allowance may
// have held) and spans the interval to the refused request, so five
// successes read two thirds of the rate: a limit shrunk far under it, and
// the rate is held at 7.4/s for a minute (89.7-90.8% over the 5 minutes;
// 94-99% in the other runs). Reading it as the limit met (the estimate
// against what every request admitted would read) let a 503 limit behind
// an allowance pass for noise in a rapid property, so it stays.
const shortSteady = "now and then two 503s within a second read as a limit shrunk to two thirds of the rate"

// farClimb is why the limit that halves is not held to the targets at
// 100 ms (+50 ms): slow start is paced for the round trip (see aimd's
// exitAccel), so the climb to 50/s takes about 10 s, and with the halving's
// two cuts and pauses the run gets 88-89%. (Before that pace, a provider
// with an allowance of 10 at this latency drew four refused requests
// leaving slow start, and the ban guard held it at two fifths of its limit
// for a minute: 81%, now 96%.)
const farClimb = "slow start paced for a 125 ms round trip takes 10 s to reach 50/s: 88-89%"

// inFlightBan is why a ban after 5 refusals a minute is not held to the
// targets when many requests are in flight (rate × latency: 10 at 200/s,
// 50 ms away): against a burst of 1, arrivals bunched by the latency's
// jitter are refused, so the first overshoot draws 5 refusals before the
// first one comes back, even at slow start's pace for the round trip. Tell such a provider's limit (Config.Limits), or
// climb additively (Config.Adaptive.DisableSlowStart).
const inFlightBan = "5+ requests in flight: the first overshoot alone draws 5 refusals"
