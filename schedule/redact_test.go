package schedule_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// signedURL is a failing request's URL as a signed exchange API wants it:
// its credentials are in the query.
const signedURL = "https://api.example.com/api/v3/klines?symbol=BTCUSDT&apikey=K3Y-s3cr3t&signature=S1G-s3cr3t"

// leaked reports whether s holds a credential.
func leaked(s string) bool { return strings.Contains(s, "s3cr3t") }

// failOnce is a JobStore whose first Update of the stream "raw" fails with
// an error naming the database by a DSN with a password, as a PostgreSQL
// driver's may. (The job's lease then expires and it runs again.)
type failOnce struct {
	schedule.JobStore
	once sync.Once
}

func (s *failOnce) Update(ctx context.Context, j schedule.Job) (schedule.Job, error) {
	var err error
	if j.Stream != "raw" {
		return s.JobStore.Update(ctx, j)
	}
	s.once.Do(func() {
		err = errors.New("dial postgres://forage:PW-s3cr3t@db:5432/forage?sslmode=disable&password=s3cr3t: refused")
	})
	if err != nil {
		return schedule.Job{}, err
	}
	return s.JobStore.Update(ctx, j)
}

// TestSecretsNeverStoredOrLogged is the regression for credentials in
// stored errors: runs that fail with net/http's *url.Error (raw, wrapped,
// through budget, or as source pressure) store a LastError without the
// URL's query values, and the scheduler's log lines do not show them.
// (Package admin's TestSecretsNeverStoredOrServed runs the same and checks
// what the admin API serves.)
func TestSecretsNeverStoredOrLogged(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reset := &url.Error{Op: "Get", URL: signedURL, Err: errors.New("read tcp: connection reset by peer")}
		errs := map[string]error{
			"raw":      reset,
			"wrapped":  fmt.Errorf("slice: binance BTCUSDT 1m: fetch: %w", reset),
			"budget":   forage.FromHTTP(nil, reset).Err,
			"pressure": &budget.Error{Provider: "q", Reason: forage.ReasonThrottled, Until: time.Now().Add(time.Hour), Err: reset},
		}
		runner := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			return schedule.Result{}, errs[j.Stream]
		})
		var logs bytes.Buffer
		store := &failOnce{JobStore: schedule.NewMemoryJobStore()}
		s, err := schedule.New(schedule.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		for stream := range errs {
			provider := "p"
			if stream == "pressure" {
				provider = "q"
			}
			upsert(t, s, time.Now(), schedule.Spec{Provider: provider, Kind: schedule.KindBackfill, Stream: stream})
		}
		runFor(t, s, 3*time.Minute)

		jobs, err := s.Jobs(context.Background(), schedule.Query{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if e := j.Stats.LastError; e == "" || leaked(e) || !strings.Contains(e, "api.example.com/api/v3/klines?symbol=REDACTED") {
				t.Errorf("%s: LastError %q: want the error, its URL redacted", j.Stream, e)
			}
		}
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
