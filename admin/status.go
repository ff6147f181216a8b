package admin

import (
	"bytes"
	"html/template"
	"net/http"
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
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>forage schedule</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}
th{background:#f3f3f3}
.num{text-align:right}
</style></head><body>
<h1>Schedule</h1>
<p>{{when .Snap.At}}: {{.Snap.Total}} jobs, {{.Snap.Due}} due, {{.Snap.Active}} running here.</p>

<h2>Jobs by state</h2>
<table><tr>{{range .States}}<th>{{.}}</th>{{end}}</tr>
<tr>{{range .States}}<td class="num">{{index $.Snap.Jobs .}}</td>{{end}}</tr></table>

<h2>Providers</h2>
<table><tr><th>provider</th><th>jobs</th><th>due</th><th>running</th><th>paused</th><th>cooling until</th>
<th>rate (req/s)</th><th>ceiling</th><th>breaker</th><th>in flight</th><th>requests</th><th>throttled</th></tr>
{{range .Snap.Providers}}<tr><td>{{.Provider}}</td><td class="num">{{.Jobs}}</td><td class="num">{{.Due}}</td>
<td class="num">{{.Running}}</td><td>{{if .Paused}}paused{{end}}</td><td>{{if not .CoolingUntil.IsZero}}{{when .CoolingUntil}}{{end}}</td>
{{with .Budget}}<td class="num">{{printf "%.2f" .Rate}}</td><td class="num">{{printf "%.2f" .Ceiling}}</td><td>{{.Breaker}}</td>
<td class="num">{{.InFlight}}</td><td class="num">{{.Requests}}</td><td class="num">{{.Throttled}}</td>
{{else}}<td colspan="6">no budget snapshot</td>{{end}}</tr>
{{end}}</table>
{{with .Snap.MoreProviders}}<p>Showing the first {{len $.Snap.Providers}} providers; {{.}} more: GET providers?after=…</p>{{end}}

<h2>Jobs{{if .State}} ({{.State}}){{end}}</h2>
<table><tr><th>id</th><th>provider</th><th>kind</th><th>stream</th><th>priority</th><th>state</th>
<th>next run</th><th>runs</th><th>failures</th><th>last error</th></tr>
{{range .Jobs}}<tr><td class="num">{{.ID}}</td><td>{{.Provider}}</td><td>{{.Kind}}</td><td>{{.Stream}}</td>
<td class="num">{{.Priority}}</td><td>{{.State}}</td><td>{{when .NextRun}}</td><td class="num">{{.Stats.Runs}}</td>
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

// serveStatus renders the status page; ?state= filters the job list. The
// jobs' last errors are shown with their URLs redacted.
func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	state := schedule.State(r.URL.Query().Get("state"))
	if state != "" && !state.Valid() {
		writeError(w, http.StatusBadRequest, "state", invalid("state", "must be empty or a valid state", state))
		return
	}
	release, err := h.turn(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	snap, err := h.s.SnapshotPage(r.Context(), time.Now(), "", schedule.MaxSnapshotProviders)
	if err != nil {
		writeErr(w, err)
		return
	}
	var jobs []schedule.Job
	more, err := h.page(r.Context(), schedule.Query{State: state}, statusJobs, func(j schedule.Job) bool {
		j.Payload = nil // not shown: hold no more than a batch of payloads
		j.Stats.LastError = cleanError(j.Stats.LastError)
		jobs = append(jobs, j)
		return true
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	var buf bytes.Buffer
	data := struct {
		Snap   schedule.Snapshot
		States []schedule.State
		State  schedule.State
		Jobs   []schedule.Job
		More   bool
	}{snap, schedule.States, state, jobs, more}
	if err := statusPage.Execute(&buf, data); err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}
