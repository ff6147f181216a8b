// Package leaktest is the setup that the scheduler's and the admin
// handler's tests for leaked credentials share: jobs whose runs fail with
// errors that carry a signed URL's credentials, and a job store whose
// failure names a database password. Each package then checks its own
// surface: what the scheduler stores and logs, what the handler serves.
package leaktest

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
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// SignedURL is a failing request's URL as a signed exchange API wants it:
// its credentials are in the query.
const SignedURL = "https://api.example.com/api/v3/klines?symbol=BTCUSDT&apikey=K3Y-s3cr3t&signature=S1G-s3cr3t"

// Leaked reports whether s holds one of the credentials of this package.
func Leaked(s string) bool { return strings.Contains(s, "s3cr3t") }

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

// EchoedRuns must be called inside a testing/synctest bubble. It returns
// a scheduler whose three jobs ran for a minute of the bubble's time, each
// failing with a provider's message that carries a secret without a URL:
// the signed query echoed back, a token, an Authorization header.
func EchoedRuns(t *testing.T) *schedule.Scheduler {
	t.Helper()
	errs := map[string]error{
		"echo":   errors.New(`binance: 400 {"code":-1022,"msg":"Signature is not valid.","params":"symbol=BTCUSDT&apikey=K3Y-s3cr3t&signature=S1G-s3cr3t"}`),
		"token":  errors.New("auth failed: token=T0K-s3cr3t expired"),
		"header": errors.New("sent Authorization: Bearer B-s3cr3t, got 401"),
	}
	worker := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
		return schedule.Result{}, errs[j.Stream]
	})
	s, err := schedule.New(schedule.Config{}, schedule.NewMemoryJobStore(), worker)
	if err != nil {
		t.Fatal(err)
	}
	for stream := range errs {
		if _, err := s.Upsert(context.Background(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: stream}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, s, time.Minute)
	return s
}

// run runs s for d of the bubble's time.
func run(t *testing.T, s *schedule.Scheduler, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(d)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}

// FailedRuns must be called inside a testing/synctest bubble. It returns a
// scheduler whose four jobs ran for three minutes of the bubble's time,
// each failing with net/http's *url.Error of SignedURL (raw, wrapped,
// through budget, or as source pressure) while the store failed once with
// a password in its error, and the scheduler's log.
func FailedRuns(t *testing.T) (*schedule.Scheduler, *bytes.Buffer) {
	t.Helper()
	reset := &url.Error{Op: "Get", URL: SignedURL, Err: errors.New("read tcp: connection reset by peer")}
	errs := map[string]error{
		"raw":      reset,
		"wrapped":  fmt.Errorf("slice: binance BTCUSDT 1m: fetch: %w", reset),
		"budget":   forage.FromHTTP(nil, reset).Err,
		"pressure": &budget.Error{Provider: "q", Reason: forage.ReasonThrottled, Until: time.Now().Add(time.Hour), Err: reset},
	}
	worker := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
		return schedule.Result{}, errs[j.Stream]
	})
	var logs bytes.Buffer
	store := &failOnce{JobStore: schedule.NewMemoryJobStore()}
	s, err := schedule.New(schedule.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, store, worker)
	if err != nil {
		t.Fatal(err)
	}
	for stream := range errs {
		provider := "p"
		if stream == "pressure" {
			provider = "q"
		}
		if _, err := s.Upsert(context.Background(), schedule.Spec{Provider: provider, Kind: schedule.KindBackfill, Stream: stream}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, s, 3*time.Minute)
	return s, &logs
}

// CheckStored fails t unless every job of s stored its LastError with
// its secrets redacted, and, when inURL is set, SignedURL's query too.
func CheckStored(t *testing.T, s *schedule.Scheduler, inURL bool) {
	t.Helper()
	jobs, err := s.Store().List(context.Background(), schedule.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		want := "REDACTED"
		if inURL {
			want = "api.example.com/api/v3/klines?symbol=BTCUSDT&apikey=REDACTED"
		}
		if e := j.Stats.LastError; e == "" || Leaked(e) || !strings.Contains(e, want) {
			t.Errorf("%s: LastError %q: want the error, its secrets redacted", j.Stream, e)
		}
	}
}
