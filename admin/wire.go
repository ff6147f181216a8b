package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/forage-go/forage/internal/argerr"
	"github.com/forage-go/forage/internal/redact"
	"github.com/forage-go/forage/schedule"
)

// This file holds the wire format: jobs as JSON, and errors as JSON with
// their status and their secrets redacted.

// jobJSON is a job on the wire.
type jobJSON struct {
	ID         int64          `json:"id"`
	Provider   string         `json:"provider"`
	Kind       schedule.Kind  `json:"kind"`
	Stream     string         `json:"stream"`
	Priority   int            `json:"priority"`
	IntervalMS int64          `json:"interval_ms"`
	Payload    []byte         `json:"payload,omitempty"`
	State      schedule.State `json:"state"`
	NextRun    time.Time      `json:"next_run,omitzero"`
	// Waiting says, for a job that is due (its NextRun has passed) but
	// has not started, what holds it back: GET /jobs sets it.
	Waiting string     `json:"waiting,omitempty"`
	Stats   statsJSON  `json:"stats"`
	Lease   *leaseJSON `json:"lease,omitempty"`
	Version int64      `json:"version"`
	Created time.Time  `json:"created,omitzero"`
	Updated time.Time  `json:"updated,omitzero"`
}

// statsJSON is a job's Stats on the wire.
type statsJSON struct {
	Runs        int64     `json:"runs"`
	Successes   int64     `json:"successes"`
	Failures    int64     `json:"failures"`
	Streak      int       `json:"streak"`
	LastError   string    `json:"last_error,omitempty"`
	LastRun     time.Time `json:"last_run,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
}

// toJSON is j on the wire, its last error redacted again (a store may hold
// one written before redaction existed).
func toJSON(j schedule.Job) jobJSON {
	j.Stats.LastError = cleanError(j.Stats.LastError)
	out := jobJSON{
		ID: j.ID, Provider: j.Provider, Kind: j.Kind, Stream: j.Stream, Priority: j.Priority,
		IntervalMS: j.Interval.Milliseconds(), Payload: j.Payload, State: j.State, NextRun: j.NextRun,
		Stats:   statsJSON(j.Stats),
		Version: j.Version, Created: j.Created, Updated: j.Updated,
	}
	if j.Lease.Owner != "" {
		out.Lease = &leaseJSON{Owner: j.Lease.Owner, Until: j.Lease.Until}
	}
	return out
}

// leaseJSON is a job's Lease on the wire.
type leaseJSON struct {
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
}

// specJSON is the body of POST /jobs.
type specJSON struct {
	Provider   string        `json:"provider"`
	Kind       schedule.Kind `json:"kind"`
	Stream     string        `json:"stream"`
	Priority   int           `json:"priority"`
	IntervalMS int64         `json:"interval_ms"`
	Payload    string        `json:"payload"` // base64
	NextRun    time.Time     `json:"next_run"`
}

// wireField names, in the API's terms, the fields of argErrors.
var wireField = map[string]string{
	"Spec.Provider": "provider", "Spec.Kind": "kind", "Spec.Stream": "stream",
	"Spec.Priority": "priority", "Spec.Interval": "interval_ms", "Spec.Payload": "payload",
	"Query.Kind": "kind", "Query.State": "state", "Query.After": "after", "Query.Limit": "limit",
	"id": "id",
}

// writeErr answers err with the status its sentinel calls for.
func writeErr(w http.ResponseWriter, err error) {
	field, named := argerr.Field(err)
	switch {
	case named:
		writeError(w, http.StatusBadRequest, wireField[field], err)
	case errors.Is(err, schedule.ErrInvalid):
		writeError(w, http.StatusBadRequest, "", err)
	case errors.Is(err, schedule.ErrNotFound):
		writeError(w, http.StatusNotFound, "id", err)
	case errors.Is(err, schedule.ErrRunning):
		writeError(w, http.StatusConflict, "", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, "", err) // the client gave up waiting its turn: no fault of ours
	default:
		writeError(w, http.StatusInternalServerError, "", err)
	}
}

// cleanError is a stored error message as the handler serves it: every URL
// redacted, at most maxLastError bytes.
func cleanError(msg string) string { return redact.Clip(redact.String(msg), maxLastError) }

// maxLastError caps a served last error, in bytes: the scheduler stores at
// most 2 KiB, but a store may hold a longer one written by other means.
const maxLastError = 2048

// writeError answers {"error": err, "field": field} with code; URLs in the
// message are redacted (a store's error may name its DSN).
func writeError(w http.ResponseWriter, code int, field string, err error) {
	body := map[string]string{"error": redact.String(err.Error())}
	if field != "" {
		body["field"] = field
	}
	writeJSON(w, code, body)
}

// writeJSON answers v as JSON with code. A value JSON cannot hold (a NaN
// a host's own Provider reported) is a 500 that says so, not a 200 with an
// empty body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		body, _ = json.Marshal(map[string]string{"error": "admin: the answer cannot be encoded as JSON: " + redact.String(err.Error())})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// decodeOne decodes the one JSON value a body holds into v, unknown fields
// refused: anything after it (a second object, stray text) is an error, not
// silently ignored.
func decodeOne(r io.Reader, v any) error {
	body, err := io.ReadAll(r) // bounded by ServeHTTP
	if err != nil {
		return err
	}
	if err := plainFields(body, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("admin: a body holds one JSON object, with nothing after it")
	}
	return nil
}

// fieldError is a body's field named twice, or spelled otherwise than its
// name: encoding/json matches names without regard to case (Unicode's:
// "ſtatus", with a long s, is status) and keeps the last of duplicates,
// so an audit log, a proxy or an Authorize hook that reads the body as a
// map would take {"key":"a","KEY":"b"} for a change of a, and the
// handler would make it to b.
type fieldError struct{ field, why string }

func (e *fieldError) Error() string {
	return fmt.Sprintf("admin: invalid argument: %s %s", e.field, e.why)
}

// plainFields checks the top-level object of body: no field named twice
// (without regard to case, folded as encoding/json folds names), and each
// of v's fields spelled as its JSON name. Anything else is left to the
// decoder.
func plainFields(body []byte, v any) error {
	names := map[string]string{} // lower case -> the name as spelled
	if t := reflect.TypeOf(v); t != nil && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		for i := range t.Elem().NumField() {
			if name, _, _ := strings.Cut(t.Elem().Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
				names[foldName(name)] = name
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // not an object: the decoder says why
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		low := foldName(key)
		if seen[low] {
			return &fieldError{key, "is given twice"}
		}
		seen[low] = true
		if name, ok := names[low]; ok && name != key {
			return &fieldError{key, fmt.Sprintf("must be spelled %q", name)}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// foldName is name with each letter its case class's smallest, as
// encoding/json folds a field name to match it to a struct's: two names
// fold alike exactly when the decoder takes them for the same field.
// strings.ToLower is not that fold: it leaves "ſ" (U+017F) and "ſtatus"
// set Status, unseen by the check of names given twice.
func foldName(name string) string {
	return strings.Map(func(r rune) rune {
		for {
			next := unicode.SimpleFold(r)
			if next <= r {
				return next
			}
			r = next
		}
	}, name)
}
