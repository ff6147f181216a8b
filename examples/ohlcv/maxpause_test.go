package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// hostile serves the embedded exchange, but answers its first n klines
// requests with a 429 whose Retry-After is absurd (about 3·10^12 years).
func hostile(t *testing.T, n int64) string {
	t.Helper()
	srv, err := providertest.New(embeddedConfig())
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/klines") && seen.Add(1) <= n {
			w.Header().Set("Retry-After", "99999999999999999999")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestAbsurdPauseEndsARunWithATimeout: a pause longer than the run's wall
// clock ends it at once, deferred, with the time the provider may be
// called again (cut to -max-pause, 1 hour by default), printed.
func TestAbsurdPauseEndsARunWithATimeout(t *testing.T) {
	t.Parallel()
	base := hostile(t, 1)
	start := time.Now()
	r := loopbackRun("-base-url", base, "-store", t.TempDir(), "-timeout", "30s")
	s := summaryOK(t, r)
	if s.Status != "deferred" || len(s.Gaps) != 1 || s.Gaps[0].Until == "" {
		t.Fatalf("summary %s: want deferred with a gap saying when to resume", r.stdout)
	}
	until, err := time.Parse(time.RFC3339, s.Gaps[0].Until)
	if err != nil {
		t.Fatal(err)
	}
	if d := until.Sub(start); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("resume at %v, %v from the start: want the 1 h -max-pause", until, d)
	}
	if el := time.Since(start); el > 20*time.Second { // at once, not at the 30 s -timeout
		t.Fatalf("the run took %v: a pause past -timeout must end it at once", el)
	}
}

// TestAbsurdPauseIsCutToMaxPause: without -timeout, an absurd Retry-After
// is waited out only up to -max-pause, said on stderr; the run then
// finishes.
func TestAbsurdPauseIsCutToMaxPause(t *testing.T) {
	t.Parallel()
	base := hostile(t, 1)
	start := time.Now()
	var out, errOut strings.Builder
	code := run(t.Context(), []string{"-base-url", base, "-store", t.TempDir(), "-max-pause", "6s"}, &out, &errOut)
	if code != exitOK || !strings.HasPrefix(out.String(), "done: 1440 candles") {
		t.Fatalf("exit %d, stdout %q, stderr %q: want done", code, out.String(), errOut.String())
	}
	if el := time.Since(start); el < 6*time.Second {
		t.Fatalf("the run took %v: the pause was not waited out", el)
	}
	if !strings.Contains(errOut.String(), "waiting until") {
		t.Fatalf("stderr %q: want the wait reported", errOut.String())
	}
}
