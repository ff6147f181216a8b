package schedule_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// TestOutcomesAreLogged: what a run's end did to its job is one structured
// record at an operator's level: a failure at Warn (its error redacted),
// the provider's pushback (a spent quota told apart) and a deferral at Info with the reason and the
// next run, an ordinary cycle only at Debug. A nil Logger stays silent.
func TestOutcomesAreLogged(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		errs := map[string]error{
			"fails":    errors.New("decode: unexpected EOF from https://api.example.com/x?apikey=K3Y-s3cr3t"),
			"pressure": &budget.Error{Provider: "q", Reason: forage.ReasonThrottled, Until: time.Now().Add(time.Hour)},
			"deferred": &budget.Error{Provider: "p", Reason: forage.ReasonRequestCap},
			"quota":    &budget.Error{Provider: "r", Reason: forage.ReasonQuota, Until: time.Now().Add(time.Hour)},
			"fine":     nil,
		}
		worker := schedule.WorkerFunc(func(ctx context.Context, j schedule.Job) (schedule.Result, error) {
			return schedule.Result{}, errs[j.Stream]
		})
		var out bytes.Buffer
		log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
		s, _ := newSched(t, schedule.Config{Logger: log}, worker)
		for stream := range errs {
			provider := "p"
			switch stream {
			case "pressure":
				provider = "q"
			case "quota":
				provider = "r"
			}
			upsert(t, s, time.Now(), schedule.Spec{Provider: provider, Kind: schedule.KindIncremental, Stream: stream, Interval: time.Hour})
		}
		runFor(t, s, 500*time.Millisecond)
		logs := out.String()
		for _, want := range []string{
			`level=WARN msg="schedule: run failed; backing off"`,
			`stream=fails`,
			`level=INFO msg="schedule: the provider pushed back; the job waits"`,
			`reason=throttled`,
			// A spent known quota is no pushback: no refusal came.
			`level=INFO msg="schedule: a known quota is spent; the job waits for its reset"`,
			`reason=quota`,
			`level=INFO msg="schedule: run deferred: its budget is spent"`,
			`reason=request_cap`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %s:\n%s", want, logs)
			}
		}
		if strings.Contains(logs, "s3cr3t") || strings.Contains(logs, "stream=fine") {
			t.Errorf("logs show a secret or an ordinary cycle at Info:\n%s", logs)
		}
	})
}

// TestLeaseTakeoverIsLogged: a scheduler that rescues a job whose lease
// expired (its owner crashed or stalled) says so at Warn, naming the owner
// it took the job from; an ordinary claim says nothing.
func TestLeaseTakeoverIsLogged(t *testing.T) {
	t.Parallel()
	store := schedule.NewMemoryJobStore()
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	crashed, err := schedule.New(schedule.Config{Owner: "crashed", LeaseTTL: time.Minute}, store, idle)
	if err != nil {
		t.Fatal(err)
	}
	rescuer, err := schedule.New(schedule.Config{Owner: "rescuer", LeaseTTL: time.Minute, Logger: log}, store, idle)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	upsert(t, rescuer, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: "s", Interval: time.Hour})
	if got := claim(t, crashed, t0); len(got) != 1 {
		t.Fatalf("the first scheduler claimed %d jobs, want 1", len(got))
	}
	if out.Len() != 0 {
		t.Fatalf("an ordinary claim logged:\n%s", out.String())
	}
	got := claim(t, rescuer, t0.Add(time.Minute))
	if len(got) != 1 || !strings.HasPrefix(got[0].Lease.TakenFrom, "crashed.") || !strings.HasSuffix(got[0].Lease.TakenFrom, "/1") {
		t.Fatalf("the rescue claimed %+v, want the job taken from crashed.<random>/1", got)
	}
	for _, want := range []string{`level=WARN msg="schedule: lease taken over"`, `stream=s`, `from=` + got[0].Lease.TakenFrom} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, out.String())
		}
	}
}
