package redact_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/forage-go/forage/internal/redact"
	"pgregory.net/rapid"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct{ in, want string }{
		{"https://api.example.com/v3/klines", "https://api.example.com/v3/klines"},
		{"https://api.example.com/v3/klines?symbol=BTC&apikey=k1&signature=s1",
			"https://api.example.com/v3/klines?symbol=BTC&apikey=REDACTED&signature=REDACTED"},
		{"https://user:pw@h:8443/p?x=1#frag", "https://REDACTED@h:8443/p?x=REDACTED#REDACTED"},
		{"https://key@h/p", "https://REDACTED@h/p"},
		{"http://h/p?bare&empty=&a=b=c", "http://h/p?REDACTED&empty=&a=REDACTED"},
		{"http://h/p?" + strings.Repeat("k", 65) + "=v", "http://h/p?REDACTED"},
		{"http://h/p?next=https://e/?t=1&x=2", "http://h/p?next=REDACTED&x=REDACTED"},
		{"http://h/p?", "http://h/p?"},
		{"http://h/p/a@b", "http://h/p/a@b"}, // an @ in the path is no userinfo
		{"/api/v3/klines?apikey=k", "/api/v3/klines?apikey=REDACTED"},
	} {
		if got := redact.URL(tc.in); got != tc.want {
			t.Errorf("%d: URL(%q) = %q, want %q", i, tc.in, got, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct{ in, want string }{
		{`Get "https://h/p?apikey=k1&sig=s1": EOF`, `Get "https://h/p?apikey=REDACTED&sig=REDACTED": EOF`},
		{`dial https://u:p@h/x then (http://h/?a=1)`, `dial https://REDACTED@h/x then (http://h/?a=REDACTED`},
		{`url=https://h/?k=v,next`, `url=https://h/?k=REDACTED`},
		{`GET /api/v3/klines?apikey=k failed`, `GET /api/v3/klines?apikey=REDACTED failed`},
		{`what? a=1 and b=2`, `what? a=1 and b=2`}, // no URL
		{`plain text`, `plain text`},
		{`"https://h/?a=\"x&k=s"`, `"https://h/?a=REDACTED&k=REDACTED"`}, // %q's escaped quote stays inside
		{"tab\thttps://h/?k=v\nnext", "tab\thttps://h/?k=REDACTED\nnext"},
	} {
		if got := redact.String(tc.in); got != tc.want {
			t.Errorf("%d: String(%q)\n got %q\nwant %q", i, tc.in, got, tc.want)
		}
	}
}

// TestErrorKeepsTheChain: a *url.Error stays one (errors.As, Timeout), its
// cause is still found by errors.Is, and other errors are wrapped.
func TestErrorKeepsTheChain(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t"
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}
	ue := &url.Error{Op: "Get", URL: "https://h/p?apikey=" + secret, Err: timeout}
	got := redact.Error(ue)
	var back *url.Error
	if !errors.As(got, &back) || !back.Timeout() || !errors.Is(got, context.DeadlineExceeded) {
		t.Fatalf("Error(%v) = %#v: lost the *url.Error, its Timeout or its cause", ue, got)
	}
	if strings.Contains(got.Error(), secret) || strings.Contains(back.URL, secret) {
		t.Fatalf("secret in %q (URL %q)", got, back.URL)
	}
	wrapped := fmt.Errorf("fetch: %w", &url.Error{Op: "Get", URL: "https://h/?k=" + secret, Err: io.EOF})
	got = redact.Error(wrapped)
	if strings.Contains(got.Error(), secret) || !errors.Is(got, io.EOF) || !errors.Is(got, wrapped) {
		t.Fatalf("Error(%v) = %v: a secret left, or the chain lost", wrapped, got)
	}
	plain := errors.New("no url here")
	if redact.Error(plain) != plain || redact.Error(nil) != nil {
		t.Fatal("an error without a URL is not returned as it is")
	}
}

// secretGen draws a query value that holds a secret: it starts with "ZZ",
// which nothing else the properties draw contains, and has the characters
// a query value may hold, '=' '?' ':' '/' included.
func secretGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		return "ZZ" + rapid.StringMatching(`[A-Za-z0-9%+/:=?._~-]{0,24}`).Draw(t, "tail")
	})
}

