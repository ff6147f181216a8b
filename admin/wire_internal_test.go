package admin

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWriteJSONRefusesWhatJSONCannotHold: a value JSON cannot encode (a
// NaN rate from a host's own Provider) is a 500 with an error body; before,
// the status went out first and the body was empty (a 200 with nothing).
func TestWriteJSONRefusesWhatJSONCannotHold(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]float64{"rate": math.NaN()})
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); rec.Code != http.StatusInternalServerError || err != nil || body["error"] == "" {
		t.Fatalf("got %d %q (%v); want 500 with an error body", rec.Code, rec.Body.String(), err)
	}
	ok := httptest.NewRecorder()
	writeJSON(ok, http.StatusCreated, map[string]int{"n": 1})
	if ok.Code != http.StatusCreated || ok.Body.String() != "{\"n\":1}\n" {
		t.Fatalf("got %d %q; want 201 {\"n\":1}", ok.Code, ok.Body.String())
	}
}
