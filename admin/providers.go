package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/redact"
	"github.com/forage-go/forage/schedule"
)

// This file holds the admin handler's provider endpoints and their bounds:
// a provider is paused only if the scheduler knows it, the paused set is
// capped, and GET /providers is paged like GET /jobs; GET /stats too.

// The provider bounds of the admin handler.
const (
	defaultMaxPaused         = 1000
	defaultProviderListLimit = 100  // providers per GET /providers page when ?limit= is absent
	maxProviderListLimit     = 1000 // the largest ?limit=
	maxShown                 = 100  // providers GET /stats and the status page show, and the history keeps: the first by name
)

// errTooManyPaused refuses a pause over Config.MaxPausedProviders.
var errTooManyPaused = errors.New("admin: Config.MaxPausedProviders providers are paused")

// serveProviderPause serves POST /providers/{name}/pause (pause true) and
// /resume: 400 for a name that breaks the name rule, 404 for a provider
// the scheduler does not know, 409 for a pause over MaxPausedProviders.
func (h *Handler) serveProviderPause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := checkName(name); err != nil {
			writeError(w, http.StatusBadRequest, "name", err)
			return
		}
		known, err := h.knows(r.Context(), name)
		if err != nil {
			writeErr(w, err)
			return
		}
		if !known {
			writeError(w, http.StatusNotFound, "name", fmt.Errorf(
				"admin: provider %q is unknown: it has no job, is not paused and is not in the budget registry", redact.Clip(name, 64)))
			return
		}
		switch {
		case !pause:
			h.s.SetProviderPaused(name, false)
		case !h.pauseProvider(name):
			writeError(w, http.StatusConflict, "", fmt.Errorf("%w (%d): resume some, or raise the cap", errTooManyPaused, h.cfg.MaxPausedProviders))
			return
		}
		out := map[string]any{"provider": name, "paused": pause}
		if reg := h.s.Budget(); reg != nil {
			if p, ok := reg.Lookup(name); ok {
				if snap := p.Snapshot(); snap.Status == budget.StatusPaused {
					// Paused as a connector too, in every process: this
					// pause's resume leaves that one in force. (Answered
					// "paused": false alone, an operator read a provider
					// that stayed paused as resumed.)
					out["connector_status"] = snap.Status
					out["note"] = "the connector is paused in every process: POST /connectors/{key}/resume resumes it"
				}
			}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// checkName applies the name rule of every store
// ([checkpoint.CheckName]) to the provider name of a path, answering in
// this package's terms: "admin: invalid argument: name <why> (got <q>)".
func checkName(name string) error { return checkNameAs("name", name) }

// checkNameAs is [checkName] for the request's field.
func checkNameAs(field, name string) error {
	err := checkpoint.CheckName(field, name)
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), checkpoint.ErrInvalid.Error()+": "+field+" ")
	rule, got, ok := strings.Cut(msg, " (got ")
	if !ok {
		return invalid(field, msg, "?")
	}
	return invalid(field, rule, strings.TrimSuffix(got, ")"))
}

// pauseProvider pauses provider unless that would make more than
// MaxPausedProviders paused; it reports whether provider is paused. The
// handler's mutex orders its own pauses, so concurrent requests cannot pass
// the cap together.
func (h *Handler) pauseProvider(provider string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	paused := h.s.PausedProviders()
	if _, ok := slices.BinarySearch(paused, provider); !ok && len(paused) >= h.cfg.MaxPausedProviders {
		return false
	}
	h.s.SetProviderPaused(provider, true)
	return true
}

// knows reports whether the scheduler knows provider: it is paused there,
// it is in the budget registry ([schedule.Config.Budget]) or the
// registry's record store keeps its record (shared with the processes
// that call it: an admin process that calls nothing itself dropped it as
// idle and answered its pause 404), or the store holds a job of it. These are the providers a [schedule.Snapshot] lists
// (with those cooling down, which have jobs). Only known providers are
// paused or steered, so that names taken from requests cannot grow the
// paused set or the registry without bound. It reads the store (one List
// of at most one job).
func (h *Handler) knows(ctx context.Context, provider string) (bool, error) {
	if _, ok := slices.BinarySearch(h.s.PausedProviders(), provider); ok {
		return true, nil
	}
	if reg := h.s.Budget(); reg != nil {
		if ok, err := reg.Known(ctx, provider); ok || err != nil {
			return ok, err
		}
	}
	jobs, err := h.s.Store().List(ctx, schedule.Query{Provider: provider, Limit: 1})
	return len(jobs) > 0, err
}

// snapshot is the scheduler's snapshot now, its providers the first limit
// named after after, taken in turn (see Handler.turn).
func (h *Handler) snapshot(ctx context.Context, after string, limit int) (schedule.Snapshot, error) {
	release, err := h.turn(ctx)
	if err != nil {
		return schedule.Snapshot{}, err
	}
	defer release()
	now := time.Now()
	snap, err := h.s.SnapshotPage(ctx, now, after, limit)
	for _, p := range snap.Providers {
		if b := p.Budget; b != nil {
			b.Why = plainWhy(b.Why) // an operator's reason set by the host's code, unredacted
			// A pause or turns that ended are no longer in force: shown,
			// a past end read as a wake-up still to come.
			if !b.PausedUntil.After(now) {
				b.PausedUntil, b.PauseReason = time.Time{}, ""
			}
			if !b.TurnsUntil.After(now) {
				b.TurnsUntil = time.Time{}
			}
		}
	}
	return snap, err
}

// turn waits for the turn to read the whole store, and returns the func
// that ends it. A snapshot reads every job, holding a batch of them
// (payloads of up to 1 MiB each) at once, so concurrent dashboard requests
// take turns rather than multiply the memory they hold. A request that
// gives up waiting gets its context's error.
func (h *Handler) turn(ctx context.Context) (release func(), err error) {
	select {
	case h.scan <- struct{}{}:
		return func() { <-h.scan }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// serveProviders serves GET /providers: {"providers": […], "next": "…"},
// at most ?limit= providers named after ?after=, in name order, within
// MaxPageBytes (but at least one); "next", present when more are left, is
// the ?after= of the next page.
func (h *Handler) serveProviders(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	after := v.Get("after")
	limit, ok := queryInt(w, v.Get("limit"), "limit", maxProviderListLimit, defaultProviderListLimit)
	if !ok {
		return
	}
	snap, err := h.snapshot(r.Context(), after, int(limit))
	if err != nil {
		writeErr(w, err)
		return
	}
	var buf bytes.Buffer
	buf.WriteString(`{"providers":[`)
	n := 0
	for _, p := range snap.Providers {
		enc, err := json.Marshal(p)
		if err != nil {
			writeErr(w, fmt.Errorf("admin: provider %q cannot be written as JSON: %w", redact.Clip(p.Provider, 64), err))
			return
		}
		if n > 0 && buf.Len()+len(enc)+len(p.Provider)*6+32 > h.cfg.MaxPageBytes { // the tail and "next", escaped
			break
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(enc)
		n++
	}
	buf.WriteByte(']')
	if n < len(snap.Providers) || snap.MoreProviders > 0 {
		last := after // an empty page (?limit=0) moves on from where it was
		if n > 0 {
			last = snap.Providers[n-1].Provider
		}
		next, _ := json.Marshal(last)
		fmt.Fprintf(&buf, `,"next":%s`, next)
	}
	buf.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(buf.Bytes())
}

func (h *Handler) serveStats(w http.ResponseWriter, r *http.Request) {
	snap, err := h.snapshot(r.Context(), "", maxShown)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}