// urlGen draws a URL whose query values and userinfo are secrets, and
// returns it with the parts that must survive.
func urlGen(t *rapid.T) (raw, keep string) {
	scheme := rapid.SampledFrom([]string{"http", "https", "wss", "git+ssh"}).Draw(t, "scheme")
	host := rapid.StringMatching(`[a-z][a-z0-9.-]{0,12}(:[0-9]{1,5})?`).Draw(t, "host")
	path := rapid.StringMatching(`(/[a-z0-9._-]{0,8}){0,4}`).Draw(t, "path")
	user := ""
	if rapid.Bool().Draw(t, "userinfo") {
		user = secretGen().Draw(t, "user") + "@"
		user = strings.NewReplacer("/", "", "?", "", "#", "").Replace(user)
	}
	var q []string
	for i, n := 0, rapid.IntRange(0, 5).Draw(t, "params"); i < n; i++ {
		k := rapid.StringMatching(`[a-z_]{1,10}`).Draw(t, "key")
		q = append(q, k+"="+secretGen().Draw(t, "value"))
	}
	raw = scheme + "://" + user + host + path
	if len(q) > 0 {
		raw += "?" + strings.Join(q, "&")
	}
	if rapid.Bool().Draw(t, "fragment") {
		raw += "#" + secretGen().Draw(t, "frag")
	}
	return raw, host + path
}

// noSecretKey reports whether no word of s names a secret (see
// redact.SecretKey).
func noSecretKey(s string) bool {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !('a' <= r && r <= 'z') }) {
		if redact.SecretKey(w) != "" {
			return false
		}
	}
	return true
}

// TestPropertyNoSecretSurvives: a URL with secrets in its userinfo, its
// query values or its fragment, written into a message plainly or with %q
// (as net/http's *url.Error does), loses every secret; its scheme, host and
// path stay.
func TestPropertyNoSecretSurvives(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		raw, u := urlGen(t)
		scheme := raw[:strings.Index(raw, "://")+3]
		before := rapid.StringMatching(`[a-z :(]{0,10}`).Filter(noSecretKey).Draw(t, "before") // "sig: <URL>" masks the URL whole
		after := rapid.StringMatching(`[a-z :),]{0,10}`).Draw(t, "after")
		var msg string
		if rapid.Bool().Draw(t, "quoted") {
			msg = fmt.Sprintf("%s%q%s", before, raw, after)
		} else {
			msg = before + " " + raw + " " + after
		}
		got := redact.String(msg)
		if strings.Contains(got, "ZZ") {
			t.Fatalf("String(%q) = %q keeps a secret", msg, got)
		}
		if !strings.Contains(got, scheme) || !strings.Contains(got, u) {
			t.Fatalf("String(%q) = %q lost the scheme, host or path %q", msg, got, u)
		}
	})
}

