package admin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/redact"
)

// This file holds the connector endpoints: one connector per provider key
// of the scheduler's budget registry, shown with its state and recent
// rates, and steered through [budget.Registry.SetStatus], so an operator's
// pause holds in every process that shares the provider records and for
// every call (the scheduler's runs, direct Do calls, the Transport).

// connectorJSON is a connector on the wire.
type connectorJSON struct {
	Key string `json:"key"`
	// Source is where the figures come from: "process" for a provider
	// this process holds, live; "record" for one that only the shared
	// record store knows here (other processes call it, or this one
	// dropped it as idle). A record's connector has the record's status,
	// rate, ceiling and pause as saved at Updated, Requests and the
	// refused and error shares over every process that saved it (WindowS
	// 0), and no per-process fields (phase, breaker, in flight, shares).
	Source  string    `json:"source"`
	Updated time.Time `json:"updated,omitzero"`
	// Status is the operator's status in force here ("active" or
	// "paused"), Why the reason given with it.
	Status string `json:"status"`
	Why    string `json:"why,omitempty"`
	// Rate is the pacing rate now and Ceiling the learned (or declared)
	// one, requests/s; Phase is the controller's. Rate is not bounded by
	// Ceiling: for a provider whose headers announce a quota window, it is
	// what they say is left spread over the time to the reset, far above
	// the ceiling near the reset of a window little used; RateNote then
	// says so.
	Rate     float64 `json:"rate"`
	Ceiling  float64 `json:"ceiling"`
	Phase    string  `json:"phase"`
	RateNote string  `json:"rate_note,omitempty"`
	Breaker  string  `json:"breaker"`
	// PausedUntil and PauseReason are the pause the provider asked for
	// (Retry-After, a ban, a spent quota), while it is in force.
	PausedUntil time.Time     `json:"paused_until,omitzero"`
	PauseReason forage.Reason `json:"pause_reason,omitempty"`
	Limits      []limitJSON   `json:"limits,omitempty"`
	InFlight    int64         `json:"in_flight"`
	Requests    uint64        `json:"requests"`
	// WindowS is how many seconds the figures below cover: up to a
	// minute of samples, or 0 for everything since the provider was made
	// (no earlier sample), when SentPerS and Saturation are unknown.
	WindowS    float64  `json:"window_s"`
	SentPerS   *float64 `json:"sent_per_s,omitempty"` // attempts sent per second
	Saturation *float64 `json:"saturation,omitempty"` // SentPerS ÷ (Rate × Share): near 1, the provider's budget is the bottleneck
	Refused    float64  `json:"refused"`              // share of the attempts refused for rate (429, 418)
	Errors     float64  `json:"errors"`               // share of the attempts that failed otherwise (503, other 5xx, timeouts, other 4xx)
	// Share is the part of Rate this process paces at (1 unless the
	// provider is shared among processes, see budget.Config.Shares), and
	// Shares every sharing process's lease, as of this process's last
	// renewal.
	Share  float64     `json:"share"`
	Shares []shareJSON `json:"shares,omitempty"`
	// TurnsUntil is, while the sharing processes take turns (they
	// collided), when the turns end.
	TurnsUntil time.Time `json:"turns_until,omitzero"`
}

// shareJSON is one process's lease on a shared provider.
type shareJSON struct {
	Holder  string    `json:"holder"` // host-pid-random
	Share   float64   `json:"share"`
	Expires time.Time `json:"expires"`
}

// limitJSON is a known limit's usage on the wire.
type limitJSON struct {
	Name      string    `json:"name,omitempty"`
	Count     int       `json:"count"`
	PerMS     int64     `json:"per_ms"`
	Used      int       `json:"used"`
	Remaining int       `json:"remaining"`
	Reset     time.Time `json:"reset,omitzero"`
}

// aboveCeiling is how far over the learned ceiling a rate must be for
// the connector to explain it (a probe for a grown limit is just over it).
const aboveCeiling = 1.1

// rateAboveCeiling explains a rate far above the learned ceiling: side by
// side, "rate 188 / ceiling 1.9" read as a contradiction (a user journey,
// at the end of a quota window).
const rateAboveCeiling = "the rate is above the learned ceiling: it spends what the provider's quota headers say is left until their reset (or probes for a grown limit); the ceiling is where refusals began"

