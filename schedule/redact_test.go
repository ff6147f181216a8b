package schedule_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/internal/leaktest"
	"github.com/forage-go/forage/schedule"
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
		leaktest.CheckStored(t, s)
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
		errs := map[string]error{
			"echo":   errors.New(`binance: 400 {"code":-1022,"msg":"Signature is not valid.","params":"symbol=BTCUSDT&apikey=K3Y-s3cr3t&signature=S1G-s3cr3t"}`),
			"token":  errors.New("auth failed: token=T0K-s3cr3t expired"),
			"header": errors.New("sent Authorization: Bearer B-s3cr3t, got 401"),
		}
		runner := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			return schedule.Result{}, errs[j.Stream]
		})
		s, _ := newSched(t, schedule.Config{}, runner)
		for stream := range errs {
			upsert(t, s, time.Now(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: stream})
		}
		runFor(t, s, time.Minute)
		jobs, err := s.Jobs(context.Background(), schedule.Query{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if e := j.Stats.LastError; e == "" || leaked(e) || !strings.Contains(e, "REDACTED") {
				t.Errorf("%s: LastError %q: want the error, its secrets redacted", j.Stream, e)
			}
		}
	})
}
