package admin

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/internal/redact"
	"github.com/forage-go/forage/schedule"
)

// Config configures the handler [New] returns. The zero value is valid:
// every request for an IP address or localhost is authorized, any other
// Host refused (see Hosts), POST /jobs creates jobs
// while the store holds fewer than 100,000, at most 1,000 providers are
// paused through it, a GET /jobs, /providers or /connectors page holds at
// most 4 MiB of JSON, and the charts sample every 5 s.
type Config struct {
	// Authorize decides, before anything else is read, whether r may be
	// served: nil serves it; an error refuses it with its message, 401 if
	// it wraps [ErrUnauthenticated] and 403 otherwise. A 401 carries
	// `WWW-Authenticate: Bearer realm="forage"`, as RFC 9110 requires:
	// clients send credentials in the Authorization header, which the hook
	// reads from r. r.Method and r.URL.EscapedPath() (relative to where the
	// handler is mounted, after [http.StripPrefix]) say what is asked: GET
	// and HEAD only read, POST and DELETE change state. (r.URL.Path has
	// its escapes decoded: /connectors/a.example%2Fv2/pause acts on the
	// key "a.example/v2", which r.URL.Path shows as /connectors/a.example/v2/pause.)
	// It is called concurrently.
	// Nil authorizes every request: then the handler must be reachable
	// only by operators (on a private listener), since it pauses providers
	// and creates and deletes jobs. Behind the host's own authentication,
	// set it (to a func returning nil if that authentication is all there
	// is).
	Authorize func(r *http.Request) error
	// Hosts are the names the handler is served under, besides IP
	// addresses and localhost; a request for any other Host is refused
	// with 403, Authorize or not. A web page could point a name of its own
	// at the listener (DNS rebinding) and send it same-origin requests that
	// no origin check tells from the operator's: behind an authentication
	// a browser does not send to that name (a cookie, a bearer token) they
	// are refused anyway, but behind one that is the network alone (a VPN,
	// a private listener, an address allow-list) only this check refuses
	// them. A name matches without regard to case, with or without a port.
	Hosts []string
	// MaxJobs caps the jobs the store may hold for POST /jobs to create one
	// more: a creation beyond it answers 409, while updates of existing
	// jobs still pass. It bounds what one client of the API can make the
	// store hold; jobs the host adds with [schedule.Scheduler.Upsert] count
	// but are not refused. A store ([schedule.Scheduler.Store]) with a
	// Count(ctx) (int, error) method (as the one
	// [schedule.NewMemoryJobStore] returns) is asked for the count; any
	// other is listed page by page, up to MaxJobs. Defaults to 100,000.
	MaxJobs int
	// MaxPausedProviders caps the providers paused in the scheduler for
	// POST /providers/{name}/pause to pause one more: a pause beyond it
	// answers 409 (resuming, or pausing a paused provider, still passes).
	// Only a provider the scheduler knows (it has a job, is paused, or is
	// in [schedule.Config.Budget]) may be paused at all. Providers the host
	// pauses with [schedule.Scheduler.SetProviderPaused] count but are not
	// refused. Defaults to 1,000.
	MaxPausedProviders int
	// MaxPageBytes caps the JSON of one GET /jobs, /providers or /connectors page,
	// in bytes. A page ends before the job that would pass it (its "next"
	// says where to go on) but always holds at least one job, so a page may
	// reach about 1.4 MiB (a job's payload is at most 1 MiB, base64 in
	// JSON) whatever the cap. Defaults to 4 MiB.
	MaxPageBytes int
	// SampleEvery is how often [Handler.Run] samples each provider of the
	// scheduler's budget registry for the status page's charts, which show
	// the last 120 samples (ten minutes at the default) of the first
	// 100 providers. Between 10ms and 1h.
	// Defaults to 5s.
	SampleEvery time.Duration
}

// The defaults and bounds of the admin handler.
const (
	defaultMaxJobs      = 100_000
	defaultMaxPageBytes = 4 << 20
	defaultListLimit    = 100  // jobs per GET /jobs page when ?limit= is absent
	maxListLimit        = 1000 // the largest ?limit=
	listBatch           = 64   // jobs read from the store at once, so a page never holds more payloads in memory
	countBatch          = 256  // jobs per List when counting a store without Count
)

// Handler is the admin API and status page of a [schedule.Scheduler], an
// [http.Handler] rooted at "/"; mount it under a prefix with
// [http.StripPrefix]. Build it with [New]; [Handler.Run] keeps the status
// page's charts sampled. It is safe for concurrent use.
type Handler struct {
	s     *schedule.Scheduler
	cfg   Config
	mux   *http.ServeMux
	cop   *http.CrossOriginProtection
	mu    sync.Mutex    // serializes creations and pauses, so MaxJobs and MaxPausedProviders hold against this handler's own races
	count counter       // the store's Count, if it has one
	scan  chan struct{} // one snapshot at a time: each holds a batch of payloads while it reads the store
	hist  *history      // the charts' samples
}