// connectorOf is b at now on the wire, its rates read from hist (oldest
// first) over the last rateWindow.
func connectorOf(now time.Time, b budget.Snapshot, hist []sample) connectorJSON {
	c := connectorJSON{
		Key: b.Key, Source: sourceProcess, Status: b.Status, Why: plainWhy(b.Why), Rate: b.Rate, Ceiling: b.Ceiling,
		Phase: b.Phase, Breaker: b.Breaker, InFlight: b.InFlight, Requests: b.Requests, Share: b.Share,
	}
	if b.Ceiling > 0 && b.Rate > aboveCeiling*b.Ceiling {
		c.RateNote = rateAboveCeiling
	}
	if b.TurnsUntil.After(now) { // turns that ended linger until the next renewal
		c.TurnsUntil = b.TurnsUntil
	}
	for _, s := range b.Shares {
		c.Shares = append(c.Shares, shareJSON{Holder: s.Holder, Share: s.Share, Expires: s.Expires})
	}
	if b.PausedUntil.After(now) {
		c.PausedUntil, c.PauseReason = b.PausedUntil, b.PauseReason
	}
	for _, l := range b.Limits {
		c.Limits = append(c.Limits, limitJSON{Name: l.Name, Count: l.Count, PerMS: l.Per.Milliseconds(),
			Used: l.Used, Remaining: max(0, l.Count-l.Used), Reset: l.Reset})
	}
	cur, base := sampleOf(now, b), sample{}
	for _, s := range hist {
		if now.Sub(s.at) <= rateWindow && s.at.Before(now) && s.requests <= cur.requests &&
			s.throttled <= cur.throttled && s.errs <= cur.errs { // counters restart with a new provider
			base = s
			c.WindowS = now.Sub(s.at).Seconds()
			break
		}
	}
	sent := float64(cur.requests - base.requests)
	if sent > 0 {
		c.Refused = float64(cur.throttled-base.throttled) / sent
		c.Errors = float64(cur.errs-base.errs) / sent
	}
	if c.WindowS > 0 {
		perS := sent / c.WindowS
		c.SentPerS = &perS
		if b.Rate > 0 && b.Share > 0 {
			sat := perS / (b.Rate * b.Share) // this process's pace
			c.Saturation = &sat
		}
	}
	return c
}

// The sources of a connector's figures.
const (
	sourceProcess = "process"
	sourceRecord  = "record"
)

// recordConnector is the connector of r, a provider this process holds
// none of, at now. r comes from a store any program may write: a figure
// that is not finite and >= 0 is shown as 0, a text as plainWhy shows it.
func recordConnector(now time.Time, r forage.ProviderRecord) connectorJSON {
	c := connectorJSON{
		Key: r.Key, Source: sourceRecord, Status: budget.StatusActive, Why: plainWhy(r.Why),
		Rate: figure(r.Rate), Ceiling: figure(r.Ceiling), Updated: r.Updated,
	}
	switch r.Status {
	case budget.StatusPaused:
		c.Status = budget.StatusPaused
	case "", budget.StatusActive:
	default:
		// What every process does with it: a status other than "paused"
		// leaves a provider active ("Paused", "deleted" were shown as
		// they were, and obeyed by none).
		c.Why = plainWhy(fmt.Sprintf("the record's status %q is not one a process obeys (active or paused): active", r.Status))
	}
	if c.Ceiling > 0 && c.Rate > aboveCeiling*c.Ceiling {
		c.RateNote = rateAboveCeiling
	}
	if r.PausedUntil.After(now) {
		c.PausedUntil, c.PauseReason = r.PausedUntil, forage.Reason(plainWhy(string(cmp.Or(r.PauseReason, forage.ReasonThrottled))))
	}
	if r.Requests > 0 && r.OK >= 0 && r.Throttled >= 0 && r.OK+r.Throttled <= r.Requests {
		n := float64(r.Requests)
		c.Requests = uint64(r.Requests)
		c.Refused = float64(r.Throttled) / n
		c.Errors = float64(r.Requests-r.OK-r.Throttled) / n
	}
	return c
}

// figure is x, or 0 when x is not a finite number >= 0.
func figure(x float64) float64 {
	if x >= 0 && !math.IsInf(x, 1) {
		return x
	}
	return 0
}

