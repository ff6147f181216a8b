package forage_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
)

// secretQuery is a request query holding credentials, as signed exchange
// APIs want them.
const secretQuery = "?symbol=BTCUSDT&apikey=K3Y-s3cr3t&signature=S1G-s3cr3t"

// leaks reports whether msg holds a credential of secretQuery.
func leaks(msg string) bool { return strings.Contains(msg, "s3cr3t") }

// TestFromHTTPRedactsTheURL: a connection reset by the server makes
// net/http return a *url.Error whose message holds the whole URL; the
// Outcome keeps the *url.Error, its cause and its class, but not the
// credentials.
func TestFromHTTPRedactsTheURL(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close() // no answer at all: the client sees EOF
		}
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/v3/klines" + secretQuery)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("the hijacked request succeeded")
	}
	if !leaks(err.Error()) {
		t.Fatalf("net/http's error %q holds no URL: the test proves nothing", err)
	}
	o := forage.FromHTTP(resp, err)
	var ue *url.Error
	if leaks(o.Err.Error()) || !errors.As(o.Err, &ue) || leaks(ue.URL) || !errors.Is(o.Err, io.EOF) {
		t.Fatalf("FromHTTP's Err %q (as *url.Error: %v): a credential left, or the chain lost", o.Err, ue)
	}
	if !strings.Contains(o.Err.Error(), "/api/v3/klines?symbol=BTCUSDT&apikey=REDACTED") {
		t.Fatalf("FromHTTP's Err %q lost the path or the parameter names", o.Err)
	}
}

// TestOutcomeClass pins the rules of Outcome.Class, row by row.
func TestOutcomeClass(t *testing.T) {
	t.Parallel()
	bad := errors.New("bad json")
	tests := []struct {
		name string
		o    forage.Outcome
		want forage.Class
	}{
		{"no status, no error", forage.Outcome{}, forage.Success},
		{"200", forage.Outcome{Status: 200}, forage.Success},
		{"304", forage.Outcome{Status: 304}, forage.Success},
		{"429 explained by a permanent mark", forage.Outcome{Status: 429, Err: forage.Mark(bad, forage.Permanent)}, forage.Throttled},
		{"404 with an error", forage.Outcome{Status: 404, Err: bad}, forage.Permanent},
		{"302 with an error", forage.Outcome{Status: 302, Err: bad}, forage.Permanent},
		{"302 with a transient mark", forage.Outcome{Status: 302, Err: forage.Mark(bad, forage.Transient)}, forage.Transient},
		{"200 with an unmarked error", forage.Outcome{Status: 200, Err: bad}, forage.Permanent},
		{"200 with a transient mark", forage.Outcome{Status: 200, Err: forage.Mark(bad, forage.Transient)}, forage.Transient},
		{"a wrapped mark", forage.Outcome{Err: fmt.Errorf("decode: %w", forage.Mark(bad, forage.Throttled))}, forage.Throttled},
		{"a mark of success", forage.Outcome{Err: forage.Mark(bad, forage.Success)}, forage.Permanent},
		{"a mark of an unknown class", forage.Outcome{Err: forage.Mark(bad, forage.Class(42))}, forage.Permanent},
		{"a network error", forage.Outcome{Err: io.ErrUnexpectedEOF}, forage.Transient},
	}
	for i, tt := range tests {
		if got := tt.o.Class(); got != tt.want {
			t.Errorf("step %d (%s): Class() = %v, want %v", i, tt.name, got, tt.want)
		}
	}
	if forage.Mark(nil, forage.Transient) != nil {
		t.Error("Mark(nil) is not nil")
	}
	if err := forage.Mark(bad, forage.Transient); !errors.Is(err, bad) || err.Error() != bad.Error() {
		t.Errorf("Mark(%v) = %v: the mark hides the error", bad, err)
	}
}

