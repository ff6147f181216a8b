package admin

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"time"

	"github.com/forage-go/forage/schedule"
)

// statusJobs caps the jobs listed on the status page.
const statusJobs = 200

// statusPage is the server-rendered status page. html/template escapes
// every value for its context, so stream names, provider keys and error
// messages cannot inject markup.
var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"pct": func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
	"f2":  func(v float64) string { return fmt.Sprintf("%.2f", v) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>forage schedule</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}
th{background:#f3f3f3}
.num{text-align:right}
.grid{display:flex;flex-wrap:wrap;gap:12px;margin:0 0 1.5em}
.card{border:1px solid #ccc;border-radius:6px;padding:8px 12px;width:344px}
.card h3{margin:0 0 4px;font-size:15px;overflow-wrap:anywhere}
.card table{margin:4px 0;width:100%}
.card td,.card th{border:0;border-bottom:1px solid #eee;padding:1px 4px}
.badge{font-size:12px;padding:1px 6px;border-radius:8px;background:#dfd;color:#141}
.badge.paused{background:#fdd;color:#700}
.why{margin:2px 0;color:#700}
.note{font-size:12px;color:#555}
.chart{background:#fafafa;border:1px solid #ddd}
.legend span{margin-right:10px;font-size:12px}
.sw{display:inline-block;width:10px;height:3px;vertical-align:middle;margin-right:3px}
</style></head><body>
<h1>Schedule</h1>
<p>{{when .Snap.At}}: {{.Snap.Total}} jobs, {{.Snap.Due}} due, {{.Snap.Active}} running here.</p>

<h2>Jobs by state</h2>
{{if .Bars}}<svg class="bar" width="640" height="18" role="img" aria-label="jobs by state">
{{range .Bars}}<rect x="{{printf "%.2f" .X}}%" y="0" width="{{printf "%.2f" .W}}%" height="18" fill="{{.Color}}"><title>{{.State}}: {{.N}}</title></rect>
{{end}}</svg>
<p class="legend">{{range .Bars}}<span><i class="sw" style="background:{{.Color}}"></i>{{.State}} {{.N}}</span>{{end}}</p>{{end}}
<table><tr>{{range .States}}<th>{{.}}</th>{{end}}</tr>
<tr>{{range .States}}<td class="num">{{index $.Snap.Jobs .}}</td>{{end}}</tr></table>

<h2>Providers</h2>
<p class="legend"><span><i class="sw" style="background:#36c"></i>rate</span><span><i class="sw" style="background:#999"></i>ceiling</span><span><i class="sw" style="background:#2a7"></i>sent/s</span><span><i class="sw" style="background:#c22"></i>refused/s</span></p>
<div class="grid">
{{range .Providers}}<section class="card">
<h3>{{.Provider}}{{with .Conn}} <span class="badge {{.Status}}">{{.Status}}</span>{{end}}{{if .PausedHere}} <span class="badge paused">paused in this scheduler</span>{{end}}</h3>
{{with .Conn}}{{if .Why}}<p class="why">{{.Why}}</p>{{end}}{{end}}
{{with .Chart}}<svg class="chart" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="{{.Label}}">
<title>{{.Label}}</title>
<polyline class="ceiling" fill="none" stroke="#999" stroke-width="1.5" stroke-dasharray="4 3" points="{{.Ceiling}}"/>
<polyline class="sent" fill="none" stroke="#2a7" stroke-width="1.5" points="{{.Sent}}"/>
<polyline class="rate" fill="none" stroke="#36c" stroke-width="2" points="{{.Rate}}"/>
<polyline class="refusals" fill="none" stroke="#c22" stroke-width="1.5" points="{{.Refusals}}"/>
<text x="3" y="11" font-size="10" fill="#555">{{.Top}}</text>
<text x="{{.W}}" dx="-3" y="{{.H}}" dy="-3" font-size="10" fill="#555" text-anchor="end">last {{.Span}}</text>
</svg>{{end}}
<table>
<tr><th>jobs</th><td class="num">{{.Jobs}} ({{.Due}} due, {{.Running}} running)</td></tr>
{{if not .CoolingUntil.IsZero}}<tr><th>cooling until</th><td>{{when .CoolingUntil}}</td></tr>{{end}}
{{with .Conn}}<tr><th>rate now</th><td class="num">{{f2 .Rate}} req/s ({{.Phase}})</td></tr>
<tr><th>learned ceiling</th><td class="num">{{if .Ceiling}}{{f2 .Ceiling}} req/s{{else}}— (none yet){{end}}</td></tr>
{{if .RateNote}}<tr><td colspan="2" class="note">{{.RateNote}}</td></tr>{{end}}
<tr><th>sent</th><td class="num">{{with .SentPerS}}{{f2 .}} req/s{{else}}—{{end}}{{with .Saturation}}, {{pct .}} of the rate{{end}}</td></tr>
<tr><th>refused / errors</th><td class="num">{{pct .Refused}} / {{pct .Errors}}</td></tr>
<tr><th>breaker, in flight</th><td>{{.Breaker}}, {{.InFlight}}</td></tr>
<tr><th>requests</th><td class="num">{{.Requests}}</td></tr>
{{if not .PausedUntil.IsZero}}<tr><th>pause in force</th><td>until {{when .PausedUntil}} ({{.PauseReason}})</td></tr>{{end}}
{{range .Limits}}<tr><th>limit {{.Name}}</th><td class="num">{{.Used}} of {{.Count}} per {{.PerMS}} ms{{if not .Reset.IsZero}}, reset {{when .Reset}}{{end}}</td></tr>{{end}}
{{else}}<tr><td colspan="2">no budget snapshot</td></tr>{{end}}
</table>
</section>
{{end}}</div>
{{with .Snap.MoreProviders}}<p>Showing the first {{len $.Providers}} providers; {{.}} more: GET providers?after=…</p>{{end}}
{{if or .Others .RecordsError}}
<h2>Other connectors</h2>
<p class="note">Providers that other processes call: known here by the records the processes share, as last saved. POST connectors/{key}/pause and /resume steer them in every process.</p>
{{with .RecordsError}}<p class="why">{{.}}</p>{{end}}
{{if .Others}}<table><tr><th>connector</th><th>status</th><th>rate</th><th>ceiling</th><th>pause in force</th><th>saved</th></tr>
{{range .Others}}<tr><td>{{.Key}}</td><td><span class="badge {{.Status}}">{{.Status}}</span>{{with .Why}} {{.}}{{end}}</td>
<td class="num">{{f2 .Rate}} req/s</td><td class="num">{{if .Ceiling}}{{f2 .Ceiling}} req/s{{else}}—{{end}}</td>
<td>{{if not .PausedUntil.IsZero}}until {{when .PausedUntil}} ({{.PauseReason}}){{end}}</td><td>{{if not .Updated.IsZero}}{{when .Updated}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .OthersMore}}<p>Showing {{len .Others}} other connectors: GET connectors lists them all.</p>{{end}}
{{end}}

<h2>Jobs{{if .State}} ({{.State}}){{end}}</h2>
<table><tr><th>id</th><th>provider</th><th>kind</th><th>stream</th><th>priority</th><th>state</th>
<th>next run</th><th>runs</th><th>failures</th><th>last error</th></tr>
{{range .Jobs}}<tr><td class="num">{{.ID}}</td><td>{{.Provider}}</td><td>{{.Kind}}</td><td>{{.Stream}}</td>
<td class="num">{{.Priority}}</td><td>{{.State}}</td><td>{{if .Waiting}}due since {{when .NextRun}}: {{.Waiting}}{{else}}{{when .NextRun}}{{end}}</td><td class="num">{{.Stats.Runs}}</td>
<td class="num">{{.Stats.Failures}}</td><td>{{.Stats.LastError}}</td></tr>
{{end}}</table>
{{if .More}}<p>Showing the first {{len .Jobs}} jobs.</p>{{end}}

<h2>Decisions</h2>
{{with .Snap.Decisions}}<table>
<tr><th>claims</th><th>started</th><th>succeeded</th><th>done</th><th>requeued</th><th>pressured</th><th>failed</th><th>interrupted</th><th>leases lost</th><th>store errors</th></tr>
<tr><td class="num">{{.Claims}}</td><td class="num">{{.Started}}</td><td class="num">{{.Succeeded}}</td><td class="num">{{.Done}}</td>
<td class="num">{{.Requeued}}</td><td class="num">{{.Pressured}}</td><td class="num">{{.Failed}}</td><td class="num">{{.Interrupted}}</td>
<td class="num">{{.LeasesLost}}</td><td class="num">{{.StoreErrors}}</td></tr></table>{{end}}
</body></html>
`))

// jobView is one row of the status page's job list: the job, and, when it
// is due but has not started, what holds it back (its NextRun is then in
// the past, and is shown as "due since").
type jobView struct {
	schedule.Job
	Waiting string
}

// providerView is one provider's card on the status page: the scheduler's
// view, and the budget's (its connector and chart) if the registry holds
// it.
type providerView struct {
	schedule.ProviderSnapshot
	Conn  *connectorJSON
	Chart *chart
	// PausedHere is whether it is paused in this scheduler (POST
	// /providers/{name}/pause); ProviderSnapshot.Paused is also true for
	// an operator's pause of its connector, which holds in every process.
	PausedHere bool
}

// providerViews builds the cards of snap's providers at now.
func (h *Handler) providerViews(now time.Time, snap schedule.Snapshot) []providerView {
	h.sample(now)
	paused := h.s.PausedProviders()
	out := make([]providerView, 0, len(snap.Providers))
	for _, p := range snap.Providers {
		_, here := slices.BinarySearch(paused, p.Provider)
		v := providerView{ProviderSnapshot: p, PausedHere: here}
		if p.Budget != nil {
			hist := h.hist.of(p.Provider)
			c, ch := connectorOf(now, *p.Budget, hist), chartOf(now, hist, h.hist.every)
			v.Conn, v.Chart = &c, &ch
		}
		out = append(out, v)
	}
	return out
}

// maxOthers caps the connectors the status page lists under "Other
// connectors"; GET /connectors lists them all.
const maxOthers = 20

// otherConnectors returns, at now, the first maxOthers connectors that
// only the shared records know (this process holds no provider for them,
// and the scheduler has no card: other processes call them), whether more
// may be left, and what the record store said when it could not list
// them. It reads a few pages of records at most, and snapshots nothing.
func (h *Handler) otherConnectors(ctx context.Context, now time.Time, snap schedule.Snapshot) (out []connectorJSON, more bool, recordsError string) {
	reg := h.s.Budget()
	if reg == nil {
		return nil, false, ""
	}
	carded := make(map[string]bool, len(snap.Providers))
	for _, p := range snap.Providers {
		carded[p.Provider] = true
	}
	after := ""
	for range 4 { // a registry that holds most of the records: what is left is GET /connectors's
		recs, _, err := reg.RecordPage(ctx, after, 2*maxOthers)
		if err != nil {
			return out, false, cleanError("the shared provider records could not be listed: " + err.Error())
		}
		for _, r := range recs {
			if r.Key <= after {
				continue // a store that lists out of order: shown once
			}
			after = r.Key
			if _, held := reg.Lookup(r.Key); held || carded[r.Key] {
				continue
			}
			if len(out) == maxOthers {
				return out, true, ""
			}
			out = append(out, recordConnector(now, r))
		}
		if len(recs) < 2*maxOthers {
			return out, false, ""
		}
	}
	return out, true, ""
}

// serveStatus renders the status page; ?state= filters the job list. The
// jobs' last errors are shown with their URLs redacted.
func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	state := schedule.State(r.URL.Query().Get("state"))
	if (&schedule.Query{State: state}).Validate() != nil {
		writeError(w, http.StatusBadRequest, "state", invalid("state", "must be empty or a valid state", state))
		return
	}
	release, err := h.turn(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	page, err := h.renderStatus(r, state)
	release() // before the write: a client that stops reading holds no turn (it held every dashboard's)
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}

// renderStatus renders the status page, in turn.
func (h *Handler) renderStatus(r *http.Request, state schedule.State) ([]byte, error) {
	snap, err := h.s.SnapshotPage(r.Context(), time.Now(), "", maxShown)
	if err != nil {
		return nil, err
	}
	var jobs []jobView
	waits, now := h.newWaits(snap.At, &snap), snap.At
	var waitErr error
	more, err := h.page(r.Context(), schedule.Query{State: state}, statusJobs, func(j schedule.Job) bool {
		j.Payload = nil // not shown: hold no more than a batch of payloads
		j.Stats.LastError = cleanError(j.Stats.LastError)
		v := jobView{Job: j}
		if due(&j, now) {
			if v.Waiting, waitErr = waits.of(r.Context(), &j); waitErr != nil {
				return false
			}
		}
		jobs = append(jobs, v)
		return true
	})
	if err == nil {
		err = waitErr
	}
	if err != nil {
		return nil, err
	}
	others, othersMore, recordsError := h.otherConnectors(r.Context(), time.Now(), snap)
	var buf bytes.Buffer
	data := struct {
		Snap         schedule.Snapshot
		States       []schedule.State
		Bars         []stateBar
		Providers    []providerView
		State        schedule.State
		Jobs         []jobView
		More         bool
		Others       []connectorJSON
		OthersMore   bool
		RecordsError string
	}{snap, states, stateBars(snap.Jobs, states), h.providerViews(time.Now(), snap), state, jobs, more,
		others, othersMore, recordsError}
	if err := statusPage.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