// connectors returns the connectors at now keyed after after, at most
// limit, in key order, and whether more are left: the providers of the
// budget registry, and those its record store keeps that the registry
// does not hold (a process that calls nothing itself lists the
// connectors every process shares). recErr is the record store's error,
// when it could not be listed: the page then holds the registry's alone.
func (h *Handler) connectors(ctx context.Context, now time.Time, after string, limit int) (out []connectorJSON, more bool, recErr error) {
	reg := h.s.Budget()
	if reg == nil {
		return nil, false, nil
	}
	h.sample(now)
	snaps, left := reg.SnapshotPage(after, limit) // the page alone: a crawler's registry may hold 100,000
	recs, listed, recErr := reg.RecordPage(ctx, after, limit)
	more = left > 0 || listed && recErr == nil && len(recs) >= limit
	// The store's page may come from any program: keep its keys after
	// after, in order, once each.
	recs = slices.DeleteFunc(recs, func(r forage.ProviderRecord) bool { return r.Key <= after })
	slices.SortFunc(recs, func(a, b forage.ProviderRecord) int { return strings.Compare(a.Key, b.Key) })
	recs = slices.CompactFunc(recs, func(a, b forage.ProviderRecord) bool { return a.Key == b.Key })
	out = make([]connectorJSON, 0, min(limit, len(snaps)+len(recs)))
	for i, j := 0, 0; i < len(snaps) || j < len(recs); {
		switch {
		case j == len(recs) || i < len(snaps) && snaps[i].Key <= recs[j].Key:
			if j < len(recs) && snaps[i].Key == recs[j].Key {
				j++ // held here: the live figures
			}
			out = append(out, connectorOf(now, snaps[i], h.hist.of(snaps[i].Key)))
			i++
		default:
			out = append(out, recordConnector(now, recs[j]))
			j++
		}
	}
	if len(out) > limit {
		out, more = out[:limit], true
	}
	if len(out) == 0 {
		more = false // a store that lists what comes before after: "next" would be after, and a client would page for ever
	}
	return out, more, recErr
}

// serveConnectors serves GET /connectors: {"connectors": […], "next": "…"},
// at most ?limit= connectors keyed after ?after=, in key order, within
// MaxPageBytes (but at least one); "next", present when more are left, is
// the ?after= of the next page.
func (h *Handler) serveConnectors(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	after := v.Get("after")
	if !utf8.ValidString(after) || strings.ContainsRune(after, 0) {
		// No key follows it, and a record store in PostgreSQL refuses the
		// whole list for it (as records_error, in a 200).
		writeError(w, http.StatusBadRequest, "after", invalid("after", "must be valid UTF-8 without NUL, as every key is", fmt.Sprintf("%q", redact.Clip(after, 64))))
		return
	}
	limit, ok := queryInt(w, v.Get("limit"), "limit", maxProviderListLimit, defaultProviderListLimit)
	if !ok {
		return
	}
	release, err := h.turn(r.Context()) // a snapshot of the whole registry: in turn, as the others
	if err != nil {
		writeErr(w, err)
		return
	}
	list, more, recErr := h.connectors(r.Context(), time.Now(), after, int(limit))
	release()
	var buf bytes.Buffer
	buf.WriteString(`{"connectors":[`)
	n := 0
	for _, c := range list {
		enc, err := json.Marshal(c)
		if err != nil {
			writeErr(w, fmt.Errorf("admin: connector %q cannot be written as JSON: %w", redact.Clip(c.Key, 64), err))
			return
		}
		if n > 0 && buf.Len()+len(enc)+len(c.Key)*6+32 > h.cfg.MaxPageBytes { // the tail and "next", escaped
			more = true
			break
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(enc)
		n++
	}
	buf.WriteByte(']')
	if more {
		last := after
		if n > 0 {
			last = list[n-1].Key
		}
		next, _ := json.Marshal(last)
		fmt.Fprintf(&buf, `,"next":%s`, next)
	}
	if recErr != nil {
		msg, _ := json.Marshal(cleanError("the shared provider records could not be listed, so only the providers this process holds are shown: " + recErr.Error()))
		fmt.Fprintf(&buf, `,"records_error":%s`, msg)
	}
	buf.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(buf.Bytes())
}

// statusJSON is the body of POST /connectors, and the optional body of
// POST /connectors/{key}/pause and /resume (Why only).
type statusJSON struct {
	Key    string `json:"key"`
	Status string `json:"status"`
	Why    string `json:"why"`
}

// learned names the fields of a provider record that the provider learns
// and an operator may not set: POST /connectors refuses them by name.
var learned = []string{"rate", "ceiling", "confirmed", "paused_until", "pause_reason", "requests", "ok", "throttled", "updated"}

// serveConnectorUpsert serves POST /connectors: {"key","status","why"}.
func (h *Handler) serveConnectorUpsert(w http.ResponseWriter, r *http.Request) {
	in, ok := decodeStatus(w, r, false)
	if !ok {
		return
	}
	h.setStatus(w, r, in.Key, in.Status, in.Why)
}

// serveConnectorPause serves POST /connectors/{key}/pause (status
// "paused") and /resume ("active"), with an optional body {"why": "…"}.
func (h *Handler) serveConnectorPause(status string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in, ok := decodeStatus(w, r, true)
		if !ok {
			return
		}
		if in.Key != "" || in.Status != "" {
			field := "key"
			if in.Status != "" {
				field = "status"
			}
			writeError(w, http.StatusBadRequest, field, invalid(field, "must not be in the body: the path says it", "set"))
			return
		}
		h.setStatus(w, r, r.PathValue("key"), status, in.Why)
	}
}

