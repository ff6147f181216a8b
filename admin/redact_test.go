package admin_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/forage-go/forage/internal/leaktest"
	"github.com/forage-go/forage/schedule"
)

// signedURL is a failing request's URL with its credentials in the query.
const signedURL = leaktest.SignedURL

// leaked reports whether s holds a credential.
func leaked(s string) bool { return leaktest.Leaked(s) }

// TestSecretsNeverStoredOrServed is the regression for credentials in
// stored errors: runs that fail with net/http's *url.Error (raw, wrapped,
// through budget, or as source pressure) store a LastError without the
// URL's query values, and neither the JSON API, the status page nor the
// scheduler's log lines show them.
func TestSecretsNeverStoredOrServed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, logs := leaktest.FailedRuns(t)
		leaktest.CheckStored(t, s, true)
		h := handler(t, s)
		for _, path := range []string{"/jobs", "/jobs/1", "/jobs/2", "/jobs/3", "/jobs/4", "/", "/stats", "/providers"} {
			rec := send(h, localRequest("GET", path, nil))
			if body := rec.Body.String(); rec.Code != 200 || leaked(body) {
				t.Errorf("GET %s: %d, a credential served:\n%s", path, rec.Code, body)
			}
		}
		if leaked(logs.String()) {
			t.Errorf("log lines %q: want no password", logs.String())
		}
	})
}

// TestStoredSecretsNotServed: a LastError stored before redaction (or by a
// host writing the store itself) is redacted when served, and an error
// served for a failed request is too.
func TestStoredSecretsNotServed(t *testing.T) {
	t.Parallel()
	store := schedule.NewMemoryJobStore()
	ctx := context.Background()
	j, err := store.Upsert(ctx, schedule.Job{Provider: "p", Kind: schedule.KindBackfill, Stream: "s", State: schedule.StateIdle})
	if err != nil {
		t.Fatal(err)
	}
	j.State = schedule.StateFailed
	j.Stats = schedule.Stats{Runs: 1, Failures: 1, Streak: 1, LastError: `Get "` + signedURL + `": EOF ` + strings.Repeat("x", 10_000)}
	if _, err := store.Update(ctx, j); err != nil {
		t.Fatal(err)
	}
	s, err := schedule.New(schedule.Config{}, store, idle)
	if err != nil {
		t.Fatal(err)
	}
	h := handler(t, s)
	for _, path := range []string{"/jobs", "/jobs/1", "/", "/?state=failed"} {
		rec := send(h, localRequest("GET", path, nil))
		if body := rec.Body.String(); rec.Code != 200 || leaked(body) || !strings.Contains(body, "klines?symbol=BTCUSDT") || !strings.Contains(body, "apikey=REDACTED") || len(body) > 64<<10 {
			t.Errorf("GET %s: %d, %d bytes: want the error redacted and cut", path, rec.Code, len(body))
		}
	}
}

// TestEchoedSecretsNotStored (regression: only URLs were redacted): a
// provider's error message that echoes the signed query without its URL
// ("params":"…&apikey=…&signature=…"), or names a token or an
// Authorization header, is stored and served without the secrets.
func TestEchoedSecretsNotStored(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := leaktest.EchoedRuns(t)
		leaktest.CheckStored(t, s, false)
		for _, path := range []string{"/jobs", "/"} {
			if rec := send(handler(t, s), localRequest("GET", path, nil)); rec.Code != 200 || leaked(rec.Body.String()) {
				t.Errorf("GET %s: %d, a credential served", path, rec.Code)
			}
		}
	})
}