// TestStringSecretsOutsideURLs (regression: only words with "://" or a
// "/…?" were redacted, so a provider message echoing a bare
// "apikey=…&signature=…" query kept both): bare query strings lose their
// values, and a well-known secret key's value is masked wherever it stands.
func TestStringSecretsOutsideURLs(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct{ in, want string }{
		{`bad request: apikey=k1&signature=s1`, `bad request: apikey=REDACTED&signature=REDACTED`},
		{`echo (symbol=BTC&sig=s1)`, `echo (symbol=BTC&sig=REDACTED`},
		{`{"code":-1022,"msg":"Signature for this request is not valid.","params":"timestamp=1&signature=abc"}`,
			`{"code":-1022,"msg":"Signature for this request is not valid.","params":"timestamp=REDACTED&signature=REDACTED"}`},
		{`invalid apikey=k1`, `invalid apikey=REDACTED`},
		{`API_KEY=k1 PASSWORD=pw`, `API_KEY=REDACTED PASSWORD=REDACTED`},
		{`token: t1, next`, `token: REDACTED next`},
		{`secret:s1`, `secret:REDACTED`},
		{`msg=x-mbx-apikey:k1`, `msg=x-mbx-apikey:REDACTED`},
		{`{"api_key": "k1", "user": "bob"}`, `{"api_key": "REDACTED", "user": "bob"}`},
		{`{"access_token":"t1"}`, `{"access_token":"REDACTED"}`},
		{`Authorization: Bearer t1`, `Authorization: Bearer REDACTED`},
		{`authorization: t1 rest`, `authorization: REDACTED REDACTED`}, // t1 may be a scheme this package does not know (SSWS, GenieKey): the word after it may be the credential
		{`Authorization: OAuth oauth_consumer_key="S3", oauth_signature="x"`, `Authorization: REDACTED oauth_consumer_key="REDACTED", oauth_signature="REDACTED"`}, // OAuth 1's parameters: each value masked
		{`Ocp-Apim-Subscription-Key: S3 is invalid`, `Ocp-Apim-Subscription-Key: REDACTED is invalid`},
		{`map[X-Functions-Key:[S3]]`, `map[X-Functions-Key:REDACTED`}, // the rest of the word, brackets too
		{`{"AccessKeyId": "S3"}`, `{"AccessKeyId": "REDACTED"}`},
		{`auth=u:p key = k1 passwd:pw`, `auth=REDACTED key = REDACTED passwd:REDACTED`},
		// Unchanged: no secret key, no query string.
		{`error: connection refused at 10:30`, `error: connection refused at 10:30`},
		{`a=1 b=2, status: 429`, `a=1 b=2, status: 429`},
		{`the key was rejected; token expired`, `the key was rejected; token expired`},
		{`duplicate key value violates unique constraint`, `duplicate key value violates unique constraint`},
		{`R&D x&y`, `R&D x&y`},
	} {
		got := redact.String(tc.in)
		if got != tc.want {
			t.Errorf("%d: String(%q)\n got %q\nwant %q", i, tc.in, got, tc.want)
		}
		if again := redact.String(got); again != got {
			t.Errorf("%d: String is not idempotent on %q: %q", i, got, again)
		}
	}
}

func TestSecretKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"apikey", "API_KEY", "X-MBX-APIKEY", "key", "token", "access_token", "refreshToken",
		"secret", "client_secret", "signature", "sig", "password", "passwd", "pwd", "auth", "Authorization"} {
		if redact.SecretKey(k) == "" {
			t.Errorf("SecretKey(%q) = \"\", want a secret", k)
		}
	}
	for _, k := range []string{"", "symbol", "keys", "monkey", "signal", "author", "a b", strings.Repeat("token", 14)} {
		if got := redact.SecretKey(k); got != "" {
			t.Errorf("SecretKey(%q) = %q, want none", k, got)
		}
	}
}

// secretKeyGen draws a well-known secret key as hosts spell it.
func secretKeyGen() *rapid.Generator[string] {
	return rapid.SampledFrom([]string{"apikey", "api_key", "X-MBX-APIKEY", "key", "token", "access_token", "secret",
		"client_secret", "signature", "sig", "password", "passwd", "auth", "Authorization"})
}

