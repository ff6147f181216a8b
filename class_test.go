package forage_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
)

// TestClassifyStatus: the class of a status code, as Classify reads a
// response and Outcome.Class a status in 100–599.
func TestClassifyStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		codes []int
		want  forage.Class
	}{
		{[]int{100, 101, 103, 199}, forage.Success},
		{[]int{200, 201, 204, 206, 299}, forage.Success},
		{[]int{300, 301, 302, 304, 307, 308, 399}, forage.Success},
		{[]int{429, 418}, forage.Throttled},
		{[]int{503}, forage.Overloaded},
		{[]int{408}, forage.Transient},
		{[]int{500, 501, 502, 504, 505, 507, 511, 599}, forage.Transient},
		{[]int{400, 401, 403, 404, 405, 409, 410, 413, 422, 425, 451, 499}, forage.Permanent},
		{[]int{-1, 0, 1, 99, 600, 999, 1 << 30}, forage.Permanent},
	}
	for _, tt := range tests {
		for _, code := range tt.codes {
			if got := (forage.Outcome{Status: code}).Class(); code >= 100 && code <= 599 && got != tt.want {
				t.Errorf("Outcome{Status: %d}.Class() = %v; want %v", code, got, tt.want)
			}
			if got := forage.Classify(&http.Response{StatusCode: code}, nil); got != tt.want {
				t.Errorf("Classify(status %d, nil) = %v; want %v", code, got, tt.want)
			}
		}
	}
}

// TestClassifyStatusTotal: every int has a class, never Canceled (a status
// says nothing about the caller), and each family maps as documented.
func TestClassifyStatusTotal(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		code := rapid.Int().Draw(rt, "code")
		c := forage.Classify(&http.Response{StatusCode: code}, nil)
		var want forage.Class
		switch {
		case code == 429 || code == 418:
			want = forage.Throttled
		case code == 503:
			want = forage.Overloaded
		case code == 408 || (code >= 500 && code <= 599):
			want = forage.Transient
		case code >= 100 && code <= 399:
			want = forage.Success
		default:
			want = forage.Permanent
		}
		if c != want {
			rt.Fatalf("Classify(status %d, nil) = %v; want %v", code, c, want)
		}
	})
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyError(t *testing.T) {
	t.Parallel()
	opErr := func(op string, err error) error {
		return &net.OpError{Op: op, Net: "tcp", Err: &os.SyscallError{Syscall: op, Err: err}}
	}
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "https://api.example.com/x", Err: err} }
	tests := []struct {
		name string
		err  error
		want forage.Class
	}{
		{"canceled", context.Canceled, forage.Canceled},
		{"canceled in url.Error", urlErr(context.Canceled), forage.Canceled},
		{"canceled wrapped", fmt.Errorf("fetch page 3: %w", context.Canceled), forage.Canceled},
		{"deadline", context.DeadlineExceeded, forage.Transient},
		{"deadline in url.Error", urlErr(context.DeadlineExceeded), forage.Transient},
		{"os deadline", os.ErrDeadlineExceeded, forage.Transient},
		{"net.Error timeout", urlErr(timeoutErr{}), forage.Transient},
		{"connection reset", urlErr(opErr("read", syscall.ECONNRESET)), forage.Transient},
		{"connection refused", urlErr(opErr("dial", syscall.ECONNREFUSED)), forage.Transient},
		{"network unreachable", opErr("dial", syscall.ENETUNREACH), forage.Transient},
		{"broken pipe", opErr("write", syscall.EPIPE), forage.Transient},
		{"EOF", urlErr(io.EOF), forage.Transient},
		{"unexpected EOF", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), forage.Transient},
		{"closed connection", net.ErrClosed, forage.Transient},
		{"DNS not found", urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nx.example", IsNotFound: true}}), forage.Permanent},
		{"DNS temporary", &net.DNSError{Err: "server misbehaving", Name: "api.example.com", IsTemporary: true}, forage.Transient},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "api.example.com", IsTimeout: true}, forage.Transient},
		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), forage.Permanent},
		{"hostname mismatch", urlErr(x509.HostnameError{Host: "api.example.com", Certificate: &x509.Certificate{}}), forage.Permanent},
		{"not TLS", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), forage.Permanent},
		{"TLS in OpError", opErr("remote error", tls.RecordHeaderError{Msg: "bad"}), forage.Permanent},
		{"unsupported scheme", urlErr(errors.New(`unsupported protocol scheme "ftp"`)), forage.Permanent},
		{"plain error", errors.New("decode: invalid character"), forage.Permanent},
		{"joined", errors.Join(errors.New("attempt 2"), opErr("read", syscall.ECONNRESET)), forage.Transient},
		{"joined timeout", fmt.Errorf("%w; %w", errors.New("x"), timeoutErr{}), forage.Transient},
	}
	for _, tt := range tests {
		if got := forage.Classify(nil, tt.err); got != tt.want {
			t.Errorf("%s: Classify(nil, %v) = %v; want %v", tt.name, tt.err, got, tt.want)
		}
		// An error takes precedence over a response.
		if got := forage.Classify(&http.Response{StatusCode: http.StatusOK}, tt.err); got != tt.want {
			t.Errorf("%s: Classify(200, %v) = %v; want %v", tt.name, tt.err, got, tt.want)
		}
	}
	if got := forage.Classify(nil, nil); got != forage.Permanent {
		t.Errorf("Classify(nil, nil) = %v; want permanent", got)
	}
}

