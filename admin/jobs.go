package admin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/forage-go/forage/schedule"
)

// This file holds the job endpoints and their bounds: the cap on the jobs
// POST /jobs creates and the paging of GET /jobs.

// errTooManyJobs refuses a creation over Config.MaxJobs.
var errTooManyJobs = errors.New("admin: the store holds Config.MaxJobs jobs")

// upsert upserts spec unless it would create a job while the store holds
// MaxJobs already.
func (h *Handler) upsert(ctx context.Context, spec schedule.Spec) (schedule.Job, error) {
	if err := spec.Validate(); err != nil {
		return schedule.Job{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	same, err := h.s.Store().List(ctx, schedule.Query{Provider: spec.Provider, Kind: spec.Kind, Stream: spec.Stream, Limit: 1})
	if err != nil {
		return schedule.Job{}, err
	}
	if len(same) == 0 {
		n, err := h.jobs(ctx)
		if err != nil {
			return schedule.Job{}, err
		}
		if n >= h.cfg.MaxJobs {
			return schedule.Job{}, fmt.Errorf("%w (%d): delete some, or raise the cap", errTooManyJobs, h.cfg.MaxJobs)
		}
	}
	return h.s.Upsert(ctx, spec)
}

// jobs returns how many jobs the store holds, or MaxJobs if at least that
// many.
func (h *Handler) jobs(ctx context.Context) (int, error) {
	if h.count != nil {
		return h.count.Count(ctx)
	}
	n := 0
	for q := (schedule.Query{Limit: countBatch}); n < h.cfg.MaxJobs; {
		page, err := h.s.Store().List(ctx, q)
		if err != nil || len(page) == 0 {
			return n, err
		}
		n += len(page)
		q.After = page[len(page)-1].ID
	}
	return n, nil
}

func (h *Handler) serveList(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := schedule.Query{Provider: v.Get("provider"), Kind: schedule.Kind(v.Get("kind")), State: schedule.State(v.Get("state")), Stream: v.Get("stream")}
	var ok bool
	if q.After, ok = queryInt(w, v.Get("after"), "after", 1<<63-1, 0); !ok {
		return
	}
	limit, ok := queryInt(w, v.Get("limit"), "limit", maxListLimit, defaultListLimit)
	if !ok {
		return
	}
	var buf bytes.Buffer
	buf.WriteString(`{"jobs":[`)
	n, last := 0, q.After
	var encErr, waitErr error
	waits := h.newWaits(time.Now(), nil)
	var release func() // the turn to read a provider's jobs, taken when a due job first needs it
	defer func() {
		if release != nil {
			release()
		}
	}()
	more, err := h.page(r.Context(), q, int(limit), func(j schedule.Job) bool {
		out := toJSON(j)
		if due(&j, waits.now) {
			if release == nil {
				if release, waitErr = h.turn(r.Context()); waitErr != nil {
					return false
				}
			}
			if out.Waiting, waitErr = waits.of(r.Context(), &j); waitErr != nil {
				return false
			}
		}
		enc, err := json.Marshal(out)
		if err != nil {
			encErr = fmt.Errorf("admin: job %d cannot be written as JSON: %w", j.ID, err)
			return false
		}
		if n > 0 && buf.Len()+len(enc)+32 > h.cfg.MaxPageBytes { // 32: the tail and "next"
			return false
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(enc)
		n, last = n+1, j.ID
		return true
	})
	if err == nil && n == 0 {
		err = encErr // a page must move on: a job it cannot write fails the request
	}
	if err == nil {
		err = waitErr
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	buf.WriteByte(']')
	if more {
		fmt.Fprintf(&buf, `,"next":%d`, last)
	}
	buf.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(buf.Bytes())
}

// page calls take with the jobs matching q, in ID order, until limit were
// taken, take refuses one or none is left; it reports whether matching jobs
// may be left. It reads the store listBatch jobs at a time, so the jobs it
// holds in memory are bounded whatever limit is.
func (h *Handler) page(ctx context.Context, q schedule.Query, limit int, take func(schedule.Job) bool) (more bool, err error) {
	for n := 0; ; {
		q.Limit = min(limit-n+1, listBatch) // one more than needed tells whether more are left
		jobs, err := h.s.Store().List(ctx, q)
		if err != nil {
			return false, err
		}
		for _, j := range jobs {
			if n == limit || !take(j) {
				return true, nil
			}
			n++
		}
		if len(jobs) < q.Limit {
			return false, nil
		}
		q.After = jobs[len(jobs)-1].ID
	}
}

func (h *Handler) serveUpsert(w http.ResponseWriter, r *http.Request) {
	var in specJSON
	if err := decodeOne(r.Body, &in); err != nil { // bounded by ServeHTTP
		code := http.StatusBadRequest
		if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
			code = http.StatusRequestEntityTooLarge
		}
		writeError(w, code, decodeField(err), fmt.Errorf("admin: invalid JSON body: %w", err))
		return
	}
	if in.IntervalMS < 0 || in.IntervalMS > int64(100*365*24*time.Hour/time.Millisecond) {
		writeError(w, http.StatusBadRequest, "interval_ms", invalid("interval_ms", "must be in [0, 100 years]", in.IntervalMS))
		return
	}
	if !in.NextRun.IsZero() && in.NextRun.After(time.Now().Add(100*365*24*time.Hour)) {
		// A job that never runs, and an upsert never moves a job's
		// schedule: posting the spec again would not mend it.
		writeError(w, http.StatusBadRequest, "next_run", invalid("next_run", "must be within 100 years", in.NextRun.UTC().Format(time.RFC3339)))
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
	j, err := h.upsert(r.Context(), schedule.Spec{
		Provider: in.Provider, Kind: in.Kind, Stream: in.Stream, Priority: in.Priority,
		Interval: time.Duration(in.IntervalMS) * time.Millisecond, Payload: payload, NextRun: in.NextRun,
	})
	if errors.Is(err, errTooManyJobs) {
		writeError(w, http.StatusConflict, "", err)
		return
	}
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
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		return fe.field
	case errors.As(err, &te) && te.Field != "":
		return te.Field // "" when the body is no object at all ([1,2]): the body
	case errors.As(err, &mb):
		return "body"
	}
	const unknown = `json: unknown field "`
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		return strings.TrimSuffix(strings.TrimPrefix(msg, unknown), `"`)
	}
	return "body"
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

// setPaused returns the act of pausing (paused true) or resuming a job of s.
func setPaused(s *schedule.Scheduler, paused bool) func(ctx context.Context, id int64) (schedule.Job, error) {
	return func(ctx context.Context, id int64) (schedule.Job, error) { return s.SetPaused(ctx, id, paused) }
}

// serveJob serves an endpoint that acts on the job named by {id}.
func serveJob(act func(ctx context.Context, id int64) (schedule.Job, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := pathID(w, r)
		if !ok {
			return
		}
		j, err := act(r.Context(), id)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, toJSON(j))
	}
}

func (h *Handler) serveDelete(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	if err := h.s.Delete(r.Context(), id); err != nil {
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
