// Package admin serves the operator's view of a [schedule.Scheduler] over
// HTTP: a JSON API to list, create, pause, resume, run and delete jobs, to
// pause and resume providers in the scheduler, and to list and steer
// connectors (the providers of its budget registry) in every process; the
// scheduler's metrics ([schedule.Snapshot]) as JSON; and a server-rendered
// HTML status page.
//
// # Connectors
//
// A connector is a provider of the scheduler's [budget.Registry]
// ([schedule.Config.Budget]) as an operator sees it: its status ("active"
// or "paused") and why, its rate and ceiling, the pause it asked for, the
// usage and reset of each known limit, and over the last minute the
// requests it was sent per second, saturation (that ÷ this process's
// pace) and the shares refused and failed; for a provider shared among
// processes ([budget.Config.Shares]), this process's share of the rate and
// every process's lease. GET /connectors also lists the providers known
// only by their shared record, when the store can list them (a
// [budget.RecordLister], as the checkpoint and PostgreSQL stores are):
// an admin process that calls no provider itself sees, and steers, every
// connector the collectors share, with the figures of its record. An
// operator sets only the status and why
// (POST /connectors, or /connectors/{key}/pause and /resume), through
// [budget.Registry.SetStatus]: the status is saved in the provider's
// record, so with a [budget.RecordStore] shared by several processes every
// one of them obeys it within about five seconds, for every call
// (scheduled runs, direct Do calls, the Transport), and a restart keeps
// it. What the provider learns (rate, ceiling, pauses, counters) cannot be
// set through the API.
//
// # The status page
//
// GET / renders, with [html/template] (every value escaped), the jobs by
// state as a bar and a table, then a card per provider: its status, rates,
// limits and jobs, and an inline-SVG chart, drawn on the server with no
// script, of its pacing rate, learned ceiling, requests sent per second
// and refusals per second over the last 120 samples. [Handler.Run] takes a
// sample of every provider each [Config.SampleEvery] (5 s: ten minutes of
// history); without it, a sample is taken when the page or GET /connectors
// is served and the last one is older than that. The history is kept for
// the first 100 providers by key. Under "Other connectors" it lists the
// first 20 providers that other processes call, known here by the shared
// records alone, with their status and why, rate, ceiling and pause.
//
// # Mounting
//
// [New] returns a [Handler], an [http.Handler] rooted at "/". Mount it
// under a prefix with [http.StripPrefix], on the host's mux or on a
// listener of its own:
//
//	h, err := admin.New(sched, admin.Config{Authorize: checkToken})
//	…
//	mux.Handle("/admin/", http.StripPrefix("/admin", h))
//
// The routes and their JSON are listed on [New].
//
// # Security
//
// The handler can pause every provider and create and delete jobs, so
// every request meets the same rules, in this order:
//
//   - Hosts: a request for an IP address, localhost or a name in
//     [Config.Hosts] is served, any other Host refused with 403: a web
//     page the operator visits could point a name of its own at the
//     listener (DNS rebinding) and send it same-origin requests. List the
//     names the handler is served under.
//   - Authorization: [Config.Authorize], a hook of the host's, sees the
//     request before anything of it is read and refuses it with 401 (its
//     error wraps [ErrUnauthenticated]; the answer carries a
//     WWW-Authenticate challenge) or 403. Without the hook every request
//     is served: serve it so only on a listener only operators reach.
//   - No reads for other sites: a GET another site's page made the
//     browser send (an <img>, a script, a fetch: Sec-Fetch-Site
//     cross-site or same-site, other than a link followed to a document)
//     is refused with 403; it could not read the answer, but would cost
//     the collector a snapshot each, hundreds at a time.
//   - No forgery: a state change (any method but GET, HEAD and OPTIONS)
//     must carry "Content-Type: application/json", else 415, and must not
//     come from another origin ([http.CrossOriginProtection]), else 403. A
//     browser cannot send such a request from another site without a CORS
//     preflight, which the handler never grants, so a page the operator
//     visits cannot forge one.
//   - Bounds: a body over 2 MiB answers 413; GET /jobs and GET /providers
//     are paged within [Config.MaxPageBytes]; POST /jobs creates no job
//     beyond [Config.MaxJobs]; only providers the scheduler knows are
//     paused, at most [Config.MaxPausedProviders], and only connectors
//     it knows are steered (no record is made for a key nothing named);
//     the requests that read the whole store take turns.
//   - No secrets served: every error it serves, and every job's last
//     error, has the query values and userinfo of its URLs and the values
//     of well-known secret keys (apikey=…, token: …, Authorization:
//     Bearer …) redacted, and so has an operator's reason for a
//     connector's status, before it is stored; the status page escapes
//     every value.
package admin
