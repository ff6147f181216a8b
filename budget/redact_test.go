package budget_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"pgregory.net/rapid"
)

// secretQuery is a request query holding credentials, as signed exchange
// APIs want them.
const secretQuery = "?symbol=BTCUSDT&apikey=K3Y-s3cr3t&signature=S1G-s3cr3t"

// leaks reports whether msg holds a credential of secretQuery.
func leaks(msg string) bool { return strings.Contains(msg, "s3cr3t") }

// TestStopMessageHoldsNoSecret: the *Error a provider returns after a
// network failure quotes the attempt's error with its URL redacted, and the
// failure is still classified as a network one (transient: retried).
func TestStopMessageHoldsNoSecret(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reset := &url.Error{Op: "Get", URL: "https://api.example.com/v3/klines" + secretQuery,
			Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}}
		n := 0
		err := newLocal(t, fast()).Do(context.Background(), newRun(t, budget.Envelope{MaxRequests: 3}),
			func(context.Context) forage.Outcome { n++; return forage.FromHTTP(nil, reset) })
		if err == nil || leaks(err.Error()) {
			t.Fatalf("Do = %v: want a stop without the credentials", err)
		}
		if n < 2 {
			t.Fatalf("%d attempts: the redacted network error was not retried as transient", n)
		}
	})
}

// TestTransportErrorHoldsNoSecret: a base RoundTripper failing with a
// *url.Error (as one wrapping an http.Client does) surfaces through the
// Transport as a *budget.Error without the credentials.
func TestTransportErrorHoldsNoSecret(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return nil, &url.Error{Op: "Get", URL: r.URL.String(), Err: errors.New("tls: handshake failure")}
		})
		client, _ := transportClient(t, base)
		_, err := client.Get("https://api.example.com/v3/klines" + secretQuery)
		var be *budget.Error
		if !errors.As(err, &be) || leaks(be.Error()) {
			t.Fatalf("Get = %v: want a *budget.Error without the credentials (got %v)", err, be)
		}
	})
}

// TestRedirectLoopIsNotASuccess is the regression for a redirect loop
// counted as a success: net/http returns the last 302 with "stopped after
// 10 redirects", and the call stops as permanent after one attempt, saying
// why.
func TestRedirectLoopIsNotASuccess(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.String(), http.StatusFound)
	}))
	defer srv.Close()
	n := 0
	err := newLocal(t, fast()).Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
		n++
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/loop"+secretQuery, nil)
		resp, err := srv.Client().Do(req)
		if resp == nil || err == nil {
			t.Errorf("net/http returned (%v, %v), want the last 302 and an error", resp, err)
		}
		return forage.FromHTTP(resp, err)
	})
	if err == nil {
		t.Fatal("a redirect loop counted as a success")
	}
	if r := reasonOf(t, err); r != forage.ReasonPermanent || n != 1 {
		t.Fatalf("reason %q after %d attempts, want permanent after 1", r, n)
	}
	if msg := err.Error(); !strings.Contains(msg, "redirect") || !strings.Contains(msg, "stopped after 10 redirects") || leaks(msg) {
		t.Fatalf("message %q: want it to name the redirect loop, without the credentials", msg)
	}
}

// TestProperty3xxWithErrorFails: an outcome with a 3xx status and an error
// never counts as a success; without an error a 3xx is a success (e.g. a
// 304, or a redirect the host chose not to follow).
func TestProperty3xxWithErrorFails(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		code := rapid.IntRange(300, 399).Draw(rt, "code")
		withErr := rapid.Bool().Draw(rt, "withErr")
		viaFromHTTP := rapid.Bool().Draw(rt, "viaFromHTTP")
		var o forage.Outcome
		switch {
		case viaFromHTTP && withErr:
			o = forage.FromHTTP(&http.Response{StatusCode: code, Header: http.Header{}}, errors.New("stopped after 10 redirects"))
		case viaFromHTTP:
			o = forage.FromHTTP(&http.Response{StatusCode: code, Header: http.Header{}}, nil)
		case withErr:
			o = forage.Outcome{Status: code, Err: errors.New("klines: status 302: moved")}
		default:
			o = forage.Outcome{Status: code}
		}
		n := 0
		err := newLocal(rt, fast()).Do(context.Background(), nil, func(context.Context) forage.Outcome { n++; return o })
		switch {
		case withErr && (err == nil || reasonOf(rt, err) != forage.ReasonPermanent || n != 1):
			rt.Fatalf("%d with an error: Do = %v after %d attempts, want permanent after 1", code, err, n)
		case !withErr && err != nil:
			rt.Fatalf("%d without an error: Do = %v, want success", code, err)
		}
	})
}

// TestAStopNamesNoCredentialOfTheHostsOwnError: an attempt whose error the
// host built with the request URL in it (a body it could not read or
// decode, the URL carrying ?access_token=) stops the call with an error
// whose message masks the credential, as FromHTTP's do, and errors.Is still
// reaches the cause. The message carried the attempt's error as it was, into
// every host log and wrapping error.
func TestAStopNamesNoCredentialOfTheHostsOwnError(t *testing.T) {
	t.Parallel()
	p := newLocal(t, fast())
	const secret = "ghp_stopS3CR3T"
	err := p.Do(context.Background(), nil, func(ctx context.Context) forage.Outcome {
		return forage.Outcome{Status: 200, Err: forage.Mark(fmt.Errorf("decoding http://api.example.com/issues?page=2&access_token=%s: %w", secret, io.ErrUnexpectedEOF), forage.Permanent)}
	})
	if err == nil || strings.Contains(err.Error(), secret) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stop %q (errors.Is the cause: %v); want the credential masked and the cause reachable", err, errors.Is(err, io.ErrUnexpectedEOF))
	}
}

// TestAFailedRecordSaveIsLoggedWithoutSecrets: the Warn record of a save of
// the provider's record that failed quotes the store's error with its URLs
// redacted, as every other record of the provider's and the scheduler's
// does: a store over HTTP failed with its URL, query token and userinfo
// in the error, and the log line held them as they were.
func TestAFailedRecordSaveIsLoggedWithoutSecrets(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		cfg := fast()
		cfg.Logger = slog.New(slog.NewTextHandler(&out, nil))
		cfg.Records = &fakeRecords{failSave: &url.Error{Op: "Post",
			URL: "https://svc:pa55-s3cr3t@records.example/v1/save" + secretQuery, Err: errors.New("connection refused")}}
		p := newLocal(t, cfg)
		_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 429, RetryAfter: time.Second} // a pause: saved at once
		}, budget.CallOption{NoRetry: true})
		synctest.Wait()
		logs := out.String()
		if !strings.Contains(logs, "saving the provider's record failed") {
			t.Fatalf("no record of the failed save:\n%s", logs)
		}
		if leaks(logs) || strings.Contains(logs, "pa55") {
			t.Errorf("the log holds the store's credentials:\n%s", logs)
		}
	})
}
