package main

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/providertest"
)

// An exchange that leaves quiet intervals out (not a lie) and a -since
// that falls on one: the first page starts late, and the confirmation
// shows the candle before -since (never stored: it is before -since). A
// run that stopped right there (-max-requests 2) committed a checkpoint
// whose shown candle was that one, and every later run refused to start:
// the store looked corrupt.
func TestAQuietSinceOnASparseExchangeResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := liar(t, providertest.Config{Sparse: true})
		dir := t.TempDir()
		since := time.Now().Truncate(time.Minute).Add(-24 * time.Hour).Add(-time.Minute)
		r := cliIn(e, "-store", dir, "-since", since.Format(time.RFC3339), "-max-requests", "2", "-json")
		t.Logf("run 1: exit %d stdout %s stderr %q", r.code, r.stdout, r.stderr)
		r = cliIn(e, "-store", dir, "-since", since.Format(time.RFC3339), "-json")
		t.Logf("run 2: exit %d stdout %s stderr %q", r.code, r.stdout, r.stderr)
		if r.code != 0 {
			t.Fatalf("second run exit %d: want it to resume and finish", r.code)
		}
	})
}

// The same without a stop: a window [since, until) of settled history
// with no candle (a quiet minute) is done, and the next run over the same
// store failed.
func TestAQuietWindowDoneIsDoneAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := liar(t, providertest.Config{Sparse: true})
		dir := t.TempDir()
		until := time.Now().Truncate(time.Minute).Add(-time.Hour) // an even minute
		since := until.Add(-time.Minute)                          // odd: quiet
		args := []string{"-store", dir, "-since", since.Format(time.RFC3339), "-until", until.Format(time.RFC3339), "-json"}
		r := cliIn(e, args...)
		t.Logf("run 1: exit %d stdout %s stderr %q", r.code, r.stdout, r.stderr)
		r = cliIn(e, args...)
		t.Logf("run 2: exit %d stdout %s stderr %q", r.code, r.stdout, r.stderr)
		if r.code != 0 {
			t.Fatalf("second run exit %d: want done again", r.code)
		}
	})
}
