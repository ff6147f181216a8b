package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// TestUnreachableStoreWithJSONPrintsAFailedLine: with -json, a program
// reading stdout gets its one line even when the store cannot be opened:
// status failed, the error, and nothing collected.
func TestUnreachableStoreWithJSONPrintsAFailedLine(t *testing.T) {
	t.Parallel()
	r := cli(context.Background(), "-json", "-store", "postgres://nobody:secret@127.0.0.1:1/nothing?connect_timeout=5")
	if r.code != exitError {
		t.Fatalf("exit %d, want %d", r.code, exitError)
	}
	s := decodeSummary(t, r.stdout)
	if s.Status != "failed" || !strings.Contains(s.Error, "127.0.0.1") || s.Store != "postgres" || s.Candles != 0 {
		t.Fatalf("summary %+v: want status failed naming the store", s)
	}
	if strings.Contains(r.stdout+r.stderr, "secret") {
		t.Fatalf("the password leaked: stdout %q stderr %q", r.stdout, r.stderr)
	}
	isOneLine(t, r.stderr, "127.0.0.1")
}

// TestInvalidSchemaIsAUsageError: a -pg-schema PostgreSQL cannot take is a
// bad flag (exit 2, naming the flag), found before connecting.
func TestInvalidSchemaIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-store", "postgres://nobody@127.0.0.1:1/x", "-pg-schema", "bad-name;drop"},
		{"export", "-store", "postgres://nobody@127.0.0.1:1/x", "-pg-schema", "1abc"},
	} {
		r := cli(context.Background(), args...)
		if r.code != exitUsage {
			t.Fatalf("%v: exit %d, stderr %q; want %d", args, r.code, r.stderr, exitUsage)
		}
		isOneLine(t, r.stderr, "-pg-schema")
	}
}

