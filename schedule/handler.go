package schedule

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Handler returns the admin API and status page of s, an [http.Handler]
// rooted at "/"; mount it under a prefix with [http.StripPrefix], e.g.
// mux.Handle("/api/v1/", http.StripPrefix("/api/v1", s.Handler())).
//
//	GET    /                        HTML status page (providers, rates, breakers, jobs by state)
//	GET    /stats                   the Snapshot as JSON
//	GET    /providers               providers with their budget snapshot
//	POST   /providers/{name}/pause  pause a provider in this scheduler
//	POST   /providers/{name}/resume resume it
//	GET    /jobs                    list: ?provider= &kind= &state= &stream= &after= &limit= (≤ 1000, default 100)
//	POST   /jobs                    upsert {"provider","kind","stream","priority","interval_ms","payload","next_run"}; 201 if created
//	GET    /jobs/{id}               one job
//	DELETE /jobs/{id}               delete; 204
//	POST   /jobs/{id}/pause         pause
//	POST   /jobs/{id}/resume        resume
//	POST   /jobs/{id}/run           run now; 409 while it runs
//
// Errors are JSON, {"error": "...", "field": "..."}: 400 for invalid input,
// naming the field; 404 for an unknown job; 409 for run-now on a running
// job; 500 for a store failure. The handler is safe for concurrent use.
func (s *Scheduler) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveStatus)
	mux.HandleFunc("GET /stats", s.serveStats)
	mux.HandleFunc("GET /providers", s.serveProviders)
	mux.HandleFunc("POST /providers/{name}/pause", s.serveProviderPause(true))
	mux.HandleFunc("POST /providers/{name}/resume", s.serveProviderPause(false))
	mux.HandleFunc("GET /jobs", s.serveList)
	mux.HandleFunc("POST /jobs", s.serveUpsert)
	mux.HandleFunc("GET /jobs/{id}", s.serveJob(func(r *http.Request, id int64) (Job, error) { return s.Job(r.Context(), id) }))
	mux.HandleFunc("DELETE /jobs/{id}", s.serveDelete)
	mux.HandleFunc("POST /jobs/{id}/pause", s.serveJob(func(r *http.Request, id int64) (Job, error) { return s.Pause(r.Context(), id) }))
	mux.HandleFunc("POST /jobs/{id}/resume", s.serveJob(func(r *http.Request, id int64) (Job, error) { return s.Resume(r.Context(), id) }))
	mux.HandleFunc("POST /jobs/{id}/run", s.serveJob(func(r *http.Request, id int64) (Job, error) { return s.RunNow(r.Context(), id) }))
	return mux
}

// maxBody caps a request body: a payload of 1 MiB, base64, plus the rest.
const maxBody = 2 << 20

// jobJSON is a job on the wire.
type jobJSON struct {
	ID         int64      `json:"id"`
	Provider   string     `json:"provider"`
	Kind       Kind       `json:"kind"`
	Stream     string     `json:"stream"`
	Priority   int        `json:"priority"`
	IntervalMS int64      `json:"interval_ms"`
	Payload    []byte     `json:"payload,omitempty"`
	State      State      `json:"state"`
	NextRun    time.Time  `json:"next_run,omitzero"`
	Stats      statsJSON  `json:"stats"`
	Lease      *leaseJSON `json:"lease,omitempty"`
	Version    int64      `json:"version"`
	Created    time.Time  `json:"created,omitzero"`
	Updated    time.Time  `json:"updated,omitzero"`
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

func toJSON(j Job) jobJSON {
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
	Provider   string    `json:"provider"`
	Kind       Kind      `json:"kind"`
	Stream     string    `json:"stream"`
	Priority   int       `json:"priority"`
	IntervalMS int64     `json:"interval_ms"`
	Payload    string    `json:"payload"` // base64
	NextRun    time.Time `json:"next_run"`
}

// wireField names, in the API's terms, the fields of argErrors.
var wireField = map[string]string{
	"Spec.Provider": "provider", "Spec.Kind": "kind", "Spec.Stream": "stream",
	"Spec.Priority": "priority", "Spec.Interval": "interval_ms", "Spec.Payload": "payload",
	"Query.Kind": "kind", "Query.State": "state", "Query.After": "after", "Query.Limit": "limit",
	"id": "id",
}

func (s *Scheduler) serveUpsert(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	var in specJSON
	if err := dec.Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, decodeField(err), fmt.Errorf("schedule: invalid JSON body: %w", err))
		return
	}
	if in.IntervalMS < 0 || in.IntervalMS > int64(100*365*24*time.Hour/time.Millisecond) {
		writeError(w, http.StatusBadRequest, "interval_ms", invalid("interval_ms", "must be in [0, 100 years]", in.IntervalMS))
		return
	}
	payload, err := base64.StdEncoding.DecodeString(in.Payload)
	if err != nil {
		writeError(w, http.StatusBadRequest, "payload", invalid("payload", "must be base64", err))
		return
	}
	if len(payload) == 0 {
		payload = nil
	}
	j, err := s.Upsert(r.Context(), Spec{
		Provider: in.Provider, Kind: in.Kind, Stream: in.Stream, Priority: in.Priority,
		Interval: time.Duration(in.IntervalMS) * time.Millisecond, Payload: payload, NextRun: in.NextRun,
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	code := http.StatusOK
	if j.Version == 1 {
		code = http.StatusCreated
	}
	writeJSON(w, code, toJSON(j))
}

// decodeField names the field a JSON decoding error is about, if any.
func decodeField(err error) string {
	var te *json.UnmarshalTypeError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &te):
		return te.Field
	case errors.As(err, &mb):
		return "body"
	}
	const unknown = `json: unknown field "`
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		return strings.TrimSuffix(strings.TrimPrefix(msg, unknown), `"`)
	}
	return "body"
}

