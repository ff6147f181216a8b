package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/forage-go/forage/schedule"
)

// This file holds the admin handler's bounds: the cap on the jobs it
// creates and the paging of GET /jobs.

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
	same, err := h.s.Jobs(ctx, schedule.Query{Provider: spec.Provider, Kind: spec.Kind, Stream: spec.Stream, Limit: 1})
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
		page, err := h.s.Jobs(ctx, q)
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
	var encErr error
	more, err := h.page(r.Context(), q, int(limit), func(j schedule.Job) bool {
		enc, err := json.Marshal(toJSON(j))
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
		jobs, err := h.s.Jobs(ctx, q)
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
