// Package admin serves the operator's view of a [schedule.Scheduler] over
// HTTP: a JSON API to list, create, pause, resume, run and delete jobs and
// to pause and resume providers, the scheduler's metrics
// ([schedule.Snapshot]) as JSON, and a server-rendered HTML status page.
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
//   - Authorization: [Config.Authorize], a hook of the host's, sees the
//     request before anything of it is read and refuses it with 401 (its
//     error wraps [ErrUnauthenticated]; the answer carries a
//     WWW-Authenticate challenge) or 403. Without the hook every request is
//     served: then only operators may reach the handler.
//   - No forgery: a state change (any method but GET, HEAD and OPTIONS)
//     must carry "Content-Type: application/json", else 415, and must not
//     come from another origin ([http.CrossOriginProtection]), else 403. A
//     browser cannot send such a request from another site without a CORS
//     preflight, which the handler never grants, so a page the operator
//     visits cannot forge one.
//   - Bounds: a body over 2 MiB answers 413; GET /jobs and GET /providers
//     are paged within [Config.MaxPageBytes]; POST /jobs creates no job
//     beyond [Config.MaxJobs]; only providers the scheduler knows are
//     paused, at most [Config.MaxPausedProviders]; the requests that read
//     the whole store take turns.
//   - No secrets served: every error it serves, and every job's last
//     error, has the query values and userinfo of its URLs and the values
//     of well-known secret keys (apikey=…, token: …, Authorization:
//     Bearer …) redacted; the status page escapes every value.
package admin