func (s *Scheduler) serveList(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := Query{Provider: v.Get("provider"), Kind: Kind(v.Get("kind")), State: State(v.Get("state")), Stream: v.Get("stream")}
	var ok bool
	if q.After, ok = queryInt(w, v.Get("after"), "after", 1<<63-1, 0); !ok {
		return
	}
	limit, ok := queryInt(w, v.Get("limit"), "limit", 1000, 100)
	if !ok {
		return
	}
	q.Limit = int(limit)
	jobs, err := s.Jobs(r.Context(), q)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]jobJSON, len(jobs))
	for i, j := range jobs {
		out[i] = toJSON(j)
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
}

// queryInt parses the query parameter name (raw; def if empty) as an
// integer in [0, max], answering 400 if it is not one.
func queryInt(w http.ResponseWriter, raw, name string, max, def int64) (int64, bool) {
	if raw == "" {
		return def, true
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 || n > max {
		writeError(w, http.StatusBadRequest, name, invalid(name, fmt.Sprintf("must be an integer in [0, %d]", max), strconv.Quote(raw)))
		return 0, false
	}
	return n, true
}

// serveJob serves an endpoint that acts on the job named by {id}.
func (s *Scheduler) serveJob(act func(r *http.Request, id int64) (Job, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := pathID(w, r)
		if !ok {
			return
		}
		j, err := act(r, id)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, toJSON(j))
	}
}

func (s *Scheduler) serveDelete(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	if err := s.Delete(r.Context(), id); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pathID parses {id}, answering 400 if it is not a positive integer.
func pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "id", invalid("id", "must be a positive integer", strconv.Quote(raw)))
		return 0, false
	}
	return id, true
}

func (s *Scheduler) serveProviderPause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if name == "" || len(name) > maxNameLen {
			writeError(w, http.StatusBadRequest, "name", invalid("name", fmt.Sprintf("must be 1..%d bytes", maxNameLen), len(name)))
			return
		}
		if pause {
			s.PauseProvider(name)
		} else {
			s.ResumeProvider(name)
		}
		writeJSON(w, http.StatusOK, map[string]any{"provider": name, "paused": pause})
	}
}

func (s *Scheduler) serveStats(w http.ResponseWriter, r *http.Request) {
	snap, err := s.Snapshot(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Scheduler) serveProviders(w http.ResponseWriter, r *http.Request) {
	snap, err := s.Snapshot(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"providers": snap.Providers})
}

// writeErr answers err with the status its sentinel calls for.
func writeErr(w http.ResponseWriter, err error) {
	var ae *argError
	switch {
	case errors.As(err, &ae):
		field := wireField[ae.field]
		writeError(w, http.StatusBadRequest, field, err)
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, "", err)
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "id", err)
	case errors.Is(err, ErrRunning):
		writeError(w, http.StatusConflict, "", err)
	default:
		writeError(w, http.StatusInternalServerError, "", err)
	}
}

// writeError answers {"error": err, "field": field} with code.
func writeError(w http.ResponseWriter, code int, field string, err error) {
	body := map[string]string{"error": err.Error()}
	if field != "" {
		body["field"] = field
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
