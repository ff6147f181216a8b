package main

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxEvents bounds the requests one recorder keeps (about 24 MB); past it,
// requests are still served but no longer recorded, and the cell says so.
const maxEvents = 1 << 20

// event is one request as the server saw it, in offsets from the cell's
// start: when it arrived, when its answer was written, and the status (0 if
// none was written: the client went away, or the connection was reset).
type event struct {
	at, done time.Duration
	status   int
	sym      int // the index of the request's symbol in symbols, -1 for another
}

// recorder is an http.Handler that serves through h and records every
// request's event. It is safe for concurrent use.
type recorder struct {
	h     http.Handler
	start time.Time

	mu      sync.Mutex
	events  []event
	dropped int
}

// ServeHTTP serves r through the wrapped handler and records it, also when
// the handler aborts (an injected reset panics with http.ErrAbortHandler).
func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Since(rec.start)
	sym := symbolIndex(r.URL.Query().Get("symbol"))
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		done := time.Since(rec.start)
		rec.mu.Lock()
		if len(rec.events) < maxEvents {
			rec.events = append(rec.events, event{at, done, sw.status, sym})
		} else {
			rec.dropped++
		}
		rec.mu.Unlock()
	}()
	rec.h.ServeHTTP(sw, r)
}

// snapshot returns the events so far and how many were not recorded.
func (rec *recorder) snapshot() ([]event, int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]event(nil), rec.events...), rec.dropped
}

// served counts the 200s for symbols[sym] answered within [from, to).
func (rec *recorder) served(sym int, from, to time.Duration) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for _, e := range rec.events {
		if e.status == http.StatusOK && e.sym == sym && e.done >= from && e.done < to {
			n++
		}
	}
	return n
}

// symbolIndex returns the index of name in symbols, or -1.
func symbolIndex(name string) int {
	for i, s := range symbols {
		if s == name {
			return i
		}
	}
	return -1
}

// statusWriter remembers the status written through it. It passes Hijack
// through, so the simulator's resets stay real TCP resets.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code and writes it.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write writes b, with an implicit 200 if no status was written yet.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Hijack hands over the connection, as the wrapped writer does.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	return hj.Hijack()
}
