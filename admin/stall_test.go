package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/schedule"
)

// stalledWriter is a client that asked for the status page and stopped
// reading it: its Write blocks until the test lets it go.
type stalledWriter struct {
	*httptest.ResponseRecorder
	writing chan struct{}
	release chan struct{}
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	close(w.writing)
	<-w.release
	return w.ResponseRecorder.Write(p)
}

// TestAStalledPageReaderBlocksNoDashboard: the status page kept the
// handler's one snapshot turn until its Write returned, so a client that
// asked for it and never read it (over HTTP/2, a small receive window; a
// stuck tab) blocked GET /stats, GET /providers and every later page for
// as long as its connection lived (net/http has no WriteTimeout by
// default), and a waiter whose context ended got a 500 (found by a
// review). The page is rendered in turn and written after it.
func TestAStalledPageReaderBlocksNoDashboard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSched(t, schedule.Config{}, nil)
		h := handler(t, s)
		stalled := &stalledWriter{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: make(chan struct{})}
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(stalled, localRequest("GET", "/", nil))
		}()
		<-stalled.writing // the page is rendered; its client reads nothing
		for _, path := range []string{"/stats", "/providers", "/connectors", "/"} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			rec := send(h, localRequest("GET", path, nil).WithContext(ctx))
			cancel()
			if rec.Code != http.StatusOK {
				t.Errorf("GET %s while another client stalls on the page: %d %s; want 200", path, rec.Code, rec.Body)
			}
		}
		close(stalled.release)
		<-done
	})
}
