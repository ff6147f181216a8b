package forage_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/forage-go/forage"
)

// stalled stands for a body that sends a byte, then nothing, as a host
// that tarpits its answers does: it counts its reads (a read after the
// first would wait for good) and fails them.
type stalled struct {
	reads  int
	closed chan struct{}
}

func (b *stalled) Read(p []byte) (int, error) {
	b.reads++
	if b.reads == 1 {
		p[0] = '{'
		return 1, nil
	}
	return 0, errors.New("a read of a stalled body: here it would wait for good")
}

func (b *stalled) Close() error { close(b.closed); return nil }

// An answer that is not a success is not read, and its body is closed
// unread: FromHTTPJSON drained up to 64 KiB of it first, for the
// connection's reuse, and a 503 that sent a byte and then stalled held
// the fetch until the caller's deadline (inside Provider.Do, each attempt
// its whole AttemptTimeout and its bulkhead slot), or for good.
func TestFromHTTPJSONDoesNotWaitOnABodyItDoesNotRead(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusNotFound} {
		b := &stalled{closed: make(chan struct{})}
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: b}
		var v map[string]any
		out := forage.FromHTTPJSON(resp, nil, &v)
		if out.Class() == forage.Success {
			t.Fatalf("HTTP %d: a success", status)
		}
		if b.reads != 0 {
			t.Errorf("HTTP %d: the body of an answer that is not a success was read %d times; want none", status, b.reads)
		}
		select {
		case <-b.closed:
		default:
			t.Errorf("HTTP %d: the body was not closed", status)
		}
	}
}

// A body cut short of its length after a whole JSON value is said to be
// cut short, not "more after the JSON value".
func TestFromHTTPJSONSaysABodyCutShortIsCutShort(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(io.MultiReader(strings.NewReader(`{"items":[1]}`), errReader{io.ErrUnexpectedEOF}))}
	var p page
	out := forage.FromHTTPJSON(resp, nil, &p)
	if out.Class() != forage.Transient || out.Err == nil || !strings.Contains(out.Err.Error(), "cut short") || strings.Contains(out.Err.Error(), "more after") {
		t.Fatalf("a body cut short after its JSON value: %v, %v; want Transient, cut short", out.Class(), out.Err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
