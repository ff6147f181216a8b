package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/slice"
)

// throttleFirst answers the first request it sees with 429 and
// "Retry-After: 120", as an exchange does to a client over its limit, and
// passes every other request to the exchange; with after set, the other way
// round: it passes the first and answers every later one 429 with
// "Retry-After: 3600". It notes when each request came.
type throttleFirst struct {
	next  http.RoundTripper
	after bool
	mu    sync.Mutex
	sent  []time.Time
}

func (t *throttleFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.sent = append(t.sent, time.Now())
	first := len(t.sent) == 1
	t.mu.Unlock()
	if first == t.after {
		return t.next.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	wait := "120"
	if t.after {
		wait = "3600"
	}
	return &http.Response{
		StatusCode: http.StatusTooManyRequests,
		Header:     http.Header{"Retry-After": {wait}, "Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(`{"code":-1003,"msg":"Too many requests."}`)),
		Request:    req,
	}, nil
}

// throttledRuns returns a func that runs the command (-json, its other
// args given) against the simulated exchange behind exchange, on one file
// store for every run.
func throttledRuns(t *testing.T, exchange *throttleFirst) func(args ...string) result {
	dir := t.TempDir()
	e := env{serve: func(srv *providertest.Server) (string, *http.Client, func(), error) {
		exchange.next = srv.Client().Transport
		return "http://sim", &http.Client{Transport: exchange}, func() {}, nil
	}}
	return func(args ...string) result {
		var out, errOut bytes.Buffer
		code := runEnv(context.Background(), e, append([]string{"-store", dir, "-json"}, args...), &out, &errOut)
		return result{code, out.String(), errOut.String()}
	}
}

// times returns when the requests came.
func (t *throttleFirst) times() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Time(nil), t.sent...)
}

// TestRestartHonoursTheProvidersPause: a run told "429, Retry-After: 120"
// that ends (here at its -timeout) leaves the pause in the file store, and
// a run started at once after it sends nothing until the two minutes are
// over, then collects the day (issue 12 item 5: it used to call again at
// once, and retrying during a ban only extends it).
func TestRestartHonoursTheProvidersPause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		exchange := &throttleFirst{}
		run := throttledRuns(t, exchange)
		first := run("-timeout", "10s")
		if len(exchange.times()) != 1 {
			t.Fatalf("first run sent %d requests, want the one refused (stdout %q, stderr %q)", len(exchange.times()), first.stdout, first.stderr)
		}
		throttledAt := exchange.times()[0]

		second := run()
		if second.code != 0 {
			t.Fatalf("second run: exit %d, stderr %q", second.code, second.stderr)
		}
		sent := exchange.times()
		if len(sent) < 2 {
			t.Fatalf("the second run sent nothing: %q", second.stdout)
		}
		if wait := sent[1].Sub(throttledAt); wait < 120*time.Second {
			t.Fatalf("the restarted run called %v after the 429, before its Retry-After of 2m", wait)
		}
		if s := decodeSummary(t, second.stdout); s.Status != "done" || s.Candles == 0 {
			t.Fatalf("second run: %+v, want done with the day's candles", s)
		}
	})
}

// TestADeferredSummaryNamesThePauseAndWhereItStands: a run held back by the
// provider's pause, saved by the run before it, ends deferred at its
// -timeout; its summary says where the catch-up stands (the candles the
// earlier run committed) and that the provider's pause held it. It said
// "stopped (deadline) after the start", of a stream that held 1000 candles.
func TestADeferredSummaryNamesThePauseAndWhereItStands(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		exchange := &throttleFirst{after: true}
		run := throttledRuns(t, exchange)
		if first := run("-timeout", "10s"); decodeSummary(t, first.stdout).Candles == 0 {
			t.Fatalf("first run collected nothing: %q %q", first.stdout, first.stderr)
		}
		second := run("-timeout", "5s")
		s := decodeSummary(t, second.stdout)
		if s.Status != "deferred" || len(s.Gaps) != 1 {
			t.Fatalf("second run: %+v, want deferred with one gap", s)
		}
		if g := s.Gaps[0]; g.After == "" || !strings.Contains(g.Reason, "pause (throttled) lasts until") {
			t.Fatalf("gap %+v: want where the catch-up stands and the provider's pause named", g)
		}
	})
}

// TestAnOperatorsPauseIsSaidOnceWithWhy: a run whose provider an operator
// paused (in the shared record: here the file store's) sends nothing, says
// once, with the operator's reason, that it waits for a resume, and its -v
// lines do not repeat "stopped: paused" at every one of the scheduler's
// retries (one a second, with no reason given).
func TestAnOperatorsPauseIsSaidOnceWithWhy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		exchange := &throttleFirst{}
		dir := t.TempDir()
		st, err := checkpoint.OpenFileStore(filepath.Join(dir, "checkpoints"), checkpoint.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SaveRecord(t.Context(), forage.ProviderRecord{Key: "sim", Status: budget.StatusPaused, Why: "key rotation"}); err != nil {
			t.Fatal(err)
		}
		st.Close()
		e := env{serve: func(srv *providertest.Server) (string, *http.Client, func(), error) {
			exchange.next = srv.Client().Transport
			return "http://sim", &http.Client{Transport: exchange}, func() {}, nil
		}}
		var out, errOut bytes.Buffer
		runEnv(context.Background(), e, []string{"-store", dir, "-json", "-v", "-timeout", "20s"}, &out, &errOut)
		if n := len(exchange.times()); n != 0 {
			t.Errorf("sent %d requests to a provider an operator paused", n)
		}
		said := strings.Count(errOut.String(), "paused by an operator (key rotation); waiting for a resume")
		if said == 0 || said > 2 { // once per stream that ran (catch-up, and steady state with -follow)
			t.Errorf("the pause was said %d times, want once per stream; stderr:\n%s", said, errOut.String())
		}
		if n := strings.Count(errOut.String(), "stopped: paused"); n > 2 {
			t.Errorf("-v said \"stopped: paused\" %d times in 20 s, want once per stream; stderr:\n%s", n, errOut.String())
		}
	})
}

// TestATurnOverIsNotTheCommandsDeadline: a run that its minute's turn
// (RunFor) ended is run again by the scheduler; -v says its turn is over,
// not "stopped: deadline", which read as the command's -timeout. When the
// command's own run is spent, it says deadline.
func TestATurnOverIsNotTheCommandsDeadline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		deadline time.Time
		want     string
	}{
		{time.Time{}, "turn over: runs again"},
		{time.Now().Add(-time.Second), "stopped: deadline"},
	} {
		run, err := budget.NewRun(budget.Envelope{Deadline: tc.deadline})
		if err != nil {
			t.Fatal(err)
		}
		var v bytes.Buffer
		c := &collector{run: run, verbose: &v, o: options{interval: "1m"}}
		c.record(&streamStats{Symbol: "BTCUSDT", Mode: "catch_up"}, slice.Report{Slices: 600, Reason: forage.ReasonDeadline}, nil)
		if !strings.Contains(v.String(), tc.want) {
			t.Errorf("command deadline %v: -v said %q, want %q", tc.deadline, v.String(), tc.want)
		}
	}
}
