package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/forage-go/forage/schedule"
)

// TestNoRouteAnswersJSON: a path no endpoint serves answers 404, and a
// method a path is not served for 405 with Allow, both in JSON as every
// other error of the API ({"error": …}). They were ServeMux's text/plain
// "404 page not found", which a client decoding the API's errors could
// not read.
func TestNoRouteAnswersJSON(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"GET", "/nope", http.StatusNotFound, ""},
		{"GET", "/jobs/1/nope", http.StatusNotFound, ""},
		{"DELETE", "/stats", http.StatusMethodNotAllowed, "GET"},
		{"PUT", "/jobs", http.StatusMethodNotAllowed, "GET, POST"},
		{"GET", "/connectors/a.example/pause", http.StatusMethodNotAllowed, "POST"},
	} {
		req := localRequest(tc.method, tc.path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		a.h.ServeHTTP(rec, req)
		var body struct{ Error string }
		if rec.Code != tc.code || rec.Header().Get("Content-Type") != "application/json" ||
			json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error == "" {
			t.Errorf("%s %s: %d %q %s; want %d, a JSON error", tc.method, tc.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.code)
		}
		if got := rec.Header().Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}