// decodeStatus reads a statusJSON body (an empty one if optional),
// answering 400 (413 if too large) when it cannot.
func decodeStatus(w http.ResponseWriter, r *http.Request, optional bool) (statusJSON, bool) {
	var in statusJSON
	err := decodeOne(r.Body, &in) // bounded by ServeHTTP
	if err == nil || optional && errors.Is(err, io.EOF) {
		return in, true
	}
	code, field := http.StatusBadRequest, decodeField(err)
	if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
		code = http.StatusRequestEntityTooLarge
	}
	if slices.Contains(learned, field) {
		err = fmt.Errorf("admin: invalid argument: %s is learned by the provider, not set by an operator: a connector takes key, status and why", field)
	} else {
		err = fmt.Errorf("admin: invalid JSON body (a connector takes key, status and why): %w", err)
	}
	writeError(w, code, field, err)
	return in, false
}

// setStatus gives the connector for key the operator's status and why,
// then answers the connector: 400 for a bad key, status or why; 404 when
// the scheduler has no budget registry or does not know key; 500 when the
// record cannot be saved.
func (h *Handler) setStatus(w http.ResponseWriter, r *http.Request, key, status, why string) {
	if err := checkNameAs("key", key); err != nil {
		writeError(w, http.StatusBadRequest, "key", err)
		return
	}
	if status != budget.StatusActive && status != budget.StatusPaused {
		writeError(w, http.StatusBadRequest, "status", invalid("status", `must be "active" or "paused"`, fmt.Sprintf("%q", redact.Clip(status, 64))))
		return
	}
	why = redact.String(why) // an operator's reason is stored and shown: no credential in it
	if why != "" {
		if err := checkNameAs("why", why); err != nil {
			writeError(w, http.StatusBadRequest, "why", err)
			return
		}
	}
	reg := h.s.Budget()
	if reg == nil {
		writeError(w, http.StatusNotFound, "key", errors.New("admin: there are no connectors: the scheduler has no budget registry (schedule.Config.Budget)"))
		return
	}
	known, err := h.knows(r.Context(), key)
	if err != nil {
		writeErr(w, err)
		return
	}
	if !known {
		writeError(w, http.StatusNotFound, "key", fmt.Errorf(
			"admin: connector %q is unknown: no call or job has named it here yet", redact.Clip(key, 64)))
		return
	}
	if err := reg.SetStatus(r.Context(), key, status, why); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, budget.ErrInvalidConfig) {
			code = http.StatusBadRequest
		}
		writeError(w, code, "", err)
		return
	}
	p, ok := reg.Lookup(key)
	if !ok { // evicted at once: the status is saved, show it as set
		writeJSON(w, http.StatusOK, connectorJSON{Key: key, Source: sourceRecord, Status: status, Why: why})
		return
	}
	now := time.Now()
	writeJSON(w, http.StatusOK, connectorOf(now, p.Snapshot(), h.hist.of(key)))
}

// plainWhy is an operator's reason as the handler serves it: redacted, at
// most checkpoint.MaxNameLen bytes, with every control, format (bidi,
// zero-width) and line or paragraph separator character a U+FFFD. One
// set through the API meets the name rule already; one read from a shared
// record may be anything another program wrote there (200 KB on every
// page, bidi overrides that reorder what the operator reads, escape
// sequences).
func plainWhy(why string) string {
	why = strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return unicode.ReplacementChar
		}
		return r
	}, strings.ToValidUTF8(why, string(unicode.ReplacementChar)))
	return redact.Clip(redact.String(why), checkpoint.MaxNameLen)
}