// counter is a [schedule.JobStore] that can count its jobs cheaply.
type counter interface {
	Count(ctx context.Context) (int, error)
}

// New returns the admin API and status page of s:
//
//	GET    /                        HTML status page (providers, rates, breakers, jobs by state)
//	GET    /stats                   the Snapshot as JSON (at most 100 providers)
//	GET    /providers               a page of providers with their budget snapshot: ?after= &limit=
//	POST   /providers/{name}/pause  pause a provider in this scheduler; 404 if unknown
//	POST   /providers/{name}/resume resume it; 404 if unknown; "connector_status": "paused" if its connector stays paused
//	GET    /connectors              a page of connectors (the registry's providers and its store's records): ?after= &limit=
//	POST   /connectors              set a connector's operator status {"key","status","why"}: every process obeys
//	POST   /connectors/{key}/pause  the same with status "paused"; optional body {"why"}
//	POST   /connectors/{key}/resume the same with status "active"; optional body {"why"}
//	GET    /jobs                    a page: ?provider= &kind= &state= &stream= &after= &limit=
//	POST   /jobs                    upsert {"provider","kind","stream","priority","interval_ms","payload","next_run"}; 201 if created
//	GET    /jobs/{id}               one job
//	DELETE /jobs/{id}               delete; 204
//	POST   /jobs/{id}/pause         pause
//	POST   /jobs/{id}/resume        resume
//	POST   /jobs/{id}/run           run now; 409 while it runs
//
// Every request is first authorized (see [Config.Authorize]). A
// request that changes state (any method but GET, HEAD and OPTIONS) must
// carry "Content-Type: application/json", even without a body (curl -X POST
// -H 'Content-Type: application/json' …), and must not come from another
// origin (see [http.CrossOriginProtection]): a browser cannot send such a
// request from another site without a CORS preflight, which this handler
// never grants, so a page the operator visits cannot forge one. Otherwise
// the answer is 415 or 403. A request body over 2 MiB answers 413.
//
// GET /jobs answers {"jobs": […], "next": N}: at most ?limit= jobs
// (default 100, at most 1000) with an ID above ?after= (default 0), in ID
// order, within [Config.MaxPageBytes]. "next", present when more
// jobs may match, is the ?after= of the next page. A job that is due (its
// next_run has passed) but has not started carries "waiting": what holds
// it back (its provider paused or cooling down, another job of its stream
// running, a backfill held behind its provider's head work, no room on
// its provider), so a past next_run is not read as a wake-up to come. The
// status page shows it as "due since …: why". Finding it reads the jobs
// of the page's providers, so such a page takes its turn as GET /stats
// does. GET /providers answers
// {"providers": […], "next": "name"} the same way: at most ?limit=
// providers (default 100, at most 1000) named after ?after= (default ""),
// in name order. GET /stats and the status page show the first
// 100 providers and how many more there are
// ([schedule.Snapshot.MoreProviders]); their budget snapshots show
// paused_until, pause_reason and turns_until only while in force. These
// three read the whole store
// (see [schedule.Scheduler.SnapshotPage]), so they take turns: one reads at a time, the
// others wait.
//
// A connector is one provider of the scheduler's budget registry
// ([schedule.Config.Budget]) as an operator sees and steers it. GET
// /connectors answers {"connectors": […], "next": "key"}, paged as GET
// /providers is: the registry's providers, and, when its
// [budget.RecordStore] can list them ([budget.RecordLister]: the
// checkpoint and PostgreSQL stores can), every provider whose record it
// keeps, so an admin process that calls nothing itself lists the
// connectors all the collectors share ("records_error" says so when the
// store could not be listed: the page then holds this process's alone).
// Each has: key; source ("process" for a provider held here, live;
// "record" for one known by its shared record alone, whose figures are the
// record's as saved at "updated", with no phase, breaker, in flight nor
// shares); status ("active" or "paused") and why;
// rate, ceiling (requests/s) and phase, and rate_note when the rate is far
// above the ceiling (it spends what a quota window has left until its
// reset, or probes for a grown limit); breaker; the pause the provider
// asked for while in force (paused_until, pause_reason); each known limit
// (name, count, per_ms, used, remaining, reset); in_flight and requests;
// and over window_s seconds (the last minute of samples, or 0: since the
// provider was made) sent_per_s, saturation (sent_per_s ÷ rate), refused
// (the share of attempts refused for rate) and errors (the share that
// failed otherwise). POST /connectors is an idempotent upsert of what an
// operator may set, status ("active" or "paused", required) and why (a
// name by the rule below, credentials redacted): it goes through
// [budget.Registry.SetStatus], so with a shared [budget.RecordStore]
// every process, and every call (the scheduler's runs, direct Do calls,
// the Transport), obeys it within about five seconds, and a restart keeps
// it. What the provider learns (rate, ceiling, pauses, counters) is not
// the operator's to set: such a field answers 400 naming it, as does any
// unknown field. It answers the connector; 404 if the scheduler has no
// registry or does not know the key (see below). Unlike POST
// /providers/{name}/pause, which pauses the provider's jobs in this
// scheduler only, a connector's pause holds everywhere.
//
// A provider name in a path must meet the name rule of every store
// ([checkpoint.CheckName]: valid UTF-8, no control character, at most
// 1024 bytes), else 400; a provider is paused or resumed only if the
// scheduler knows it (it has a job, is paused, or is in
// [schedule.Config.Budget]), else 404, and at most
// [Config.MaxPausedProviders] are paused, else 409.
//
// Errors are JSON, {"error": "...", "field": "..."}: 400 for invalid input,
// naming the field; 401 (with a WWW-Authenticate challenge) or 403 when
// refused; 404 for an unknown job or provider; 409 for run-now on a
// running job, a creation over MaxJobs or a pause over
// MaxPausedProviders; 413 for a body too large; 415 for a state change
// without the JSON content type; 500 for a store failure. Every URL in an
// error it serves (and in the jobs' last errors) has its query values and
// userinfo redacted.
//
// New fails, wrapping [ErrInvalidConfig], for a nil s or a negative
// MaxJobs, MaxPausedProviders or MaxPageBytes.
func New(s *schedule.Scheduler, cfg Config) (*Handler, error) {
	switch {
	case s == nil:
		return nil, invalidConfig.Must("New's Scheduler", "not be nil: build one with schedule.New", "nil")
	case cfg.MaxJobs < 0:
		return nil, invalidConfig.Must("Config.MaxJobs", "be >= 0", cfg.MaxJobs)
	case cfg.MaxPageBytes < 0:
		return nil, invalidConfig.Must("Config.MaxPageBytes", "be >= 0", cfg.MaxPageBytes)
	case cfg.MaxPausedProviders < 0:
		return nil, invalidConfig.Must("Config.MaxPausedProviders", "be >= 0", cfg.MaxPausedProviders)
	case cfg.SampleEvery != 0 && (cfg.SampleEvery < minSampleEvery || cfg.SampleEvery > maxSampleEvery):
		return nil, invalidConfig.Must("Config.SampleEvery", "be 0 (the default) or in [10ms, 1h]", cfg.SampleEvery)
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = defaultSampleEvery
	}
	if cfg.MaxPausedProviders == 0 {
		cfg.MaxPausedProviders = defaultMaxPaused
	}
	if cfg.MaxJobs == 0 {
		cfg.MaxJobs = defaultMaxJobs
	}
	if cfg.MaxPageBytes == 0 {
		cfg.MaxPageBytes = defaultMaxPageBytes
	}
	h := &Handler{s: s, cfg: cfg, mux: http.NewServeMux(), cop: http.NewCrossOriginProtection(), scan: make(chan struct{}, 1), hist: newHistory(cfg.SampleEvery)}
	h.count, _ = s.Store().(counter)
	h.routes()
	return h, nil
}