// TestProperty3xxWithErrorIsNeverSuccess: an outcome with a 3xx status and
// an error never classifies as a success, whether built by hand or by
// FromHTTP; without an error a 3xx is a success.
func TestProperty3xxWithErrorIsNeverSuccess(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		code := rapid.IntRange(300, 399).Draw(rt, "code")
		var err error
		if rapid.Bool().Draw(rt, "withErr") {
			err = errors.New("stopped after 10 redirects")
		}
		o := forage.Outcome{Status: code, Err: err}
		if rapid.Bool().Draw(rt, "viaFromHTTP") {
			o = forage.FromHTTP(&http.Response{StatusCode: code, Header: http.Header{}}, err)
		}
		if got := o.Class(); (got == forage.Success) != (err == nil) {
			rt.Fatalf("%d with error %v: Class() = %v", code, err, got)
		}
	})
}

// TestPropertyAStatusOutsideHTTPIsNeverASuccess: an Outcome built by hand
// with a status outside 100–599 other than 0 (no response) is not HTTP and
// classifies as Permanent, as Class documents, whatever its error (a
// negative status or one under 100 read as a success).
func TestPropertyAStatusOutsideHTTPIsNeverASuccess(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		code := rapid.OneOf(rapid.IntRange(-1000, -1), rapid.IntRange(1, 99), rapid.IntRange(600, 100000)).Draw(rt, "code")
		var err error
		if rapid.Bool().Draw(rt, "withErr") {
			err = forage.Mark(errors.New("decode"), forage.Transient)
		}
		if got := (forage.Outcome{Status: code, Err: err}).Class(); got != forage.Permanent {
			rt.Fatalf("Outcome{Status: %d, Err: %v}.Class() = %v, want permanent", code, err, got)
		}
	})
}

// TestQuotaLeft: what is left is Remaining, else Limit - Used (never
// negative), else unknown.
func TestQuotaLeft(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q    forage.Quota
		left float64
		ok   bool
	}{
		{forage.Quota{}, 0, false},
		{forage.Quota{Remaining: 3, Used: 9, Limit: 10, HasLimit: true, HasRemaining: true, HasUsed: true}, 3, true},
		{forage.Quota{Used: 4, Limit: 10, HasLimit: true, HasUsed: true}, 6, true},
		{forage.Quota{Used: 12, Limit: 10, HasLimit: true, HasUsed: true}, 0, true},
		{forage.Quota{Used: 4, HasUsed: true}, 0, false},
		{forage.Quota{Limit: 10, HasLimit: true}, 0, false},
	}
	for i, tt := range tests {
		if left, ok := tt.q.Left(); left != tt.left || ok != tt.ok {
			t.Errorf("step %d: %+v.Left() = (%g, %v), want (%g, %v)", i, tt.q, left, ok, tt.left, tt.ok)
		}
	}
}

// TestPropertyFromHTTPAgreesWithClassify: whatever the status (net/http
// reads any three digits, 000 included) and whether an error came with it
// (with a response, only a redirect the client stopped following),
// FromHTTP's Outcome classifies as Classify does. Before, a status under
// 100 and no response at all were successes.
func TestPropertyFromHTTPAgreesWithClassify(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		var resp *http.Response
		if rapid.IntRange(0, 9).Draw(rt, "hasResp") > 0 {
			code := rapid.IntRange(0, 999).Draw(rt, "code")
			if rapid.Bool().Draw(rt, "forbidden") {
				code = http.StatusForbidden // the status whose headers can make it throttling
			}
			resp = &http.Response{StatusCode: code, Header: http.Header{}}
			if rapid.Bool().Draw(rt, "retryAfter") {
				resp.Header.Set("Retry-After", "5")
			}
			if rapid.Bool().Draw(rt, "spent") {
				resp.Header.Set("X-RateLimit-Remaining", "0")
			}
		}
		var err error
		if rapid.IntRange(0, 3).Draw(rt, "hasErr") == 0 {
			err = errors.New("connection reset")
			if resp != nil { // net/http returns both only for a redirect it stopped following
				resp.StatusCode = rapid.IntRange(300, 399).Draw(rt, "redirect")
			}
		}
		got, want := forage.FromHTTP(resp, err).Class(), forage.Classify(resp, err)
		if got != want {
			rt.Fatalf("FromHTTP(%v, %v).Class() = %v, Classify says %v", resp, err, got, want)
		}
	})
}
