package providertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Client returns an *http.Client whose Transport serves every request in
// memory, whatever its URL's host, in the caller's goroutine: the uplink
// delay ([Config.Uplink]) is waited out, the limit policy decides, then the
// latency (and any slow-down) is waited out on a timer that honours the
// request's context. Inside a testing/synctest bubble that timer is fake,
// so simulated time passes without real waiting. An injected reset returns
// an error for which errors.Is(err, syscall.ECONNRESET) holds. Wrap its
// Transport to put a budget in front of the server. The client and its
// transport are safe for concurrent use and hold no connections.
func (s *Server) Client() *http.Client { return &http.Client{Transport: transport{s}} }

// transport is the in-memory RoundTripper of a Server.
type transport struct{ s *Server }

// RoundTrip serves req in memory; see Server.Client.
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
	if rep.header == nil {
		rep.header = http.Header{}
	}
	t.s.date(rep.header)
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