// routes registers the endpoints.
func (h *Handler) routes() {
	s, mux := h.s, h.mux
	mux.HandleFunc("GET /{$}", h.serveStatus)
	mux.HandleFunc("GET /stats", h.serveStats)
	mux.HandleFunc("GET /providers", h.serveProviders)
	mux.HandleFunc("POST /providers/{name}/pause", h.serveProviderPause(true))
	mux.HandleFunc("POST /providers/{name}/resume", h.serveProviderPause(false))
	mux.HandleFunc("GET /connectors", h.serveConnectors)
	mux.HandleFunc("POST /connectors", h.serveConnectorUpsert)
	mux.HandleFunc("POST /connectors/{key}/pause", h.serveConnectorPause(budget.StatusPaused))
	mux.HandleFunc("POST /connectors/{key}/resume", h.serveConnectorPause(budget.StatusActive))
	mux.HandleFunc("GET /jobs", h.serveList)
	mux.HandleFunc("POST /jobs", h.serveUpsert)
	mux.HandleFunc("GET /jobs/{id}", serveJob(s.Store().Get))
	mux.HandleFunc("DELETE /jobs/{id}", h.serveDelete)
	mux.HandleFunc("POST /jobs/{id}/pause", serveJob(setPaused(s, true)))
	mux.HandleFunc("POST /jobs/{id}/resume", serveJob(setPaused(s, false)))
	mux.HandleFunc("POST /jobs/{id}/run", serveJob(s.RunNow))
}