// TestClassifyRealErrors classifies the errors a real http.Client returns
// over loopback: refused, closed mid-response, timed out, canceled.
func TestClassifyRealErrors(t *testing.T) {
	t.Parallel()
	get := func(ctx context.Context, u string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if err := get(context.Background(), "http://"+addr); forage.Classify(nil, err) != forage.Transient {
			t.Fatalf("Classify(%v) = %v; want transient", err, forage.Classify(nil, err))
		}
	})
	t.Run("hang up", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		defer srv.Close()
		if err := get(context.Background(), srv.URL); forage.Classify(nil, err) != forage.Transient {
			t.Fatalf("Classify(%v) = %v; want transient", err, forage.Classify(nil, err))
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		if err := get(ctx, "http://127.0.0.1:1"); forage.Classify(nil, err) != forage.Transient {
			t.Fatalf("Classify(%v) = %v; want transient", err, forage.Classify(nil, err))
		}
	})
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := get(ctx, "http://127.0.0.1:1"); forage.Classify(nil, err) != forage.Canceled {
			t.Fatalf("Classify(%v) = %v; want canceled", err, forage.Classify(nil, err))
		}
	})
}

func TestClassRetryableAndString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		c         forage.Class
		retryable bool
		name      string
	}{
		{forage.Success, false, "success"},
		{forage.Throttled, true, "throttled"},
		{forage.Overloaded, true, "overloaded"},
		{forage.Transient, true, "transient"},
		{forage.Permanent, false, "permanent"},
		{forage.Canceled, false, "canceled"},
		{forage.Class(42), false, "Class(42)"},
	}
	for _, tt := range tests {
		if got := tt.c.Retryable(); got != tt.retryable {
			t.Errorf("%v.Retryable() = %v; want %v", tt.c, got, tt.retryable)
		}
		if got := tt.c.String(); got != tt.name {
			t.Errorf("Class(%d).String() = %q; want %q", uint8(tt.c), got, tt.name)
		}
	}
}

func BenchmarkClassify(b *testing.B) {
	err := &url.Error{Op: "Get", URL: "https://api.example.com", Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}
	resp := &http.Response{StatusCode: http.StatusTooManyRequests}
	b.Run("status", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			forage.Classify(resp, nil)
		}
	})
	b.Run("error", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			forage.Classify(nil, err)
		}
	})
}
