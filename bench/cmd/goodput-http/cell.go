package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/forage-go/forage/providertest"
)

// result is one client's measurement against one row for one duration.
type result struct {
	Row    string        `json:"row"`
	Client string        `json:"client"`
	Run    time.Duration `json:"run_ns"`
	// Servable is what the provider could serve over Run (see row.servable).
	Servable float64 `json:"servable"`
	// OK is the 200 answers the server wrote within Run.
	OK int64 `json:"ok"`
	// Goodput is OK / Servable.
	Goodput float64 `json:"goodput"`
	// Requests is every request the server received; Refused those it
	// refused for the limit (429, the limit's 503, 418); Noise its injected
	// faults; Bans the bans it entered (the server's Stats).
	Requests int64 `json:"requests"`
	Refused  int64 `json:"refused"`
	Noise    int64 `json:"noise"`
	Bans     int64 `json:"bans"`
	// RefusedShare is Refused / Requests.
	RefusedShare float64 `json:"refused_share"`
	// T90 is the time from the first request until 90% of the limit (net
	// of noise) was first served within one second; Reached is false if it
	// never was.
	T90     time.Duration `json:"t90_ns"`
	Reached bool          `json:"t90_reached"`
	// Note is what the client reported: ohlcv's status, candles and learned
	// rate, or why it failed.
	Note string `json:"note,omitempty"`
	// Failed is true when the client failed (ohlcv exited non-zero, or the
	// cell could not run).
	Failed bool `json:"failed,omitempty"`
	// PerSecond is [ok, refused, other] per second of the run (with -trace
	// or -json).
	PerSecond [][3]int `json:"per_second,omitempty"`
	// events are the requests as the server saw them (with -trace only),
	// written beside the per-second counts.
	events []event
	// Procs is the number of processes of a pg client; Work each one's
	// part of OK (process i collects symbols[i]).
	Procs int       `json:"procs,omitempty"`
	Work  []float64 `json:"work,omitempty"`
	// DB is what a pg client's processes asked of PostgreSQL, and Kill
	// what happened to the process killed mid-run.
	DB   *dbUse      `json:"db,omitempty"`
	Kill *killReport `json:"kill,omitempty"`
}

// env is what a client gets for one cell: the server's base URL, the run
// length, a fresh temporary directory, and the number of workers.
type env struct {
	base    string
	run     time.Duration
	dir     string
	workers int
	// log, when set (-trace), is the file for the ohlcv binary's -v log.
	log string
	// rec records the cell's requests; its start is the cell's.
	rec *recorder
	// For a pg client: the cell's database, the server's admin connection,
	// the built ohlcv binary, and where to report the process killed.
	dsn  string
	pg   *pgAdmin
	bin  string
	kill *killReport
}

// runCell measures cl against a fresh server for rw over run: its own
// loopback port, its own temporary directory under tmp.
func runCell(ctx context.Context, rw row, cl client, run time.Duration, o options) result {
	res := result{Row: rw.name, Client: cl.name, Run: run, Servable: rw.servable(run)}
	dir, err := os.MkdirTemp(o.tmp, "cell-")
	if err != nil {
		return res.fail(err)
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	offset := time.Duration(0)
	if rw.fixedWindow() {
		// Shift the server's clock so the run starts at a window boundary:
		// a run of n windows then spans exactly n quotas, not n+1 partial ones.
		w := rw.limit.Window
		offset = (w - time.Duration(start.UnixNano())%w) % w
	}
	srv, err := providertest.New(rw.config(run, func() time.Time { return time.Now().Add(offset) }, o.seed, o.latency, o.jitter))
	if err != nil {
		return res.fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res.fail(err)
	}
	rec := &recorder{h: srv, start: start}
	hs := &http.Server{Handler: rec, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)

	e := env{base: "http://" + ln.Addr().String(), run: run, dir: dir, workers: o.workers, rec: rec}
	if o.traceDir != "" {
		e.log = filepath.Join(o.traceDir, fmt.Sprintf("%s-%s-%s.log", run, slug(rw.name), cl.name))
	}
	if cl.group != nil {
		runGroupCell(ctx, rw, cl, &res, e, o)
	} else {
		note, cerr := cl.run(ctx, rw, e)
		if cerr != nil {
			res.Failed = true
			note = cerr.Error()
		}
		res.Note = note
	}
	_ = hs.Close()
	res.measure(rw, srv.Stats(), rec, o.trace)
	return res
}

// measure fills res from the server's stats and the recorded events.
func (res *result) measure(rw row, st providertest.Stats, rec *recorder, trace bool) {
	events, dropped := rec.snapshot()
	ok := successes(events, res.Run)
	res.OK = int64(len(ok))
	res.Goodput = float64(res.OK) / res.Servable
	res.Requests, res.Noise, res.Bans = st.Requests, st.Faults, st.Bans
	res.Refused = st.Throttled + st.Unavailable + st.Banned
	res.RefusedShare = float64(res.Refused) / float64(max(st.Requests, 1))
	if first, any := firstArrival(events); any {
		res.T90, res.Reached = t90(ok, first, func(t time.Duration) float64 {
			return rw.rate(t, res.Run) * (1 - rw.faultRate)
		})
	}
	if trace {
		res.events = events
		res.PerSecond = perSecond(events, res.Run, func(e event) bool {
			return e.status == 429 || e.status == 418 || (e.status == 503 && rw.answer.Status == http.StatusServiceUnavailable)
		})
	}
	if res.Procs > 0 {
		res.Work = work(events, res.Run, res.Procs)
	}
	if k := res.Kill; k != nil && k.At > 0 {
		k.measure(rw, ok, res.Run)
	}
	if dropped > 0 {
		res.Note += fmt.Sprintf(" (%d requests past the recorder's bound not counted)", dropped)
	}
}

// fail marks res as a cell that could not run.
func (res result) fail(err error) result {
	res.Failed, res.Note = true, err.Error()
	return res
}