// TestSecretsInErrorsAreRedacted: a provider whose error message echoes a
// signed URL: the summary's error and the stderr line carry no secret.
func TestSecretsInErrorsAreRedacted(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"code":-1100,"msg":"bad request https://x.test/api?apikey=SECRET123&signature=abc"}`)
	}))
	defer ts.Close()
	r := loopbackRun("-base-url", ts.URL, "-store", t.TempDir())
	if r.code != exitError || strings.Contains(r.stdout+r.stderr, "SECRET123") || !strings.Contains(r.stderr, "apikey=") {
		t.Fatalf("exit %d, stdout %q, stderr %q: want a failure naming the URL without its secret", r.code, r.stdout, r.stderr)
	}
}

// TestStoreHeldByAnotherProcessIsAYield: a file store another live
// process holds (its lock) is a yield, not a failure: status yielded,
// exit 3, one line saying so.
func TestStoreHeldByAnotherProcessIsAYield(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := checkpoint.OpenFileStore(filepath.Join(dir, "checkpoints"), checkpoint.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := cli(context.Background(), "-store", dir, "-json")
	if r.code != exitHeld {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %d", r.code, r.stdout, r.stderr, exitHeld)
	}
	if s := decodeSummary(t, r.stdout); s.Status != "yielded" || s.Requests != 0 {
		t.Fatalf("summary %s: want yielded before any request", r.stdout)
	}
	isOneLine(t, r.stderr, "held by another live process")
}

// TestBadFlagsWithJSONPrintALine: with -json, a bad command line still
// prints its one failed line on stdout (exit 2).
func TestBadFlagsWithJSONPrintALine(t *testing.T) {
	t.Parallel()
	r := cli(context.Background(), "-json", "-symbols", "btc usdt!")
	if r.code != exitUsage {
		t.Fatalf("exit %d, want %d", r.code, exitUsage)
	}
	if s := decodeSummary(t, r.stdout); s.Status != "failed" || !strings.Contains(s.Error, "-symbols") {
		t.Fatalf("summary %s: want failed naming -symbols", r.stdout)
	}
	r = cli(context.Background(), "-json", "-store", "postgres://nobody@127.0.0.1:1/x", "-pg-schema", "bad-name")
	if r.code != exitUsage || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q: want exit %d and exactly one line", r.code, r.stdout, exitUsage)
	}
}

// TestKeywordDSNIsPostgres: a key=value connection string is a PostgreSQL
// store, never a directory name (which would write its password into the
// file system).
func TestKeywordDSNIsPostgres(t *testing.T) {
	t.Parallel()
	dsn := "host=127.0.0.1 port=1 user=nobody password=S3cret dbname=x connect_timeout=2"
	r := cli(context.Background(), "-store", dsn, "-json")
	if r.code != exitError {
		t.Fatalf("exit %d, stdout %q, stderr %q: want an unreachable PostgreSQL (exit %d)", r.code, r.stdout, r.stderr, exitError)
	}
	if s := decodeSummary(t, r.stdout); s.Store != "postgres" {
		t.Fatalf("summary %s: want the postgres store", r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, "S3cret") {
		t.Fatalf("the password leaked: %q %q", r.stdout, r.stderr)
	}
	if _, err := os.Stat(dsn); err == nil {
		t.Fatal("a directory was made from the DSN")
	}
}

// TestTheRecordHoldsTheWholeRun: after a clean exit, the provider's record
// in the store counts every request the summary does. Before, the registry
// never saved at the end, and up to 5 s of what was learned, and the
// counters, were lost (61 requests in the summary, 55 in the record;
// found by a review).
func TestTheRecordHoldsTheWholeRun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		// 36 requests: a provider sent under 20, that learned nothing of
		// its limits, leaves no record.
		s := collectOK(t, "-store", dir, "-page", "5", "-since", time.Now().Truncate(time.Minute).Add(-3*time.Hour).Format(time.RFC3339))
		st, err := checkpoint.OpenFileStore(filepath.Join(dir, "checkpoints"), checkpoint.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		r, ok, err := st.LoadRecord(context.Background(), "sim")
		if err != nil || !ok || uint64(r.Requests) != s.Requests || s.Requests == 0 {
			t.Fatalf("record %+v (%v, %v) after a run of %d requests; want them all counted", r, ok, err, s.Requests)
		}
	})
}

// TestAnEarlierSinceIsNoticed: a later run whose -since is before the first
// candle the store holds says on stderr that those candles are not
// collected into this store. Before, it ended done without a word (found
// by a review).
func TestAnEarlierSinceIsNoticed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		now := time.Now().Truncate(time.Minute)
		collectOK(t, "-store", dir, "-since", now.Add(-2*time.Hour).Format(time.RFC3339))
		r := cli(context.Background(), "-store", dir, "-since", now.Add(-5*time.Hour).Format(time.RFC3339))
		if r.code != 0 || !strings.Contains(r.stderr, "is before the first candle stored") {
			t.Fatalf("exit %d, stderr %q: want a line saying the earlier candles are not collected", r.code, r.stderr)
		}
		r = cli(context.Background(), "-store", dir, "-since", now.Add(-2*time.Hour).Format(time.RFC3339))
		if strings.Contains(r.stderr, "is before the first candle stored") {
			t.Fatalf("the same -since again: stderr %q, want no such line", r.stderr)
		}
	})
}

// TestAProviderThatNeverAnswersFailsTheCommand: a -base-url nobody answers
// at, or one that answers with something that is not the API (an HTML
// page), fails the command (exit 1, naming the host and the cause, no
// credential), with or without -timeout: it ended "deferred" with exit
// 0 (a cron job stayed green for good), or without -timeout retried for
// ever.
func TestAProviderThatNeverAnswersFailsTheCommand(t *testing.T) {
	t.Parallel()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html><body>Welcome to nginx!</body></html>")
	}))
	defer html.Close()
	for _, base := range []string{"http://user:secret@127.0.0.1:1", html.URL} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r := cli(ctx, "-json", "-base-url", base, "-store", t.TempDir(), "-symbols", "BTCUSDT")
		cancel()
		if r.code != exitError || !strings.Contains(r.stderr, "has not answered one request as the API would") {
			t.Fatalf("%s: exit %d, stderr %q: want exit %d naming the provider", base, r.code, r.stderr, exitError)
		}
		if s := decodeSummary(t, r.stdout); s.Status != "failed" {
			t.Fatalf("%s: status %q, want failed", base, s.Status)
		}
		if strings.Contains(r.stdout+r.stderr, "secret") {
			t.Fatalf("a credential leaked: stdout %q stderr %q", r.stdout, r.stderr)
		}
	}
}