// TestPropertyNoSecretOutsideURLs: a secret in a bare query string (of
// any keys), or after a well-known secret key in any of the forms
// providers and hosts write ("k=v", "k:v", "k: v", JSON, an Authorization
// header), is masked wherever the text puts it.
func TestPropertyNoSecretOutsideURLs(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var part string
		switch rapid.IntRange(0, 2).Draw(t, "form") {
		case 0: // a bare query string
			var q []string
			for i, n := 0, rapid.IntRange(2, 5).Draw(t, "params"); i < n; i++ {
				k := rapid.OneOf(rapid.StringMatching(`[a-z_]{1,10}`), secretKeyGen()).Draw(t, "key")
				q = append(q, k+"="+secretGen().Draw(t, "value"))
			}
			part = strings.Join(q, "&")
		case 1: // a secret key and its value
			k, v := secretKeyGen().Draw(t, "key"), rapid.StringMatching(`ZZ[A-Za-z0-9+/=._~-]{0,24}`).Draw(t, "value")
			form := rapid.SampledFrom([]string{"%s=%s", "%s:%s", "%s: %s", `"%s":"%s"`, `"%s": "%s"`, "%s = %s"}).Draw(t, "layout")
			part = fmt.Sprintf(form, k, v)
		default: // an Authorization header
			scheme := rapid.SampledFrom([]string{"", "Bearer ", "Basic ", "token "}).Draw(t, "scheme")
			part = "Authorization: " + scheme + rapid.StringMatching(`ZZ[A-Za-z0-9+/=._~-]{0,24}`).Draw(t, "credential")
		}
		before := rapid.StringMatching(`[a-z (,{]{0,10}`).Draw(t, "before")
		after := rapid.StringMatching(`[a-z ),}]{0,10}`).Draw(t, "after")
		msg := before + " " + part + " " + after
		got := redact.String(msg)
		if strings.Contains(got, "ZZ") {
			t.Fatalf("String(%q) = %q keeps a secret", msg, got)
		}
		if again := redact.String(got); again != got {
			t.Fatalf("String(%q) = %q, but String of that = %q", msg, got, again)
		}
	})
}

// TestPropertyIdempotent: redacting twice is redacting once, for any text,
// including text built from secret keys, separators and URL pieces.
func TestPropertyIdempotent(t *testing.T) {
	t.Parallel()
	pieces := rapid.SampledFrom([]string{"token", "apikey", "Authorization", "Bearer", "key", "sig", "x", "a1",
		"REDACTED", ":", "=", "&", "?", "/", "://", "\"", " ", "\\", "{", "}", ",", "@", "#", "%", "[]", "-", "_"})
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z:/?&=#@" \\]{0,40}`),
			rapid.Custom(func(t *rapid.T) string { return strings.Join(rapid.SliceOfN(pieces, 0, 16).Draw(t, "pieces"), "") }),
		).Draw(t, "s")
		once := redact.String(s)
		if twice := redact.String(once); twice != once {
			t.Fatalf("String(%q) = %q, but String of that = %q", s, once, twice)
		}
	})
}

// TestPropertyPlainTextUntouched: text without '?', '=' or ':' is returned
// as it is, and so is text of words that name no secret joined by ": ",
// "=" and ", " without a query string ("&" never follows an "=").
func TestPropertyPlainTextUntouched(t *testing.T) {
	t.Parallel()
	words := rapid.SampledFrom([]string{"error", "status", "symbol", "BTCUSDT", "429", "10", "30", "limit", "keys",
		"monkey", "author", "signal", "a", "b", "retry", "after", "rate", "exceeded", "é", "and"})
	seps := rapid.SampledFrom([]string{" ", ": ", ":", "=", ", ", " = "})
	rapid.Check(t, func(t *rapid.T) {
		var s string
		if rapid.Bool().Draw(t, "free") {
			s = rapid.String().Filter(func(s string) bool { return !strings.ContainsAny(s, "?=:") }).Draw(t, "s")
		} else {
			var b strings.Builder
			for i, n := 0, rapid.IntRange(0, 12).Draw(t, "words"); i < n; i++ {
				if i > 0 {
					b.WriteString(seps.Draw(t, "sep"))
				}
				b.WriteString(words.Draw(t, "word"))
			}
			s = b.String()
		}
		if got := redact.String(s); got != s {
			t.Fatalf("String(%q) = %q, want it unchanged", s, got)
		}
	})
}

func ExampleString() {
	fmt.Println(redact.String(`Get "https://bob:pw@api.example.com/v3/klines?symbol=BTCUSDT&apikey=k&signature=s": EOF`))
	// Output: Get "https://REDACTED@api.example.com/v3/klines?symbol=BTCUSDT&apikey=REDACTED&signature=REDACTED": EOF
}

