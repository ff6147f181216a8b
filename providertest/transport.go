package providertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Transport returns an http.RoundTripper that serves every request in
// memory, whatever its URL's host, in the caller's goroutine: the uplink
// delay ([Config.Uplink]) is waited out, the limit policy decides, then the
// latency (and any slow-down) is waited out on a timer that honours the
// request's context. Inside a testing/synctest bubble that timer is fake,
// so simulated time passes without real waiting. An injected reset returns
// an error for which errors.Is(err, syscall.ECONNRESET) holds. The
// transport is safe for concurrent use and holds no connections.
func (s *Server) Transport() http.RoundTripper { return transport{s} }

// Client returns an *http.Client using [Server.Transport].
func (s *Server) Client() *http.Client { return &http.Client{Transport: s.Transport()} }

// transport is the in-memory RoundTripper of a Server.
type transport struct{ s *Server }

// RoundTrip serves req in memory; see Server.Transport.
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := sleep(ctx, t.s.uplink()); err != nil {
		return nil, err
	}
	rep := t.s.serve(req)
	if err := sleep(ctx, rep.delay); err != nil {
		return nil, err
	}
	if rep.reset {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	body := rep.body
	rep.header.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", rep.status, http.StatusText(rep.status)),
		StatusCode:    rep.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rep.header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// sleep waits d or until ctx ends, returning ctx's error in the latter case.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resetConn drops the connection under w without a response: a TCP reset
// (linger 0) when the connection can be hijacked, an aborted handler otherwise.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// Loopback is a Server listening on 127.0.0.1 for wall-clock runs. It is safe
// for concurrent use.
type Loopback struct {
	// URL is the base URL, e.g. "http://127.0.0.1:41234", without a trailing slash.
	URL string
	srv *http.Server
}

// Listen serves s on a fresh 127.0.0.1 port in a background goroutine until
// [Loopback.Close]. Go's http.Transport silently retries a GET once when a
// reused keep-alive connection is reset, so a client that must see injected
// resets should disable keep-alives.
func (s *Server) Listen() (*Loopback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("providertest: listen: %w", err)
	}
	l := &Loopback{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}}
	go l.srv.Serve(ln)
	return l, nil
}

// Close stops the listener and closes every connection at once; handlers
// waiting out latency return as their requests are cancelled.
func (l *Loopback) Close() error {
	if err := l.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("providertest: close: %w", err)
	}
	return nil
}
