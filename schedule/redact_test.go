package schedule_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/forage-go/forage/internal/leaktest"
)

// leaked reports whether s holds a credential.
func leaked(s string) bool { return leaktest.Leaked(s) }

// TestSecretsNeverStoredOrLogged is the regression for credentials in
// stored errors: runs that fail with net/http's *url.Error (raw, wrapped,
// through budget, or as source pressure) store a LastError without the
// URL's query values, and the scheduler's log lines do not show them.
// (Package admin's TestSecretsNeverStoredOrServed checks what the admin API
// serves of the same runs.)
func TestSecretsNeverStoredOrLogged(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, logs := leaktest.FailedRuns(t)
		leaktest.CheckStored(t, s, true)
		if !strings.Contains(logs.String(), "failed") || leaked(logs.String()) {
			t.Errorf("log lines %q: want the store failure, without the password", logs.String())
		}
	})
}

// TestEchoedSecretsNotStored (regression: only URLs were redacted): a
// provider's error message that echoes the signed query without its URL
// ("params":"…&apikey=…&signature=…"), or names a token or an
// Authorization header, is stored without the secrets (and package admin
// checks that it is served without them).
func TestEchoedSecretsNotStored(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := leaktest.EchoedRuns(t)
		leaktest.CheckStored(t, s, false)

	})
}