// TestClip: a message longer than n is cut to at most n bytes on a rune
// boundary and marked; a shorter one is left alone.
func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly ten", 11, "exactly ten"},
		{"a longer message", 10, "a long …"},
		{"ééééé", 8, "éé …"},
	} {
		got := redact.Clip(tc.s, tc.n)
		if got != tc.want || len(got) > max(tc.n, len(tc.s)) {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestHeaderCredentialsAreMasked: a fetcher that puts its request's
// headers in its error (fmt's %v and %#v of an http.Header, a header
// line with no space after the colon, a Python-style dict) has every
// credential masked, exchanges' passphrases, signatures and cookies too.
// Before, "Authorization:Bearer X" masked the scheme word and let X pass,
// as did both forms of a printed http.Header, and a passphrase
// (OK-ACCESS-PASSPHRASE, KC-API-PASSPHRASE), a signature header
// (OK-ACCESS-SIGN), a cookie and an AWS Credential= went through whole;
// and a provider's error body echoing a Python-style dict
// ({'Authorization': 'Bearer X'}) masked the quoted scheme word and let X
// pass, as did "Bearer X" in free text (with or without a ":" or "=" in
// the message), "Bearer:X" and "Bearer,X".
func TestHeaderCredentialsAreMasked(t *testing.T) {
	t.Parallel()
	checkMasked(t,
		`Authorization:Bearer S3CRET`,
		`authorization=Bearer S3CRET`,
		`map[Authorization:[Bearer S3CRET] X-Mbx-Apikey:[S3CRET]]`,
		`http.Header{"Authorization":[]string{"Bearer S3CRET"}}`,
		`request headers: map[Ok-Access-Passphrase:[S3CRET] Ok-Access-Key:[S3CRET]]`,
		`OK-ACCESS-PASSPHRASE: S3CRET`,
		`KC-API-PASSPHRASE=S3CRET`,
		`OK-ACCESS-SIGN: S3CRET`,
		`X-BAPI-SIGN: S3CRET`,
		`Cookie: session=S3CRET`,
		`Set-Cookie: sid=S3CRET; Path=/`,
		`Authorization: AWS4-HMAC-SHA256 Credential=S3CRET/2024/us-east-1, Signature=S3CRET`,
		`'password': 'S3CRET'`,
		`{'api_key': 'S3CRET'}`,
		`{'Authorization': 'Bearer S3CRET'}`,
		`unauthorized: Bearer S3CRET is expired`,
		`Bearer S3CRET is expired`,
		`HTTP 401 (Bearer S3CRET rejected)`,
		`invalid token 'Bearer S3CRET'`,
		`Bearer:S3CRET`,
		`Bearer,S3CRET`,
	)
}

// TestEncodedAndMultiWordSecretsAreMasked: a secret key's name or its
// separator percent-encoded ("api%5Fkey=", "token%3D"), a session id in a
// URL's path parameters (";jsessionid="), a private key in PEM, which
// spans many words, and the text of an XML element named for a secret
// ("<apiKey>…</apiKey>") are masked. Before, each went through whole, but
// for the PEM block's first word.
func TestEncodedAndMultiWordSecretsAreMasked(t *testing.T) {
	t.Parallel()
	checkMasked(t,
		`api%5Fkey=S3CRET`,
		`token%3DS3CRET`,
		`api_key%3AS3CRET`,
		`GET https://host/p;jsessionid=S3CRET/x?a=1 failed`,
		`private_key="-----BEGIN PRIVATE KEY----- S3CRET S3CRET -----END PRIVATE KEY-----" rejected`,
		`key file: -----BEGIN RSA PRIVATE KEY----- S3CRET`,
		`<request><apiKey>S3CRET</apiKey><symbol>BTC</symbol></request>`,
		`<soap:Fault><ns:Password type="x">S3CRET S3CRET</ns:Password></soap:Fault>`,
		`body: <token>S3CRET`,
	)
	if got := redact.String("rejected: -----BEGIN CERTIFICATE----- S3CRET -----END CERTIFICATE----- at line 3"); got != "rejected: REDACTED at line 3" {
		t.Errorf("a PEM block in the middle: %q", got)
	}
	if in := `<a><symbol>BTCUSDT</symbol><keys/><b x="1">ok</b> 1 < 2</a>`; redact.String(in) != in {
		t.Errorf("String(%q) = %q: only elements named for a secret are masked", in, redact.String(in))
	}
}

// TestXMLSecretsAreMasked: the text of an element named for a secret is
// masked however the markup around it is written (found by a hostile
// review: nested elements of the same name, an end tag that only begins
// like the name, a quoted "/>" or ">" in an attribute, text that begins
// with the mask each let the secret through), String of its result
// changes nothing, and markup without such elements is left alone.
func TestXMLSecretsAreMasked(t *testing.T) {
	t.Parallel()
	checkMasked(t,
		`<token><token>x</token>S3CRET</token>`,
		`<token>A</tokenizer>S3CRET</token>`,
		`<token a="/>">S3CRET</token>`,
		`<token a=">">S3CRET</token>`,
		`<token>REDACTED</b>S3CRET</token>`,
		`<Token>S3CRET</token> end`,
		`<token>S3CRET</token >`,
		"<token\n>S3CRET</token>",
		`<ns:token>S3CRET</ns:token> a=b`,
		`<token x="a=b">S3CRET</token>`,
		`<a x=">"><token>S3CRET</token></a>`,
		`<token>S3CRET<!-- </token> --></token>`,
		`<pass>S3CRET</pass><symbol>BTC</symbol>`,
	)
	for _, in := range []string{"a < b", "a<b", "<br>", "<key/>", "<key />", "<p>hi <b>x</b></p>", "<token></token>",
		"usage: cli <token> <symbol>", "<", "<token", "<:>"} {
		if got := redact.String(in); got != in {
			t.Errorf("String(%q) = %q; want it unchanged", in, got)
		}
	}
	parts := []string{"<", ">", "/", "</", "token", "password", "key", "a", "ns:", " ", "\n", "=", ":", "\"", "'", "REDACTED",
		"REDACTED</", "<token ", "<token/>", "<token>", "</token>", "<password>", "</password", "S3CRET", "?", "x=y",
		"-----BEGIN", "-----END", "-----", "&", "%", "%3C", "\\", "Authorization:", "Bearer", "http://u:p@h/?k=v"}
	rapid.Check(t, func(rt *rapid.T) {
		in := strings.Join(rapid.SliceOfN(rapid.SampledFrom(parts), 0, 24).Draw(rt, "parts"), "")
		got := redact.String(in)
		if again := redact.String(got); again != got {
			rt.Fatalf("not idempotent: %q -> %q -> %q", in, got, again)
		}
	})
}

// checkMasked fails t for each of inputs whose String still holds
// "S3CRET", or whose String changes when redacted again.
func checkMasked(t *testing.T, inputs ...string) {
	t.Helper()
	for _, in := range inputs {
		got := redact.String(in)
		if strings.Contains(got, "S3CRET") {
			t.Errorf("String(%q) = %q: a secret passes", in, got)
		}
		if again := redact.String(got); again != got {
			t.Errorf("String(%q) = %q, then %q: not idempotent", in, got, again)
		}
	}
}

// The values of the parameters that page or bound a query are kept when
// short and plain, so a stop says which page failed; every other value,
// and a paging value that is not plain, is masked.
func TestQueryKeepsWhichPage(t *testing.T) {
	for q, want := range map[string]string{
		"page=3&per_page=50&apikey=k":                        "page=3&per_page=50&apikey=REDACTED",
		"symbol=BTCUSDT&interval=1m&startTime=1700000000000": "symbol=BTCUSDT&interval=1m&startTime=1700000000000",
		"since=2026-01-01T00%3A00%3A00Z&limit=100":           "since=2026-01-01T00%3A00%3A00Z&limit=100",
		"cursor=abc&after=xyz&token=t":                       "cursor=REDACTED&after=REDACTED&token=REDACTED",
		"to=%2B15551234567&from=a%40b.c":                     "to=REDACTED&from=REDACTED",
		"page=" + strings.Repeat("a", 41):                    "page=REDACTED",
		"limit=1;drop table":                                 "limit=REDACTED",
	} {
		if got := redact.Query(q); got != want {
			t.Errorf("Query(%q) = %q, want %q", q, got, want)
		}
	}
}
