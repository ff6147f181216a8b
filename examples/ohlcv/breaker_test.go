package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/providertest"
)

// failingFirst serves the embedded exchange, but answers its first n klines
// requests with a 500: an outage that ends.
func failingFirst(t *testing.T, n int64) env {
	t.Helper()
	srv, err := providertest.New(embeddedConfig())
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	rt := srv.Client().Transport
	return env{serve: func(*providertest.Server) (string, *http.Client, func(), error) {
		return "http://sim", &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/klines") && seen.Add(1) <= n {
				return &http.Response{StatusCode: 500, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: r}, nil
			}
			return rt.RoundTrip(r)
		})}, func() {}, nil
	}}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBreakerOpenThenTheCatchUpResumes: an outage that opens the breaker
// (nine 500s in a row) and ends: once the breaker's open period is over the
// catch-up makes its probe and finishes, done. It never ran again: a
// backfill waited for a closed breaker, which only a call closes, and the
// command waited with it for good, -timeout or not.
func TestBreakerOpenThenTheCatchUpResumes(t *testing.T) {
	t.Parallel()
	for _, timeout := range []string{"0", "10m"} {
		t.Run("timeout "+timeout, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				// Stopped after 5 minutes if it hangs: it then says interrupted.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				var out, errOut bytes.Buffer
				code := runEnv(ctx, failingFirst(t, 9), []string{"-store", t.TempDir(), "-json", "-timeout", timeout}, &out, &errOut)
				r := result{code, out.String(), errOut.String()}
				s := decodeSummary(t, r.stdout)
				if r.code != exitOK || s.Status != "done" || s.Candles != 1440 {
					t.Fatalf("exit %d, summary %+v, stderr %q: want done, 1440 candles", r.code, s, r.stderr)
				}
				if el := time.Since(start); el > 2*time.Minute {
					t.Fatalf("done after %v: want within a minute or so of the breaker opening", el)
				}
			})
		})
	}
}

// TestDeadlinePassedWhileWaitingIsDeferred: a run whose provider is down
// for good ends at its deadline, deferred with a gap, never done.
func TestDeadlinePassedWhileWaitingIsDeferred(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		r := cliIn(failingFirst(t, 1000), "-store", t.TempDir(), "-json", "-timeout", "45s")
		s := decodeSummary(t, r.stdout)
		if r.code != exitOK || s.Status != "deferred" || s.Candles != 0 || len(s.Gaps) == 0 {
			t.Fatalf("exit %d, summary %+v, stderr %q: want deferred with a gap, no candle", r.code, s, r.stderr)
		}
		if el := time.Since(start); el > 50*time.Second {
			t.Fatalf("ended after %v: want at the 45 s -timeout", el)
		}
	})
}