// ServeHTTP authorizes r, refuses a state change a browser could have
// forged, bounds the body and serves the route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !localHost(r.Host) && !h.knownHost(r.Host) {
		writeError(w, http.StatusForbidden, "Host", fmt.Errorf(
			"admin: refused a request for host %q: only an IP address, localhost or a name in Config.Hosts is served (a web page can point a name it controls at this listener)", r.Host))
		return
	}
	if h.cfg.Authorize != nil {
		if err := h.cfg.Authorize(r); err != nil {
			code := http.StatusForbidden
			if errors.Is(err, ErrUnauthenticated) {
				code = http.StatusUnauthorized
				w.Header().Set("WWW-Authenticate", wwwAuthenticate)
			}
			writeError(w, code, "", err)
			return
		}
	}
	if safeMethod(r.Method) && crossSiteFetch(r) {
		// A read another site's page made the browser send (an <img>, a
		// script, a fetch): it cannot read the answer, but the collector
		// would pay for each one, hundreds at a time. Following a link
		// (a navigation to a document) is served.
		writeError(w, http.StatusForbidden, "Sec-Fetch-Site", fmt.Errorf(
			"admin: refused a %s %s another site's page sent (Sec-Fetch-Site: %s, Sec-Fetch-Mode: %s)",
			r.Method, r.URL.EscapedPath(), r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Sec-Fetch-Mode")))
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.noRoute(w, r)
		return
	}
	if !safeMethod(r.Method) {
		if err := h.cop.Check(r); err != nil {
			writeError(w, http.StatusForbidden, "", fmt.Errorf("admin: refused a cross-origin %s: %w", r.Method, err))
			return
		}
		if !isJSON(r.Header.Get("Content-Type")) {
			writeError(w, http.StatusUnsupportedMediaType, "Content-Type", fmt.Errorf(
				"admin: a %s needs Content-Type: application/json (got %q)", r.Method, r.Header.Get("Content-Type")))
			return
		}
	}
	if r.ContentLength > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "body", fmt.Errorf("admin: the body is %d bytes, over the %d allowed", r.ContentLength, maxBody))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	h.mux.ServeHTTP(w, r)
}

// noRoute answers a request no endpoint serves, in JSON as every other
// answer of the API: 405 with Allow when its path is served for other
// methods, 404 otherwise. (ServeMux's own answers were text/plain, and a
// client decoding the API's errors read none.)
func (h *Handler) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := h.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	path := redact.Clip(r.URL.EscapedPath(), 256)
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, "", fmt.Errorf("admin: no endpoint at %s (see the package doc for the API)", path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, "", fmt.Errorf("admin: %s %s is not served; %s is", r.Method, path, strings.Join(allow, ", ")))
}

// crossSiteFetch reports whether the browser says another site's page
// sent r other than as a navigation to a document (Fetch Metadata).
func crossSiteFetch(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return r.Header.Get("Sec-Fetch-Mode") != "navigate" || r.Header.Get("Sec-Fetch-Dest") != "document"
	}
	return false
}

// knownHost reports whether host (with or without a port) is one of
// Config.Hosts.
func (h *Handler) knownHost(host string) bool {
	if name, _, err := net.SplitHostPort(host); err == nil {
		host = name
	}
	host = strings.TrimSuffix(host, ".")
	for _, n := range h.cfg.Hosts {
		if strings.EqualFold(strings.TrimSuffix(n, "."), host) {
			return true
		}
	}
	return false
}

// localHost reports whether host (a request's Host, with or without a
// port) is an IP address or localhost: a name a web page cannot point at
// another address. Only such hosts, and Config.Hosts, are served: a page
// the operator visits could otherwise rebind a name of its own to this
// listener (DNS rebinding), and send it same-origin requests the
// cross-origin check cannot tell from the operator's.
func localHost(host string) bool {
	if host == "" {
		return true // HTTP/1.0 without a Host: no browser sends that
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil { // zones too: fe80::1%eth0
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost") // RFC 6761: always loopback
}

// wwwAuthenticate is the challenge of a 401 (RFC 9110, section 11.6.1).
const wwwAuthenticate = `Bearer realm="forage"`

// safeMethod reports whether method only reads.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// isJSON reports whether the Content-Type ct is application/json (any
// parameters).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// maxBody caps a request body: a payload of 1 MiB, base64, plus the rest.
const maxBody = 2 << 20
